"""What an `Attachment` hands its client: typed changes of the session, and what a command did.

Each change is a small frozen dataclass saying what changed, with what the client needs to show it
(the attachment compares the session's state before and after each event once, so a client never
does). A client keeps a table from change type to handler; a type it does not draw it skips.

Changes of the session (`Change`): `Attached` (the first state, before any event), `LinkChanged`,
`TurnStarted`, `Output` (the running turn's text, thinking, tool calls, plan), `TurnEnded`,
`CaughtUp` (turns that started and ended while the client was behind, shown at once),
`QuestionChanged`, `QuestionResolved`, `QueueChanged`, `StateChanged`, `StatusChanged`,
`AgentChanged`, `ModelChanged`, `WorkerStarted`, `Outdated`, `Line` (a line of the transcript outside a turn:
a note, the worker leaving), `OutboxChanged`, `SendFailed`, `PrincipalChanged`.

A `Snapshot` (`Attachment.snapshot()`, taken once per batch) is what a client draws its standing
facts from: the session's status as the batch left it, the running turn's calls and their output,
the link, who this client is.

What a slash command did (`Outcome`, from `Attachment.command`): `Done`, `Failed`, `NotPermitted`,
`Usage`, `Unknown`, `Leave`, `Stopped`, `QueueShown`, `Unqueued`, `Resumed`, `StatsShown`,
`ChildrenShown`, `ContextShown`, `Local`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from tui.errors import TuiError
from tui.link.base import LinkState, Live
from tui.protocol import (
    AgentChoice,
    AgentCommand,
    AgentSetting,
    ImageRef,
    Info,
    PendingQuestion,
    Plan,
    Presence,
    QueueItem,
    TextChunk,
    Thinking,
    ToolEnded,
    ToolOutput,
    ToolStarted,
    ToolUpdated,
    Transcript,
    TurnRecord,
)
from tui.protocol.messages import Delivery
from tui.protocol.principal import Principal
from tui.protocol.state import RunningTurn, State

__all__ = [
    "AgentChanged",
    "Attached",
    "CaughtUp",
    "Change",
    "ChildrenShown",
    "ContextShown",
    "Done",
    "Failed",
    "Leave",
    "Line",
    "LinkChanged",
    "Local",
    "ModelChanged",
    "NotPermitted",
    "OutboxChanged",
    "Outcome",
    "Outdated",
    "Outgoing",
    "Output",
    "PrincipalChanged",
    "QuestionChanged",
    "QuestionResolved",
    "QueueChanged",
    "QueueShown",
    "Resumed",
    "SendFailed",
    "Snapshot",
    "StateChanged",
    "StatsShown",
    "StatusChanged",
    "Stopped",
    "TurnEnded",
    "TurnStarted",
    "Unknown",
    "Unqueued",
    "Usage",
    "WorkerStarted",
]


@dataclass(frozen=True)
class Snapshot:
    """The session's standing facts as one batch left them, for a client to draw (the status
    rows): worked out from the attachment's state, its link and its client in one place
    (`Attachment.snapshot`), so no widget keeps a copy of its own."""

    state: str = "idle"
    """``idle``, ``working``, ``asking``, or ``ended`` once the worker is gone."""
    turn_id: str | None = None
    """The running turn (None once the worker is gone)."""
    model: str | None = None
    agent: str | None = None
    """The agent the session runs (``python``, ``model``, ``claude`` …); None before it is known."""
    agent_model: str | None = None
    """The model an ACP agent says it uses."""
    mode: str | None = None
    """The agent's mode, by name."""
    cost: str = ""
    """What the session cost so far, as its agent reports it."""
    context_used: int = 0
    context_limit: int = 0
    tokens: tuple[int, int] = (0, 0)
    """Tokens the session sent to its model and got back (a model session's)."""
    activity: str = ""
    """What the running turn waits for (``retrying in 4 s``)."""
    queued: int = 0
    children: dict[str, int] = field(default_factory=dict)
    turn: RunningTurn | None = field(default=None, compare=False)
    """The running turn as the reducer keeps it (its calls, their output bounded): read by the
    running turn's view, never changed (None once the worker is gone)."""
    where: str = "local"
    """Where the session runs (`AttachLink.place`): ``local``, ``ray node 10.0.0.5``, ``remote lab``."""
    link: LinkState = field(default_factory=Live)
    version: str = ""
    """The tui the session's worker runs."""
    installed: str = ""
    """The tui installed, when the worker runs an older one (empty otherwise)."""
    attached: tuple[Presence, ...] = ()
    """Who has the session open now, as the worker's last `status` said."""
    principal: Principal = field(default_factory=Principal)
    """Who this client acts as (a participant sees its kind, and a collaborator its turns left)."""


