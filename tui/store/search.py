"""Finding text in a session's ended turns, by reading its journal once, front to back.

The journal is one file that holds every turn whole: a turn's prompt (``turn_started``), its
tool calls' arguments, output and errors (``tool_started``, ``tool_updated``, ``tool_output``,
``tool_ended``) and its whole reply and error (``turn_ended``). It is read in blocks of a few
MiB, lower-cased, and searched for the text as JSON spells it; only the lines where it occurs are
decoded, and the hit is kept once the decoded field holds the text. Memory stays bounded by one
block whatever the session's length, and a search costs one read of the file, not one file per turn.

A tool's output arrives in pieces (every 50 ms of a program's output): a word cut between two
pieces is not found in that call's output.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tui.protocol import SearchHit, TurnRecord

__all__ = ["BLOCK", "Finder", "snippet"]

BLOCK = 4 << 20
"""Bytes read at once."""
SNIPPET = 100
"""Characters of a hit's snippet."""

Where = Literal["prompt", "reply", "tool", "error"]

_TYPE = re.compile(r'"type":"([a-z_]+)"')
_SEARCHED = frozenset(
    {"turn_started", "tool_started", "tool_updated", "tool_output", "tool_ended", "turn_ended"}
)


def snippet(text: str, needle: str, width: int = SNIPPET) -> str:
    """The line of `text` where `needle` (lower case) first occurs, cut to about `width`
    characters around it; ``""`` when it does not occur."""
    at = text.lower().find(needle)
    if at < 0:
        return ""
    at = min(at, len(text))
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    line = text[start : len(text) if end < 0 else end]
    at -= start
    if len(line) <= width:
        return line.strip()
    begin = max(0, min(at - width // 3, len(line) - width))
    cut = line[begin : begin + width].strip()
    return ("…" if begin else "") + cut + ("…" if begin + width < len(line) else "")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _tool_text(name: str, args: dict[str, Any], title: str | None) -> str:
    return "\n".join([*(_text(v) for v in args.values()), title or "", name])


@dataclass
class Finder:
    """One search: the hits found so far (at most `limit`) and how many there are in all.

    Args:
        text: what to find (case-insensitive).
        limit: the most hits kept.
    """

    text: str
    limit: int = 200
    hits: list[SearchHit] = field(default_factory=list)
    total: int = 0
    _seen: set[tuple[str, str]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.needle = self.text.lower()
        # As the journal spells it: JSON escapes quotes, backslashes and control characters.
        self._spelled = json.dumps(self.needle, ensure_ascii=False)[1:-1]

    @property
    def more(self) -> bool:
        """More hits exist than were kept."""
        return self.total > len(self.hits)

    def _hit(self, turn_id: str, where: Where, text: str) -> None:
        if not text or (turn_id, where) in self._seen or self.needle not in text.lower():
            return
        self._seen.add((turn_id, where))
        self.total += 1
        if len(self.hits) < self.limit:
            self.hits.append(SearchHit(turn_id=turn_id, where=where, snippet=snippet(text, self.needle)))

    # --- the journal -------------------------------------------------------------------------
    def journal(self, path: Path, *, upto: int | None = None, skip: str | None = None) -> None:
        """Search the journal's lines up to byte `upto` (its size now when None), leaving out
        the turn `skip` (the running one, searched in memory by `record`)."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            end = os.fstat(fd).st_size if upto is None else upto
            for block in _blocks(fd, end):
                self._block(block, skip)
        finally:
            os.close(fd)

    def _block(self, text: str, skip: str | None) -> None:
        low = text.lower()
        if len(low) != len(text):
            # A character whose lower case is longer (İ): search line by line instead.
            for line in text.split("\n"):
                if self._spelled in line.lower():
                    self._line(line, skip)
            return
        at = low.find(self._spelled)
        while at >= 0:
            start = low.rfind("\n", 0, at) + 1
            end = low.find("\n", at)
            end = len(low) if end < 0 else end
            self._line(text[start:end], skip)
            at = low.find(self._spelled, end)

    def _line(self, line: str, skip: str | None) -> None:
        head = _TYPE.search(line, 0, 200)
        if head is None or head.group(1) not in _SEARCHED:
            return
        try:
            event = json.loads(line)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        turn_id = event.get("turn_id")
        if not isinstance(turn_id, str) or turn_id == skip:
            return
        typ = head.group(1)
        if typ == "turn_started":
            self._hit(turn_id, "prompt", _text(event.get("prompt", "")))
        elif typ == "tool_started":
            args = event.get("args")
            self._hit(turn_id, "tool", _tool_text(str(event.get("name", "")), args or {}, event.get("title")))
        elif typ == "tool_updated":
            args = event.get("args")
            self._hit(turn_id, "tool", _tool_text("", args or {}, event.get("title")))
            self._hit(turn_id, "tool", _text(event.get("output") or ""))
        elif typ == "tool_output":
            self._hit(turn_id, "tool", _text(event.get("text", "")))
        elif typ == "tool_ended":
            self._hit(turn_id, "error", _text(event.get("error") or ""))
        elif typ == "turn_ended":
            self._hit(turn_id, "reply", _text(event.get("reply", "")))
            self._hit(turn_id, "error", _text(event.get("error") or ""))

    # --- one record --------------------------------------------------------------------------
    def record(self, record: TurnRecord) -> None:
        """Search one turn's record (the running turn's, as it stands)."""
        self._hit(record.turn_id, "prompt", record.prompt)
        for tool in record.tools:
            self._hit(record.turn_id, "tool", _tool_text(tool.name, tool.args, tool.title))
            self._hit(record.turn_id, "tool", tool.output)
            self._hit(record.turn_id, "error", tool.error or "")
        self._hit(record.turn_id, "reply", record.reply)
        self._hit(record.turn_id, "error", record.error or "")


def _blocks(fd: int, end: int) -> Iterator[str]:
    """The file's text up to byte `end`, in blocks of whole lines."""
    offset = 0
    rest = b""
    while offset < end:
        data = os.pread(fd, min(BLOCK, end - offset), offset)
        if not data:
            break
        offset += len(data)
        data = rest + data
        cut = data.rfind(b"\n") + 1
        if cut == 0 and offset < end:
            rest = data
            continue
        rest = data[cut:]
        yield data[:cut].decode("utf-8", "replace")
