"""How the pieces of a turn read on screen: its prompt line, a tool call's title, program output,
its outcome. One function each, used by the ended turn, the running turn and anything else that
shows them, so that a turn reads the same everywhere."""

from __future__ import annotations

import json
import re
from datetime import datetime
from functools import lru_cache
from typing import Any

from rich.console import RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text

from tui.protocol import By, TurnRecord
from tui.protocol.state import who
from tui.protocol.wording import ASKING, question_words
from tui.protocol.wording import first_line as _first_line
from tui.terminal import visible

__all__ = [
    "ASKING",
    "duration_text",
    "outcome_text",
    "prompt_block",
    "prompt_text",
    "stamp_text",
    "tool_title",
    "verbatim_text",
]

TITLE_WIDTH = 52
"""How long a tool call's arguments may read before the rest are counted, not shown."""


def _value(value: Any, limit: int) -> str:
    """One argument's value on one line: a string quoted, anything else as JSON; a value longer
    than `limit` is cut at a word and says so."""
    text = repr(value) if isinstance(value, str) else json.dumps(value, default=str)
    text = text.replace("\\n", "⏎").replace("\n", "⏎")
    if len(text) <= limit:
        return text
    if isinstance(value, list) and value:
        # Whole items, then how many more: ["a", "b", …+3]
        items = [json.dumps(v, default=str) for v in value]
        shown: list[str] = []
        for item in items:
            if len(", ".join([*shown, item])) + 8 > limit and shown:
                break
            shown.append(item if len(item) <= limit else item[: limit - 2] + "…")
        rest = len(items) - len(shown)
        return "[" + ", ".join(shown) + (f", …+{rest}" if rest else "") + "]"
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut + "…" + (text[0] if isinstance(value, str) else "")


def tool_title(
    name: str, args: dict[str, Any], status: str | None, *, title: str | None = None, kind: str | None = None
) -> str:
    """A tool call's one-line summary: ``search(pattern='TODO', path='src') · completed``; a
    question (`ASKING`) in words, ``ask: Deploy? · staging / prod · completed``; code
    (``run(code=…)``) by its first line; or, when the agent titled the call,
    ``Edit notes.txt · edit · completed``.

    Arguments are never cut in the middle: those that do not fit are left out and counted
    (``…, +2 more``). Control characters are shown (`tui.terminal.visible`).
    """
    return visible(_tool_title(name, args, status, title=title, kind=kind))


def _tool_title(
    name: str, args: dict[str, Any], status: str | None, *, title: str | None = None, kind: str | None = None
) -> str:
    state = status or "running"
    if title:
        return " · ".join(x for x in (_first_line(title, 90), kind, state) if x)
    if (asked := question_words(name, args)) is not None:
        return f"{asked} · {state}"
    code = args.get("code") if isinstance(args.get("code"), str) else None
    if code is not None:
        rest = {k: v for k, v in args.items() if k != "code"}
        shown = _first_line(code, TITLE_WIDTH)
        extra = f", +{len(rest)} more" if rest else ""
        return f"{name}: {shown}{extra} · {state}"
    shown_args: list[str] = []
    used = 0
    items = [(k, v) for k, v in args.items() if v is not None]  # an argument left out says nothing
    for index, (key, value) in enumerate(items):
        budget = TITLE_WIDTH - used - len(key) - 1
        if index == 0:
            budget = max(budget, 24)  # the first argument is always shown, cut at a word if it must
        elif budget < 8:
            break
        part = f"{key}={_value(value, budget)}"
        if index and used + len(part) > TITLE_WIDTH:
            break
        shown_args.append(part)
        used += len(part) + 2
    left = len(items) - len(shown_args)
    if left:
        shown_args.append(f"… +{left} more")
    return f"{name}({', '.join(shown_args)}) · {state}"


# --- program output ---------------------------------------------------------------------------

_TRACEBACK = "Traceback (most recent call last):"
_FILE_LINE = re.compile(r'^(\s*File )("[^"]*")(, line )(\d+)(?:(, in )(.*))?$')
_CARETS = re.compile(r"^\s*[\^~]+\s*$")
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Group)?)(:.*)?$")
_STYLES = {
    "head": Style(bold=True),
    "path": Style(color="magenta"),
    "number": Style(color="magenta"),
    "function": Style(color="magenta"),
    "caret": Style(color="red", bold=True),
    "name": Style(color="magenta", bold=True),
    "message": Style(color="magenta"),
}


def traceback_spans(line: str, inside: bool) -> tuple[list[tuple[int, int, Style]], bool]:
    """How one line of program output is coloured as part of a Python traceback (as Python 3.13
    shows them): the styled spans of `line` (none for a line outside one) and whether the next
    line is still inside the traceback. `inside`: whether the line before was."""
    if line.startswith(_TRACEBACK) or (line.startswith('  File "') and _FILE_LINE.match(line)):
        inside = True
    if not inside:
        return [], False
    if line.startswith(_TRACEBACK):
        return [(0, len(line), _STYLES["head"])], True
    if (match := _FILE_LINE.match(line)) is not None:
        groups = [(2, "path"), (4, "number"), (6, "function")]
        return [(match.start(g), match.end(g), _STYLES[k]) for g, k in groups if match.group(g)], True
    if _CARETS.match(line):
        return [(0, len(line), _STYLES["caret"])], True
    if not line.startswith(" ") and (match := _EXCEPTION.match(line)) is not None:
        named = [(0, match.end(1), _STYLES["name"])]
        if match.group(2):
            named.append((match.end(1), len(line), _STYLES["message"]))
        return named, False
    return [], bool(not line or line.startswith(" "))


