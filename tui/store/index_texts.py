"""The texts of a session's journal as the search index (`tui.store.index`) holds them: a turn's
events cut into texts (`texts_of`, used to index and to show a hit), a block of journal lines
cut into its turns (and events between turns), each turn's texts with the rowid it is indexed at
(`cut`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple

__all__ = [
    "WHERE",
    "Segment",
    "Text",
    "Where",
    "as_str",
    "cut",
    "decode",
    "decode_all",
    "micros",
    "texts_of",
]

Where = Literal["prompt", "reply", "tool", "error", "note", "question", "answer", "child"]
WHERE: tuple[Where, ...] = ("prompt", "reply", "tool", "error", "note", "question", "answer", "child")
"""Where a text of a session can be (``--in``)."""

_HEAD = re.compile(rb'^\{"seq":\d+,"at":"([^"]*)","type":"([a-z_]+)"')
_TEXT_HEAD = re.compile(rb'^\{"seq":\d+,"at":"[^"]*","type":"text"')
_TURN_START = b"turn_started"
_TURN_END = b"turn_ended"
_TEXT = b"text"
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
_LINE = re.compile(
    rb'\n(?:\{"seq":\d+,"at":"([^"]*)","type":"('
    + b"|".join(sorted(_KEPT))
    + rb')"[^\n]*|(?!\{"seq":\d+,"at":"[^"]*","type":"[a-z_]+")[^\n]*)(?=\n)'
)
"""After a newline, a line whose words are searched, or one written otherwise (its type read
from it): the other lines are skipped by the scan itself."""


# --- a turn's texts --------------------------------------------------------------------------
class Text(NamedTuple):
    """One text of a turn (or of an event between turns), as searched and shown (a tuple: a
    build makes millions)."""

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
        get = event.get
        typ = get("type")
        # The commonest first: a tool's output pieces, then a turn's own events.
        if typ == "tool_output":
            call, text = get("call_id"), get("text")
            call = call if type(call) is str else as_str(call)
            part = tools.get(call)
            if part is None:
                part = tools[call] = []
            part.append(text if type(text) is str else as_str(text))
        elif typ == "text":
            text = get("text")
            pieces.append(text if type(text) is str else as_str(text))
        elif typ == "tool_started":
            call = as_str(get("call_id"))
            names[call] = as_str(get("name"))
            args = get("args") or {}
            # One argument a line, as a call's updates add theirs: two arguments' words never join.
            head = [as_str(v) + "\n" for v in args.values()] if isinstance(args, dict) else [as_str(args)]
            tools[call] = [*head, as_str(get("title")), "\n"]
        elif typ == "turn_started":
            out.append(Text("prompt", "", as_str(get("prompt"))))
        elif typ == "turn_ended":
            ended = True
            out.append(Text("reply", "", as_str(get("reply"))))
            if get("error"):
                later.append(Text("error", "", as_str(event["error"])))
        elif typ == "tool_ended":
            if get("error"):
                later.append(Text("error", names.get(as_str(get("call_id")), ""), as_str(event["error"])))
        elif typ == "tool_updated":
            call = as_str(get("call_id"))
            part = tools.setdefault(call, [])
            args = get("args")
            if isinstance(args, dict):
                part += [as_str(v) + "\n" for v in args.values()]
            if get("title"):
                part.append(as_str(get("title")) + "\n")
            if get("output"):
                part.append(as_str(get("output")))
        elif typ == "note":
            later.append(Text("note", as_str(get("source")), as_str(get("text"))))
        elif typ == "question_asked":
            options = [as_str(o.get("label")) for o in get("options") or [] if isinstance(o, dict)]
            later.append(Text("question", "", "\n".join([as_str(get("text")), *options])))
        elif typ == "question_resolved":
            said = [*(as_str(s) for s in get("selected") or []), as_str(get("freeform"))]
            later.append(Text("answer", "", "\n".join(s for s in said if s)))
        elif typ == "child_started":
            later.append(Text("child", "", as_str(get("prompt"))))
        elif typ == "child_asking":
            question = get("question")
            if isinstance(question, dict):
                later.append(Text("child", "", as_str(question.get("text"))))
        elif typ == "child_ended":
            later.append(Text("child", "", as_str(get("error"))))
    if not ended and pieces:
        out.append(Text("reply", "", "".join(pieces)))
    out += [Text("tool", names.get(call, ""), "".join(part)) for call, part in tools.items()]
    out += later
    # Not `strip()`: that would copy each whole output only to look at it.
    return [t for t in out if t.text and not t.text.isspace()]


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
    # One scan (`_LINE`) finds the lines worth reading, skipping in C the others (a status, a
    # thinking piece, …): those only move `upto`, which is known at the end. A line it cannot
    # read (torn) is `_cut_lines`'s, which reads every line.
    kept: list[bytes] = []
    segments: list[Segment] = []
    unended: list[Segment] = []
    open_: Segment | None = None
    first = turns
    for found in _LINE.finditer(b"\n" + data):
        typ, stamp = found[2], found[1]
        if typ is None:  # a line written otherwise (by hand): its type is read from it
            event = decode(found[0][1:])
            if event is None:
                return _cut_lines(data, upto, first)
            typ = str(event.get("type", "")).encode()
            if typ not in _KEPT:
                continue
            stamp = str(event.get("at", "")).encode()
        if typ == _TEXT and open_ is not None:
            continue  # the reply holds it (read again below for a turn that never ended)
        start = upto + found.start()
        if typ == _TURN_START:
            if open_ is not None:  # a turn that never ended: it ends where the next starts
                open_.stop = start
                segments.append(open_)
                unended.append(open_)
            turns += 1
            open_ = Segment(start, turns, stamp.decode(), first=len(kept))
        kept.append(found[0][1:])
        if open_ is None:
            segments.append(
                Segment(start, turns, stamp.decode(), len(kept) - 1, len(kept), upto + found.end())
            )
            continue
        open_.last = len(kept)
        if typ == _TURN_END:
            open_.stop = upto + found.end()
            open_.ended = True
            segments.append(open_)
            open_ = None
    if open_ is None:
        done, done_turns = upto + len(data), turns
    else:
        done, done_turns = open_.start, open_.turn - 1
    for segment in unended:  # its reply is its text pieces
        segment.text = [
            line for line in data[segment.start - upto : segment.stop - upto].split(b"\n") if _is_text(line)
        ]
    return _texts(segments, decode_all(kept)), done, done_turns


def _is_text(line: bytes) -> bool:
    if _TEXT_HEAD.match(line):
        return True
    if _HEAD.match(line):
        return False
    event = decode(line)
    return event is not None and event.get("type") == "text"


def _texts(
    segments: list[Segment], events: list[dict[str, Any] | None]
) -> list[tuple[int, int, Text, Segment]]:
    batch: list[tuple[int, int, Text, Segment]] = []
    for segment in segments:
        part = events[segment.first : segment.last]
        if segment.text and not segment.ended:
            part += [e for e in decode_all(segment.text) if e is not None]
        texts = texts_of([e for e in part if e is not None])
        # Newest first means a turn's texts read from the last (rowid DESC): its first text
        # gets the highest rowid, so that within a turn the prompt comes first.
        base = (micros(segment.at) or 1) * 16
        for k in range(len(texts)):
            batch.append((base + len(texts) - 1 - k, k, texts[k], segment))
    return batch


def _cut_lines(data: bytes, upto: int, turns: int) -> tuple[list[tuple[int, int, Text, Segment]], int, int]:
    """`cut`, reading every line (a block holding a line that is no event)."""
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
    segments = [segment for segment in segments if segment.stop <= done]
    return _texts(segments, decode_all(kept)), done, done_turns
