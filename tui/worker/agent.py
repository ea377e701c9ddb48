"""What runs a turn: the `Agent` contract between the worker and an agent.

The worker makes an agent from an `AgentContext` (the session, its paths, the user's config, the
earlier turns) and hands it a `TurnIO` for each turn. Everything the agent does that a person
should see goes through the `TurnIO` (reply text, reasoning, a plan, tool calls and their output,
questions, token usage), and the worker turns each call into journal events. An agent never
touches the journal or the bridge.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

from tui.config import Config
from tui.errors import InvalidModel
from tui.protocol import (
    AgentChoice,
    AgentCommand,
    AgentSetting,
    Budget,
    ContextEntry,
    Diff,
    Note,
    Option,
    PlanEntry,
    Question,
    StopReason,
    TurnRecord,
)
from tui.protocol.state import note_line
from tui.store import SessionPaths, SessionRecord

__all__ = [
    "DELIVERY_WAIT",
    "Agent",
    "AgentContext",
    "Answer",
    "QuestionCancelled",
    "QuestionDismissed",
    "TurnIO",
    "TurnOutcome",
    "context_for_agent",
    "notes_for_agent",
    "notes_of",
    "source_header",
    "sources_of",
]

DELIVERY_WAIT = 0.1
"""Seconds `TurnIO.delivered` waits at most for the followers' streams to write what was said."""


@dataclass(frozen=True)
class AgentContext:
    """What an agent knows of its session when the worker makes it."""

    record: SessionRecord
    """The session's record (``session.json``) as the worker read it."""
    paths: SessionPaths
    """The session's files."""
    config: Config
    """The user's settings (``config.toml``)."""
    earlier_turns: Callable[[], list[TurnRecord]] = list
    """The session's ended turns, oldest first, read when called (start-up stays cheap)."""

    @property
    def session_id(self) -> str:
        return self.record.id

    @property
    def session_folder(self) -> Path:
        """``sessions/ID``."""
        return self.paths.root

    @property
    def working_directory(self) -> Path:
        """The folder the session works in (a program's current directory)."""
        return Path(self.record.working_directory)

    @property
    def journal(self) -> Path:
        """The session's journal: for reading only, the worker alone appends."""
        return self.paths.journal

    def agent_folder(self) -> Path:
        """The agent's own folder for its state (``sessions/ID/agent/``), made (0700) when missing."""
        folder = self.paths.root / "agent"
        folder.mkdir(mode=0o700, exist_ok=True)
        return folder


