"""How the pieces of a turn read on screen: its prompt line, a tool call's title, program output,
its outcome. One function each, used by the ended turn, the running turn and anything else that
shows them, so that a turn reads the same everywhere."""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text

from tui.protocol import By, TurnRecord
from tui.protocol.state import who

__all__ = ["outcome_text", "prompt_text", "tool_title", "verbatim_text"]


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = text.replace("\n", "⏎")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_title(
    name: str, args: dict[str, Any], status: str | None, *, title: str | None = None, kind: str | None = None
) -> str:
    """A tool call's one-line summary: ``ask(question='…') · completed``, or, when the agent
    titled the call, ``Edit notes.txt · edit · completed``."""
    state = status or "running"
    if title:
        return " · ".join(x for x in (_short(title, 90), kind, state) if x)
    shown = ", ".join(f"{k}={_short(v, 40)}" for k, v in args.items())
    return f"{name}({_short(shown, 70)}) · {state}"


def verbatim_text(source: str) -> Text:
    """Program output as a terminal shows it: no markup, every space and line kept."""
    return Text(source.rstrip("\n"), no_wrap=False, end="")


def prompt_text(prompt: str, by: By, style: Any, client_id: str | None = None) -> Text:
    """The first line(s) of a turn: the prompt and who sent it, with what (``root (tui send)``)."""
    text = Text()
    text.append("\u276f ", style=style("turn--mark"))
    # Continuation lines start under the first line's text, not under the mark.
    text.append(prompt.rstrip("\n").replace("\n", "\n  "), style=style("turn--prompt"))
    text.append(f"  · {who(by, client_id)}", style=style("turn--who"))
    return text


def outcome_text(record: TurnRecord, style: Any) -> Text | None:
    """The line saying a turn failed or was interrupted (nothing for a completed one)."""
    if record.outcome == "failed":
        reason = (record.error or "").strip().splitlines()
        return Text("✗ failed" + (f": {reason[-1]}" if reason else ""), style=style("turn--failed"))
    if record.outcome == "interrupted":
        return Text("■ interrupted", style=style("turn--interrupted"))
    return None
