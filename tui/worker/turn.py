"""The running turn of a session's worker as its agent reaches it (`tui.worker.agent.TurnIO`):
each call one event written by the session's `EventWriter`; what it spent, for the budget
`tui.worker.control.TurnControl` holds it to.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tui.errors import InvalidRequest
from tui.protocol import (
    Budget,
    ContextEntry,
    Diff,
    ImageRef,
    Note,
    Option,
    Plan,
    PlanEntry,
    TextChunk,
    Thinking,
    ToolEnded,
    ToolOutput,
    ToolStarted,
    ToolUpdated,
    TurnStarted,
)
from tui.worker.agent import DELIVERY_WAIT, Answer

if TYPE_CHECKING:
    from tui.worker.control import TurnControl

__all__ = ["GO_ON", "Turn", "new_id"]


GO_ON = "(The session's budget was raised: go on where you stopped.)"
"""The prompt a turn stopped at its budget goes on with, once someone raised it."""


def new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(5)}"


class Turn:
    """The running turn, as its agent reaches it (`tui.worker.agent.TurnIO`): each call one event."""

    def __init__(
        self,
        control: TurnControl,
        started: TurnStarted,
        images: Sequence[ImageRef] = (),
        notes: Sequence[Note] = (),
        sources: Sequence[ContextEntry] = (),
    ) -> None:
        self._control = control
        self.notes: Sequence[Note] = tuple(notes)
        self.sources: Sequence[ContextEntry] = tuple(sources)
        self._writer = writer = control.writer
        self.started = started
        self._images = tuple(writer.paths.images / image.file for image in images)
        self.interrupted = False
        self.hold_queue = False
        """Someone interrupted it: the queue waits after it until someone resumes it."""
        self.task: asyncio.Task[None] | None = None
        self.spent: dict[str, int] = {}
        """Tokens this turn spent so far (`usage`), by kind: input, output, cached."""
        self.cost = 0.0
        """USD this turn spent so far (`spend`)."""
        self.tokens = 0
        """Tokens in and out this turn spent so far, as `spend` last said."""
        self.began = time.monotonic()
        self.over_budget = False
        """The worker stopped it at the session's budget: it ends with stop reason ``budget``."""
        self._timer: asyncio.TimerHandle | None = None
        current = writer.state.current
        self.number = current.head.number if current is not None else 0

    @property
    def turn_id(self) -> str:
        return self.started.turn_id

    @property
    def prompt(self) -> str:
        return self.started.prompt

    @property
    def images(self) -> Sequence[Path]:
        return self._images

    def text(self, text: str) -> None:
        if text:
            self._writer.emit_turn(TextChunk(turn_id=self.turn_id, text=text))

    def thinking(self, text: str) -> None:
        if text:
            self._writer.emit_turn(Thinking(turn_id=self.turn_id, text=text))

    async def delivered(self) -> None:
        await self._writer.hub.written(DELIVERY_WAIT)

    def plan(self, entries: Sequence[PlanEntry]) -> None:
        self._writer.emit_turn(Plan(turn_id=self.turn_id, entries=list(entries)))

    def tool_started(
        self,
        name: str,
        args: dict[str, Any],
        *,
        title: str | None = None,
        kind: str | None = None,
        locations: Sequence[str] = (),
    ) -> str:
        call_id = new_id("call")
        self._writer.emit_turn(
            ToolStarted(
                turn_id=self.turn_id,
                call_id=call_id,
                name=name,
                args=args,
                title=title,
                kind=kind,
                locations=list(locations),
            )
        )
        return call_id

    def tool_output(self, call_id: str, text: str, diff: Diff | None = None) -> None:
        if text or diff is not None:
            self._writer.emit_turn(ToolOutput(turn_id=self.turn_id, call_id=call_id, text=text, diff=diff))

    def tool_updated(
        self,
        call_id: str,
        *,
        title: str | None = None,
        kind: str | None = None,
        args: dict[str, Any] | None = None,
        locations: Sequence[str] | None = None,
        output: str | None = None,
        diffs: Sequence[Diff] | None = None,
    ) -> None:
        self._writer.emit_turn(
            ToolUpdated(
                turn_id=self.turn_id,
                call_id=call_id,
                title=title,
                kind=kind,
                args=args,
                locations=None if locations is None else list(locations),
                output=output,
                diffs=None if diffs is None else list(diffs),
            )
        )

    def tool_ended(
        self,
        call_id: str,
        status: Literal["completed", "still_working", "terminated", "error"],
        value: Any = None,
        error: str | None = None,
    ) -> None:
        self._writer.emit_turn(
            ToolEnded(turn_id=self.turn_id, call_id=call_id, status=status, value=value, error=error)
        )

    def usage(self, *, input: int = 0, output: int = 0, cached: int = 0) -> None:
        for kind, tokens in (("input", input), ("output", output), ("cached", cached)):
            if tokens:
                self.spent[kind] = self.spent.get(kind, 0) + tokens
        self._control.check_budget(self)

    def spend(self, cost: float | None = None, *, tokens: int | None = None) -> bool:
        if cost is not None:
            self.cost = max(self.cost, cost)
        if tokens is not None:
            self.tokens = max(self.tokens, tokens)
        return self._control.check_budget(self)

    @property
    def worked(self) -> float:
        """Seconds it worked."""
        return time.monotonic() - self.began

    @property
    def tokens_spent(self) -> int:
        return max(self.tokens, self.spent.get("input", 0) + self.spent.get("output", 0))

    def context(self, used: int, limit: int, *, cost: str | None = None) -> None:
        self._writer.context = (used, limit)
        if cost is not None:
            self._writer.cost = cost
        self._writer.status_changed()

    def activity(self, text: str) -> None:
        self._writer.activity = text
        self._writer.status_changed()

    def note(self, text: str) -> None:
        self._writer.emit_turn(Note(text=text, source=self._control.agent.name))

    async def ask(self, text: str, options: list[Option], *, multiple: bool, freeform: bool) -> Answer:
        return await self._control.ask(self, text, options, multiple=multiple, freeform=freeform)

    async def delegate(
        self,
        prompt: str,
        *,
        agent: str | None = None,
        model: str | None = None,
        wait: bool = True,
        budget: Budget | None = None,
    ) -> str:
        children = self._control.children
        if children is None:
            raise InvalidRequest(
                "this session cannot start children (its worker was started without the access layer)"
            )
        return await children.delegate(
            prompt,
            agent=agent,
            model=model,
            wait=wait,
            turn_id=self.turn_id,
            by=self.started.by,
            budget=budget,
        )
