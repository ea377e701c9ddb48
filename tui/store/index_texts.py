"""The texts of a session's journal as the search index (`tui.store.index`) holds them: a turn's
events cut into texts (`texts_of`, used to index and to show a hit), and a block of journal lines
cut into its turns (and events between turns), each turn's texts with the rowid it is indexed at.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

__all__ = ["WHERE", "Segment", "Text", "Where", "as_str", "cut", "decode", "decode_all", "micros", "texts_of"]

Where = Literal["prompt", "reply", "tool", "error", "note", "question", "answer", "child"]
WHERE: tuple[Where, ...] = ("prompt", "reply", "tool", "error", "note", "question", "answer", "child")
"""Where a text of a session can be (``--in``)."""

_HEAD = re.compile(rb'^\{"seq":\d+,"at":"([^"]*)","type":"([a-z_]+)"')
_TURN_START = b"turn_started"
_TURN_END = b"turn_ended"
_KEPT = frozenset(
    {
        b"turn_started",
        b"text",
        b"tool_started",
        b"tool_updated",
        b"tool_output",
        b"tool_ended",
        b"turn_ended",
        b"note",
        b"question_asked",
        b"question_resolved",
        b"child_started",
        b"child_asking",
        b"child_ended",
    }
)
"""The events whose words are searched; the others (status, queue, …) are not decoded."""


# --- a turn's texts --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Text:
    """One text of a turn (or of an event between turns), as searched and shown."""

    where: Where
    name: str
    """The tool's name (``where == "tool"``, or a tool's ``error``); else empty."""
    text: str


def as_str(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def texts_of(events: list[dict[str, Any]]) -> list[Text]:
    """The texts of one turn's events (or of one event between turns), in a fixed order: the
    same events always give the same list, so a hit names a text by its place in it.

    A tool call is one text: its arguments, its title, then its whole output joined. The reply is
    ``turn_ended``'s (the text pieces joined when the turn has no ending).
    """
    out: list[Text] = []
    tools: dict[str, list[str]] = {}
    names: dict[str, str] = {}
    pieces: list[str] = []
    ended = False
    later: list[Text] = []
    for event in events:
        typ = event.get("type")
        if typ == "turn_started":
            out.append(Text("prompt", "", as_str(event.get("prompt"))))
        elif typ == "text":
            pieces.append(as_str(event.get("text")))
        elif typ == "tool_started":
            call = as_str(event.get("call_id"))
            names[call] = as_str(event.get("name"))
            args = event.get("args") or {}
            head = [as_str(v) for v in args.values()] if isinstance(args, dict) else [as_str(args)]
            tools[call] = [*head, as_str(event.get("title")), "\n"]
        elif typ == "tool_updated":
            call = as_str(event.get("call_id"))
            part = tools.setdefault(call, [])
            args = event.get("args")
            if isinstance(args, dict):
                part += [as_str(v) + "\n" for v in args.values()]
            if event.get("title"):
                part.append(as_str(event.get("title")) + "\n")
            if event.get("output"):
                part.append(as_str(event.get("output")))
        elif typ == "tool_output":
            tools.setdefault(as_str(event.get("call_id")), []).append(as_str(event.get("text")))
        elif typ == "tool_ended":
            if event.get("error"):
                later.append(
                    Text("error", names.get(as_str(event.get("call_id")), ""), as_str(event["error"]))
                )
        elif typ == "turn_ended":
            ended = True
            out.append(Text("reply", "", as_str(event.get("reply"))))
            if event.get("error"):
                later.append(Text("error", "", as_str(event["error"])))
        elif typ == "note":
            later.append(Text("note", as_str(event.get("source")), as_str(event.get("text"))))
        elif typ == "question_asked":
            options = [as_str(o.get("label")) for o in event.get("options") or [] if isinstance(o, dict)]
            later.append(Text("question", "", "\n".join([as_str(event.get("text")), *options])))
        elif typ == "question_resolved":
            said = [*(as_str(s) for s in event.get("selected") or []), as_str(event.get("freeform"))]
            later.append(Text("answer", "", "\n".join(s for s in said if s)))
        elif typ == "child_started":
            later.append(Text("child", "", as_str(event.get("prompt"))))
        elif typ == "child_asking":
            question = event.get("question")
            if isinstance(question, dict):
                later.append(Text("child", "", as_str(question.get("text"))))
        elif typ == "child_ended":
            later.append(Text("child", "", as_str(event.get("error"))))
    if not ended and pieces:
        out.append(Text("reply", "", "".join(pieces)))
    out += [Text("tool", names.get(call, ""), "".join(part)) for call, part in tools.items()]
    out += later
    return [t for t in out if t.text.strip()]


@dataclass
class Segment:
    """A turn's lines (or one event's between turns), as cut from a block of journal."""

    start: int
    turn: int
    at: str
    first: int = 0
    """Its first line among the block's decoded ones."""
    last: int = 0
    """Past its last line among them."""
    stop: int = 0
    """The byte past its last line."""
    ended: bool = False
    text: list[bytes] = field(default_factory=list)
    """Its `text` lines, read only when it has no ending (whose reply holds them all)."""