@dataclass
class Outgoing:
    """A prompt on its way to the worker: kept in the outbox until the worker took it, sent again
    (with the same request id, so at most once) when the link comes back."""

    prompt: str
    request_id: str
    delivery: Delivery
    """How it is sent: ``auto`` (the worker starts it now or queues it behind the running turn:
    the app, an editor), ``queue`` (queued whatever runs), or ``now`` (a script: when another
    turn runs it waits until the session is idle and is sent again)."""
    images: tuple[ImageRef, ...] = ()
    """The images sent with it (uploaded to the session first)."""
    waiting: Literal["", "live", "idle"] = ""
    """Why it is not being sent now: the link is down, or another turn runs."""
    turn_id: str | None = None
    """The turn it started, once the worker took it (empty for a queued one)."""
    error: TuiError | None = None
    """Why the worker refused it."""
    settled: bool = False
    """The worker took it or refused it: it left the outbox."""


# --- changes of the session --------------------------------------------------------------------
@dataclass(frozen=True)
class Attached:
    """The session as it was when the client attached: shown before any event."""

    transcript: Transcript
    info: Info | None
    principal: Principal


@dataclass(frozen=True)
class LinkChanged:
    """The link went live, is reconnecting, or is gone (`Gone` ends the changes)."""

    state: LinkState
    was: LinkState | None


@dataclass(frozen=True)
class TurnStarted:
    """A turn started (`record` as it is so far); `own` when this client's prompt started it."""

    record: TurnRecord
    request_id: str | None
    own: bool


OutputEvent = TextChunk | Thinking | ToolStarted | ToolUpdated | ToolOutput | ToolEnded | Plan


@dataclass(frozen=True)
class Output:
    """The running turn said something: reply text, thinking, a tool call's start, update,
    output or end, or its plan (`event`, as the worker wrote it)."""

    turn_id: str
    event: OutputEvent


@dataclass(frozen=True)
class TurnEnded:
    """The turn shown running ended (`record`: its whole record)."""

    record: TurnRecord


@dataclass(frozen=True)
class CaughtUp:
    """Turns that started and ended within what arrived at once (the client was behind, e.g. a
    script's quick turns): shown ended together, once."""

    records: tuple[TurnRecord, ...]


@dataclass(frozen=True)
class QuestionChanged:
    """The pending question is now `question` (None: none is pending, or the worker is gone)."""

    question: PendingQuestion | None


@dataclass(frozen=True)
class QuestionResolved:
    """The question shown was resolved; `line` says how (``answered: yes``)."""

    question_id: str
    line: str
    elsewhere: bool
    """Another client resolved it (and not by cancelling it)."""


@dataclass(frozen=True)
class QueueChanged:
    queue: tuple[QueueItem, ...]
    held: bool
    """The queue waits after an interrupt until someone resumes it."""


@dataclass(frozen=True)
class StateChanged:
    """The session went idle, working or asking (``ended`` once the worker is gone)."""

    state: State | Literal["ended"]


@dataclass(frozen=True)
class StatusChanged:
    """The worker's figures (a `status` event)."""

    model: str | None
    context_used: int
    context_limit: int
    children: dict[str, int]
    attached: tuple[Presence, ...]
    tokens: tuple[int, int]
    activity: str
    cost: str
    working: bool


@dataclass(frozen=True)
class AgentChanged:
    """The agent's commands, modes or settings changed."""

    commands: tuple[AgentCommand, ...]
    mode: str | None
    modes: tuple[AgentChoice, ...]
    settings: tuple[AgentSetting, ...]


