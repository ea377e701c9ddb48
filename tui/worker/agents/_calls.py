"""The running turn's tool calls of the `acp` agent kind (`tui.worker.agents.acp`): each
``tool_call`` and ``tool_call_update`` by its ACP id mapped to the `TurnIO` tool events, each
content item shown once, and the calls a turn leaves running ended with it (`ToolCalls`)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from acp import schema

from tui.protocol import Diff
from tui.worker.agent import TurnIO
from tui.worker.agents._shapes import text_of

__all__ = ["ToolCalls"]

_KIND_STATUS: dict[str, Literal["completed", "error"]] = {"completed": "completed", "failed": "error"}


@dataclasses.dataclass
class _Call:
    """A running tool call as the agent last described it."""

    ours: str
    """Its call id in the journal."""
    title: str | None
    kind: str | None
    args: dict[str, Any]
    locations: list[str]
    shown: list[str] = dataclasses.field(default_factory=list)
    """Its content items (as JSON) already shown, in order."""


class ToolCalls:
    """The running turn's tool calls by ACP's id: ours, and what was shown of each."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._calls: dict[str, _Call] = {}

    def clear(self) -> None:
        """Forget them all (a new turn starts)."""
        self._calls = {}

    def title_of(self, tool_call_id: str) -> str | None:
        """The title the agent last gave the running call `tool_call_id`, if it is running."""
        known = self._calls.get(tool_call_id)
        return known.title if known is not None else None

    def update(self, turn: TurnIO, update: schema.ToolCallStart | schema.ToolCallProgress) -> None:
        """A ``tool_call`` or ``tool_call_update``: each field it gives replaces the one before
        (an agent first says "Preparing file…" with no input, then the real title and path)."""
        args = (
            None
            if update.raw_input is None
            else update.raw_input
            if isinstance(update.raw_input, dict)
            else {"input": update.raw_input}
        )
        locations = (
            None
            if update.locations is None
            else [
                self._shown_path(loc.path) + (f":{loc.line}" if loc.line else "") for loc in update.locations
            ]
        )
        call = self._calls.get(update.tool_call_id)
        if call is None:
            ours = turn.tool_started(
                update.kind or "tool",
                args or {},
                title=update.title,
                kind=update.kind,
                locations=locations or [],
            )
            call = self._calls[update.tool_call_id] = _Call(
                ours, update.title, update.kind, args or {}, locations or []
            )
        else:
            changed: dict[str, Any] = {}
            for name, value in (
                ("title", update.title),
                ("kind", update.kind),
                ("args", args),
                ("locations", locations),
            ):
                if value is not None and value != getattr(call, name):
                    setattr(call, name, value)
                    changed[name] = value
            if changed:
                turn.tool_updated(call.ours, **changed)
        if update.content is not None:
            self._tool_content(turn, call, update.content)
        if update.status in _KIND_STATUS:
            del self._calls[update.tool_call_id]
            status = _KIND_STATUS[update.status]
            turn.tool_ended(
                call.ours, status, value=update.raw_output, error="failed" if status == "error" else None
            )

    def end_all(
        self, turn: TurnIO | None, status: Literal["completed", "terminated", "error"], error: str | None
    ) -> None:
        """End the calls still running with the turn, and forget them."""
        for call in self._calls.values():
            if turn is not None:
                turn.tool_ended(call.ours, status, error=error)
        self._calls = {}

    def _tool_content(self, turn: TurnIO, call: _Call, content: Sequence[Any]) -> None:
        """The call's content as the agent now says it: what extends what was shown streams as
        output; anything else replaces the call's output and diffs."""
        keys = [c.model_dump_json() for c in content]
        if keys[: len(call.shown)] == call.shown:
            for item in content[len(call.shown) :]:
                text, diff = self._content_of(item)
                turn.tool_output(call.ours, text, diff)
        else:
            pieces = [self._content_of(item) for item in content]
            turn.tool_updated(
                call.ours,
                output="".join(text for text, _ in pieces),
                diffs=[diff for _, diff in pieces if diff is not None],
            )
        call.shown = keys

    def _content_of(self, content: Any) -> tuple[str, Diff | None]:
        """One item of a tool call's content: its text, or the diff of a file it edits."""
        if isinstance(content, schema.FileEditToolCallContent):
            path = self._shown_path(content.path)
            return "", Diff(path=path, old=content.old_text, new=content.new_text)
        if isinstance(content, schema.ContentToolCallContent):
            text = text_of(content.content)
            return (text if text.endswith("\n") else text + "\n"), None
        return "", None

    def _shown_path(self, path: str) -> str:
        """`path` relative to the working directory when it is inside it (as people read it)."""
        for root in (self.workdir, self.workdir.resolve()):
            with contextlib.suppress(ValueError):
                return str(Path(path).relative_to(root))
        return path