def micros(at: str) -> int:
    try:
        stamp = datetime.fromisoformat(at)
    except ValueError:
        return 0
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return int(stamp.timestamp() * 1_000_000)


def decode(line: bytes) -> dict[str, Any] | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def decode_all(lines: list[bytes]) -> list[dict[str, Any] | None]:
    """Each line's event, decoded at once (None for a line that is no event)."""
    if not lines:
        return []
    try:
        events = json.loads(b"[" + b",".join(lines) + b"]")
    except ValueError:
        return [decode(line) for line in lines]
    return [e if isinstance(e, dict) else None for e in events]


def cut(data: bytes, upto: int, turns: int) -> tuple[list[tuple[int, int, Text, Segment]], int, int]:
    """The texts of the whole lines `data` (the journal's from byte `upto` on, `turns` turns
    started before it), each with its rowid, its place among its turn's texts and its segment.

    Returns:
        (the texts, the new `upto`, turns started before it): a turn still open is left out.
    """
    # One pass over the heads cuts the lines into segments (a turn, or one event between
    # turns); the lines worth reading are then decoded at once, in one call.
    kept: list[bytes] = []
    segments: list[Segment] = []
    open_: Segment | None = None
    done, done_turns = upto, turns  # everything before `done` is indexed (or is no turn's)
    at = 0
    for line in data.split(b"\n")[:-1]:
        start = upto + at
        at += len(line) + 1
        head = _HEAD.match(line)
        if head is not None:
            typ, stamp = head.group(2), head.group(1).decode()
        else:
            event = decode(line)
            if event is None:
                continue
            typ, stamp = str(event.get("type", "")).encode(), str(event.get("at", ""))
        if typ == _TURN_START:
            if open_ is not None:  # a turn that never ended: it ends where the next starts
                open_.stop = start
                segments.append(open_)
                done, done_turns = start, turns
            turns += 1
            open_ = Segment(start, turns, stamp, first=len(kept))
        if typ not in _KEPT:
            if open_ is None:
                done, done_turns = upto + at, turns
            continue
        if open_ is not None:
            if typ == b"text":
                open_.text.append(line)
                continue
            kept.append(line)
            open_.last = len(kept)
            if typ == _TURN_END:
                open_.stop = upto + at
                open_.ended = True
                segments.append(open_)
                open_ = None
                done, done_turns = upto + at, turns
            continue
        kept.append(line)
        segments.append(Segment(start, turns, stamp, first=len(kept) - 1, last=len(kept), stop=upto + at))
        done, done_turns = upto + at, turns
    events = decode_all(kept)
    batch: list[tuple[int, int, Text, int]] = []
    for segment in segments:
        if segment.stop > done:
            continue
        part = events[segment.first : segment.last]
        if segment.text and not segment.ended:
            part += [e for e in decode_all(segment.text) if e is not None]
        texts = texts_of([e for e in part if e is not None])
        # Newest first means a turn's texts read from the last (rowid DESC): its first text
        # gets the highest rowid, so that within a turn the prompt comes first.
        base = (micros(segment.at) or 1) * 16
        for k in range(len(texts)):
            batch.append((base + len(texts) - 1 - k, k, texts[k], id(segment)))
    by_id = {id(s): s for s in segments}
    return [(rowid, k, text, by_id[key]) for rowid, k, text, key in batch], done, done_turns