@dataclass(frozen=True)
class ModelChanged:
    model: str


@dataclass(frozen=True)
class WorkerStarted:
    """A new worker took the session."""

    version: str
    agent: str
    model: str | None


@dataclass(frozen=True)
class Outdated:
    """Whether this machine's worker runs an older tui than the one installed: ``installed`` is
    that version while it lasts, empty once a worker runs it (the status row says so); ``line``,
    the first time, says what moves the session to it (a line of the transcript)."""

    installed: str
    line: str = ""


@dataclass(frozen=True)
class Line:
    """A line of the transcript outside a turn: a note, the worker leaving, an unknown event."""

    text: str


@dataclass(frozen=True)
class Rewound:
    """A rewind undid turns `first` … `last` (docs/files.md): the turns shown already say so (the
    line saying what the rewind did comes as a `Line` just before)."""

    first: int
    last: int


@dataclass(frozen=True)
class OutboxChanged:
    """What is not sent yet; `waiting` when the link is down for it."""

    items: tuple[Outgoing, ...]
    waiting: bool


@dataclass(frozen=True)
class SendFailed:
    """The worker refused a prompt: it left the outbox unsent."""

    item: Outgoing
    error: TuiError


@dataclass(frozen=True)
class PrincipalChanged:
    """Who this client acts as, asked again (a share's turns left went down)."""

    principal: Principal


Change = (
    Attached
    | LinkChanged
    | TurnStarted
    | Output
    | TurnEnded
    | CaughtUp
    | QuestionChanged
    | QuestionResolved
    | QueueChanged
    | StateChanged
    | StatusChanged
    | AgentChanged
    | ModelChanged
    | WorkerStarted
    | Outdated
    | Line
    | Rewound
    | OutboxChanged
    | SendFailed
    | PrincipalChanged
)


# --- what a command did ------------------------------------------------------------------------
@dataclass(frozen=True)
class Done:
    """The command was carried out; `text`, when there is one, says so."""

    name: str
    text: str = ""


@dataclass(frozen=True)
class Failed:
    """The session refused the command or could not be asked."""

    name: str
    error: TuiError


@dataclass(frozen=True)
class NotPermitted:
    """This client may not do it: `text` says who may (nothing was sent)."""

    text: str


@dataclass(frozen=True)
class Usage:
    """The command needs an argument: `text` says how it is typed."""

    name: str
    text: str


@dataclass(frozen=True)
class Unknown:
    """No such command here."""

    name: str


@dataclass(frozen=True)
class Leave:
    """``/detach``: the client leaves; the session keeps running."""


@dataclass(frozen=True)
class Stopped:
    """``/exit``: the worker stopped (`deleted`: and the session is deleted)."""

    deleted: bool


@dataclass(frozen=True)
class QueueShown:
    """``/queue``: the prompts waiting."""

    queue: tuple[QueueItem, ...]


@dataclass(frozen=True)
class Unqueued:
    """``/unqueue``: `item` was taken back (None: it had started already)."""

    item: QueueItem | None


@dataclass(frozen=True)
class Resumed:
    """``/resume``: whether a held queue runs again."""

    resumed: bool


@dataclass(frozen=True)
class StatsShown:
    """``/stats``: its line."""

    line: str


@dataclass(frozen=True)
class ChildrenShown:
    """``/children``: the lines listing the session's children and how to attach to each."""

    text: str


@dataclass(frozen=True)
class ContextShown:
    """``/context``: the lines listing the session's context sources (age, size, errors)."""

    text: str


@dataclass(frozen=True)
class Local:
    """A command the client carries out itself (``/copy``, ``/find TEXT``, ``/help``)."""

    name: str
    rest: str


Outcome = (
    Done
    | Failed
    | NotPermitted
    | Usage
    | Unknown
    | Leave
    | Stopped
    | QueueShown
    | Unqueued
    | Resumed
    | StatsShown
    | ChildrenShown
    | ContextShown
    | Local
)