def _colour_traceback(text: Text, source: str) -> None:
    """Colour the lines of Python tracebacks in `text` (of `source`)."""
    offset = 0
    inside = False
    for line in source.split("\n"):
        spans, inside = traceback_spans(line, inside)
        for start, end, style in spans:
            text.stylize(style, offset + start, offset + end)
        offset += len(line) + 1


def verbatim_text(source: str) -> Text:
    """Program output as a terminal shows it: no markup, every space and line kept; the lines of
    a Python traceback coloured as Python shows them (the rest untouched). Escape sequences and
    other control characters are shown (``␛[31m``), never obeyed (`tui.terminal.visible`)."""
    body = visible(source.rstrip("\n"))  # control characters shown, never sent to the terminal
    text = Text(body, no_wrap=False, end="")
    if _TRACEBACK in body or '  File "' in body:
        _colour_traceback(text, body)
    return text


# --- the prompt and the outcome ---------------------------------------------------------------


@lru_cache(maxsize=1)
def python_lexer() -> Any:
    """Pygments' Python lexer, made once: a lexer looked up by name costs a search of Pygments'
    plugins at every prompt (the first one made compiles the lexer's rules, about 60 ms, once a
    process)."""
    from pygments.lexers.python import PythonLexer  # type: ignore[import-untyped]

    return PythonLexer()


@lru_cache(maxsize=256)
def _python(prompt: str) -> Text:
    """`prompt` coloured as Python, in the terminal's own colours, on no background of its own."""
    from rich.syntax import Syntax  # Pygments: imported by the first Python prompt shown

    coloured = Syntax(prompt, python_lexer(), theme="ansi_dark").highlight(prompt)
    plain = Text(coloured.plain)
    for span in coloured.spans:
        s = Style.parse(span.style) if isinstance(span.style, str) else span.style
        plain.stylize(Style(color=s.color, bold=s.bold, italic=s.italic, dim=s.dim), span.start, span.end)
    return plain


def prompt_block(
    prompt: str, by: By, style: Any, client_id: str | None = None, *, python: bool = False
) -> RenderableType:
    """`prompt_text` laid out with a hanging indent: the mark alone in its column, so that a long
    line wraps under the prompt's text, never under the mark (at 80 columns too)."""
    grid = Table.grid(padding=0)
    grid.add_column(width=2, no_wrap=True)
    grid.add_column(ratio=1)
    body = prompt_text(prompt, by, style, client_id, python=python, mark=False)
    grid.add_row(Text("\u276f ", style=style("turn--mark")), body)
    return grid


def prompt_text(
    prompt: str, by: By, style: Any, client_id: str | None = None, *, python: bool = False, mark: bool = True
) -> Text:
    """The first line(s) of a turn: the prompt (highlighted as Python in a python session) and who
    sent it, with what (``root (tui send)``). Without `mark`, neither the mark nor the indent (for
    `prompt_block`)."""
    text = Text()
    indent = "\n  " if mark else "\n"
    if mark:
        text.append("\u276f ", style=style("turn--mark"))
    body = prompt.rstrip("\n")
    if python:
        highlighted = _python(body).copy()
        highlighted.rstrip()
        for n, line in enumerate(highlighted.split("\n")):
            if n:
                text.append(indent)
            line.style = style("turn--prompt")  # under the colours: they win over its colour
            text.append_text(line)
    else:
        # Continuation lines start under the first line's text, not under the mark.
        text.append(body.replace("\n", indent), style=style("turn--prompt"))
    text.append(f"  · {who(by, client_id)}", style=style("turn--who"))
    return text


def duration_text(seconds: float) -> str:
    """``0.4 s``, ``12 s``, ``3 min 5 s``, ``2 h 5 min``."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s" if whole % 60 else f"{whole // 60} min"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def _parse(at: str | None) -> datetime | None:
    if not at:
        return None
    try:
        return datetime.fromisoformat(at)
    except ValueError:
        return None


def stamp_text(record: TurnRecord, now: datetime | None = None) -> str:
    """``#14 · 15:02 · 3.2 s``: the turn's number in the session, when it started (local time; the
    date too when not today) and how long it took, and ``rewound`` when a rewind undid it; what is
    not known is left out."""
    parts = [f"#{record.number}"] if record.number else []
    started, ended = _parse(record.started_at), _parse(record.ended_at)
    if started is not None:
        local = started.astimezone()
        today = (now or datetime.now(local.tzinfo)).astimezone().date()
        parts.append(local.strftime("%H:%M") if local.date() == today else local.strftime("%b %d %H:%M"))
        if ended is not None:
            parts.append(duration_text(max(0.0, (ended - started).total_seconds())))
    if record.rewound:
        parts.append("rewound")
    return " · ".join(parts)


def outcome_text(record: TurnRecord, style: Any) -> Text | None:
    """The last line of an ended turn: how it ended when not completed (``✗ failed: …``), then its
    number, time and duration (nothing when none of that is known)."""
    line = Text()
    if record.outcome == "failed":
        reason = (record.error or "").strip().splitlines()
        line.append("✗ failed" + (f": {reason[-1]}" if reason else ""), style=style("turn--failed"))
    elif record.outcome == "interrupted":
        line.append("■ interrupted", style=style("turn--interrupted"))
    stamp = stamp_text(record) if record.outcome is not None else ""
    if stamp:
        line.append(("  · " if line else "") + stamp, style=style("turn--who"))
    return line if line else None
