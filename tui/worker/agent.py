"""What runs a turn: the `Agent` contract between the worker and an agent.

The worker hands an agent a `TurnIO` for each turn. Everything the agent does that a person
should see goes through it (reply text, tool calls, questions), and the worker turns each call
into journal events. An agent never touches the journal or the bridge.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from tui.errors import InvalidModel
from tui.protocol import Option

__all__ = ["Agent", "Answer", "QuestionCancelled", "QuestionDismissed", "TurnIO", "TurnOutcome"]


@dataclass(frozen=True)
class TurnOutcome:
    """How a turn ended, as the agent sees it."""

    outcome: Literal["completed", "failed", "interrupted"]
    error: str | None = None
    usage: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Answer:
    """A person's answer to a question: option labels and/or free text."""

    selected: list[str]
    freeform: str | None = None


class QuestionDismissed(Exception):
    """The question was dismissed by a person."""


class QuestionCancelled(Exception):
    """The question was withdrawn (the turn was interrupted or the worker is leaving)."""


class TurnIO(Protocol):
    """The running turn, as an agent reaches it."""

    @property
    def turn_id(self) -> str: ...

    @property
    def prompt(self) -> str: ...

    @property
    def interrupted(self) -> bool:
        """Whether someone asked this turn to stop."""
        ...

    def text(self, text: str) -> None:
        """Stream a chunk of the reply."""

    def tool_started(self, name: str, args: dict[str, Any]) -> str:
        """Say a tool call began; returns its call id."""
        ...

    def tool_ended(
        self,
        call_id: str,
        status: Literal["completed", "still_working", "terminated", "error"],
        value: Any = None,
        error: str | None = None,
    ) -> None:
        """Say a tool call ended."""

    async def ask(self, text: str, options: list[Option], *, multiple: bool, freeform: bool) -> Answer:
        """Ask the people attached; waits for the first answer.

        Raises:
            QuestionDismissed: someone dismissed it.
            QuestionCancelled: the turn is ending.
        """
        ...


class Agent(ABC):
    """Runs a session's turns, one at a time.

    Attributes:
        name: the agent's name as the session records it (``python``).
        model: the model it uses, None when it has none.
    """

    name: str
    model: str | None = None

    async def start(self) -> None:  # noqa: B027 - optional
        """Get ready (warm a sandbox); called once, after the bridge listens. Default: nothing."""

    @abstractmethod
    async def run_turn(self, turn: TurnIO) -> TurnOutcome:
        """Run one turn to its end. It returns soon after `interrupt` is called."""

    def interrupt(self) -> None:  # noqa: B027 - optional
        """Ask the running turn to stop. Default: nothing (the worker cancels the turn's task)."""

    def check_model(self, model: str) -> None:
        """Accept or refuse a switch to `model`. Default: refused, this agent has no models.

        Raises:
            InvalidRequest: ``invalid_model``.
        """
        raise InvalidModel(
            f"this session runs the {self.name} agent, which has no models to switch to; "
            "model-backed sessions are not available in this version yet"
        )

    async def close(self) -> None:  # noqa: B027 - optional
        """Release what `start` took. Default: nothing."""
