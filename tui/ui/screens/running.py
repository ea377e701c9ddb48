"""What the running turn's view (`TranscriptView.live`) does with each event of the turn: a
call's update, output and end (found by its call id: its block reads the call again from the
reducer's running turn), and what the turn said (text, thinking, a call started, a plan). The
session screen's `_output` hands each event of the running turn here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from tui.protocol import Plan, TextChunk, Thinking, ToolEnded, ToolOutput, ToolStarted, ToolUpdated

__all__ = ["CALL", "SAID"]


CALL: dict[type, Callable[[Any, Any], None]] = {
    ToolUpdated: lambda view, event: view.call_changed(event),
    ToolOutput: lambda view, event: view.call_changed(event),
    ToolEnded: lambda view, event: view.call_changed(event),
}
"""What the running turn's view (`TranscriptView.live`) does with an event of one of its calls."""


async def _add_text(view: Any, event: TextChunk) -> None:
    view.add_text(event.text)


async def _add_thinking(view: Any, event: Thinking) -> None:
    await view.add_thinking(event.text)


async def _tool_started(view: Any, event: ToolStarted) -> None:
    await view.tool_started(event)


async def _plan(view: Any, event: Plan) -> None:
    await view.plan(event.entries)


SAID: dict[type, Callable[[Any, Any], Awaitable[None]]] = {
    TextChunk: _add_text,
    Thinking: _add_thinking,
    ToolStarted: _tool_started,
    Plan: _plan,
}
"""What the running turn's view does with what the turn said."""