@dataclass(frozen=True)
class TurnOutcome:
    """How a turn ended, as the agent sees it."""

    outcome: Literal["completed", "failed", "interrupted"]
    error: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    stop_reason: StopReason | None = None
    """Why the agent stopped, when it says (`TurnEnded.stop_reason`)."""


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
    """The running turn, as an agent reaches it. Each call becomes one journal event."""

    @property
    def turn_id(self) -> str: ...

    @property
    def number(self) -> int:
        """The turn's 1-based position in the session (what a user sees as ``#N``)."""
        ...

    @property
    def prompt(self) -> str: ...

    @property
    def images(self) -> Sequence[Path]:
        """The images sent with the turn (files in the session's ``images/``), in order."""
        ...

    @property
    def notes(self) -> Sequence[Note]:
        """The notes left for the agent (``tui note``) since the turn before started, oldest
        first: each is given to the agent with this turn (`note_line` says one as people read it)."""
        ...

    @property
    def sources(self) -> Sequence[ContextEntry]:
        """The context sources and their latest values as the turn started (``tui context``)."""
        ...

    @property
    def interrupted(self) -> bool:
        """Whether someone asked this turn to stop."""
        ...

    @property
    def over_budget(self) -> bool:
        """Whether the worker stopped this turn at the session's budget (`spend`, or the wall time
        limit passing): the agent is interrupted, and keeps what the turn said and spent as an
        interrupted turn's."""
        ...

    def text(self, text: str) -> None:
        """Stream a chunk of the reply (a `text` event)."""

    def thinking(self, text: str) -> None:
        """Stream a chunk of the agent's reasoning (a `thinking` event)."""

    async def delivered(self) -> None:
        """Return once what the turn said so far has been written to every follower's stream, or
        after `DELIVERY_WAIT` seconds at most (a follower that stopped reading is not waited for).

        An agent that reads a burst of its provider's stream awaits it after the first text, so
        that text leaves the worker before the rest is read."""

    def plan(self, entries: Sequence[PlanEntry]) -> None:
        """Show the agent's plan, the whole list each time (a `plan` event)."""

    def tool_started(
        self,
        name: str,
        args: dict[str, Any],
        *,
        title: str | None = None,
        kind: str | None = None,
        locations: Sequence[str] = (),
    ) -> str:
        """Say a tool call began (a `tool_started` event); returns its call id.

        Args:
            name: the tool's name.
            args: its arguments.
            title: what the agent says the call does, for people.
            kind: what kind of call it is (``read``, ``edit``, ``execute`` …).
            locations: the files it touches.
        """
        ...

    def tool_output(self, call_id: str, text: str, diff: Diff | None = None) -> None:
        """Stream a tool call's output, or a change it made to a file (a `tool_output` event)."""

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
        """Say a running call again (a `tool_updated` event): each field given replaces the one
        before, None leaves it; `output` and `diffs` replace what the call showed so far."""

    def tool_ended(
        self,
        call_id: str,
        status: Literal["completed", "still_working", "terminated", "error"],
        value: Any = None,
        error: str | None = None,
    ) -> None:
        """Say a tool call ended (a `tool_ended` event)."""

    def usage(self, *, input: int = 0, output: int = 0, cached: int = 0) -> None:
        """Add tokens this turn spent: into `turn_ended.usage`, then the session's tokens in `status`."""

    def spend(self, cost: float | None = None, *, tokens: int | None = None) -> bool:
        """Say what this turn has spent so far: `cost` in USD, `tokens` in and out (each the
        turn's whole so far, not an increment). True when the session reached its budget: the
        worker stopped the turn (stop reason ``budget``), and the agent makes no more requests."""
        return False

    def context(self, used: int, limit: int, *, cost: str | None = None) -> None:
        """Say how much of the model's context window the conversation fills (the status row),
        and what the session has cost so far when the agent says (``$0.42``)."""

    def activity(self, text: str) -> None:
        """Say in the status row what the turn waits for (``retrying in 4 s``); ``""`` clears it.

        The worker clears it when the turn ends.
        """

    def note(self, text: str) -> None:
        """Put a line in the transcript about the session, not part of the reply (a `note` event)."""

    async def delegate(
        self,
        prompt: str,
        *,
        agent: str | None = None,
        model: str | None = None,
        wait: bool = True,
        budget: Budget | None = None,
    ) -> str:
        """Start a child session with `prompt` as its first turn (`tui.worker.children`), with
        `budget` as its limits (None: config.toml's ``[budget]``).

        Returns:
            With `wait`, the child's reply once that turn completed; else the child's id.

        Raises:
            ChildFailed: (with `wait`) the child's turn failed or was interrupted, or its worker
                went away; TuiError: the child could not be made.
        """
        ...

    async def ask(self, text: str, options: list[Option], *, multiple: bool, freeform: bool) -> Answer:
        """Ask the people attached; waits for the first answer.

        Raises:
            QuestionDismissed: someone dismissed it.
            QuestionCancelled: the turn is ending.
        """
        ...


def notes_of(turn: TurnIO) -> Sequence[Note]:
    """The notes given with `turn` (none from a turn that does not carry them)."""
    notes: Sequence[Note] = getattr(turn, "notes", ())
    return notes


def sources_of(turn: TurnIO) -> Sequence[ContextEntry]:
    """The context sources given with `turn` (none from a turn that does not carry them)."""
    sources: Sequence[ContextEntry] = getattr(turn, "sources", ())
    return sources


def source_header(entry: ContextEntry, now: datetime | None = None) -> str:
    """What the agent is told of a source beside its value: its name, what it is, its age."""
    what = {"cmd": f"the output of `{entry.cmd}`", "file": f"the file {entry.path}", "push": "pushed"}[
        entry.kind
    ]
    if entry.at is None:
        age = "no value yet"
    else:
        seconds = max(0, int(((now or datetime.now(UTC)) - entry.at).total_seconds()))
        age = f"changed {seconds} s ago"
    failed = ", the command failed" if entry.error else ""
    why = f"; {entry.why}" if entry.why else ""
    return f"{entry.name}: {what} ({age}{failed}){why}"


def context_for_agent(turn: TurnIO) -> str:
    """The context sources' values as a model reads them, one block each ("" when none)."""
    sources = sources_of(turn)
    if not sources:
        return ""
    now = datetime.now(UTC)
    blocks = ["The session's context sources, as they stand now (kept up to date by the session):"]
    for entry in sources:
        blocks.append(
            f'<context source="{entry.name}">\n{source_header(entry, now)}\n{entry.value}\n</context>'
        )
    return "\n\n".join(blocks)


def notes_for_agent(turn: TurnIO) -> str:
    """The notes given with `turn` as the agent reads them, before its prompt ("" when none)."""
    notes = notes_of(turn)
    if not notes:
        return ""
    lines = [
        "Notes left for you from outside this conversation since your last turn "
        "(read them; they are not the user's prompt):"
    ]
    for note in notes:
        sender = note_line(note).removeprefix("note from ").split(": ", 1)[0]
        lines.append(f"- from {sender} at {note.at:%Y-%m-%d %H:%M} UTC: {note.text}")
    return "\n".join(lines)


class Agent(ABC):
    """Runs a session's turns, one at a time.

    A kind of agent is one module of `tui.worker.agents` that registers its class; the worker
    makes it with `from_context`. Only `run_turn` is required; every other method has a default.

    Attributes:
        name: the agent's name as the session records it (``python``).
        reply_format: how clients show its replies: ``verbatim`` (a program's output, every
            space kept) or ``markdown`` (a model's prose).
        prompt_syntax: what a prompt is: ``python`` (a program: a script is split as Python
            reads it) or ``text``.
        model: the model it uses, None when it has none.
        commands: its own slash commands (completed in the prompt, advertised in ``/info``).
        models: the model profiles `set_model` takes (completed after ``/model``).
        mode: its current mode, when it has modes.
    """

    name: ClassVar[str]
    reply_format: ClassVar[Literal["verbatim", "markdown"]] = "markdown"
    prompt_syntax: ClassVar[Literal["python", "text"]] = "text"
    model: str | None = None
    commands: Sequence[AgentCommand] = ()
    models: Sequence[str] = ()
    mode: str | None = None
    modes: Sequence[AgentChoice] = ()
    """The modes it offers (one of them is `mode`)."""
    settings: Sequence[AgentSetting] = ()
    """Its own settings for the session (an ACP agent's config options: its model among them)."""
    notes: Sequence[str] = ()
    """What the people attached must be told when the worker starts (a ``note`` event each)."""
    on_info: Callable[[], None] | None = None
    """Set by the worker: called by `info_changed`."""
    on_note: Callable[[str], None] | None = None
    """Set by the worker: called by `note`."""

    @property
    def keeps_state(self) -> bool:
        """Whether a new worker picks up where this one left off, nothing lost (a model's message
        log; an ACP agent that loads its session): then an idle worker may let go of the session
        sooner (``[workers] idle_timeout``). Default: False, what it holds dies with the worker."""
        return False

    @classmethod
    @abstractmethod
    def from_context(cls, context: AgentContext) -> Agent:
        """Make the agent of the session `context` describes (cheap: `start` does the slow part)."""

    async def start(self) -> None:  # noqa: B027 - optional
        """Get ready (warm a sandbox); called once, after the bridge listens. Default: nothing."""

    @abstractmethod
    async def run_turn(self, turn: TurnIO) -> TurnOutcome:
        """Run one turn to its end. It returns soon after `interrupt` is called."""

    def interrupt(self) -> None:  # noqa: B027 - optional
        """Ask the running turn to stop. Default: nothing (the worker cancels the turn's task)."""

    def set_model(self, model: str) -> None:
        """Switch to `model` from the next turn, or refuse. Default: refused, this agent has no models.

        The worker writes `model_changed` only once this returned, with `self.model` when the
        agent set it (a profile resolved), else `model`.

        Raises:
            InvalidRequest: ``invalid_model``, saying why.
        """
        raise InvalidModel(
            f"this session runs the {self.name} agent, which has no models to switch to; "
            "start a model session with `tui --model NAME` (`tui models` lists them)"
        )

    def keep(self, model: str | None, chosen: Mapping[str, str]) -> None:
        """What the session chose before this worker: its `model` (``/model``) and the settings
        set from ``/mode`` (`chosen`, by setting), set again once the agent starts. Default:
        nothing to set again (a model session is made with its model)."""
        return

    def set_setting(self, setting: str, value: str) -> None:
        """Switch its mode (`setting` ``mode``) or another of its own `settings` to `value`, or
        refuse. Default: refused, this agent has none; `info_changed` says a change once made.

        Raises:
            InvalidRequest: ``invalid_model``, saying why.
        """
        raise InvalidModel(f"this session runs the {self.name} agent, which has no {setting} to switch")

    def answers_child(self, question: Question) -> bool:
        """Whether this agent will try to answer a child session's `question` itself (then
        `answer_child`). Default: no, the people attached answer; a model agent whose profile's
        ``answers_children`` allows it says yes."""
        return False

    async def answer_child(self, child_id: str, question: Question) -> Answer | None:
        """This agent's answer to a child's question (`answers_child` said it tries), or None:
        it could not, and the people attached answer."""
        return None

    def rewound(self, to_turn: int, turns: Sequence[int]) -> str:
        """The conversation goes back to before turn `to_turn`: turns `turns` (their numbers) are
        undone, and the session's files are as they were before them. The agent forgets those turns
        (or tells its agent so with the next prompt) and returns a few words on what it could not
        take back, for the transcript. Default: nothing is forgotten, and it says so."""
        return "the agent was not told: it still remembers the turns undone"

    def info_changed(self) -> None:
        """Say `commands`, `mode`, `modes` or `settings` changed (also outside turns): the worker
        writes `agent_info`."""
        if self.on_info is not None:
            self.on_info()

    def note(self, text: str) -> None:
        """Say something about the agent in the transcript (a `note` event), in a turn or not."""
        if self.on_note is not None:
            self.on_note(text)

    async def close(self) -> None:  # noqa: B027 - optional
        """Release what `start` took. Default: nothing."""
