"""The events of a session's journal, as they travel on the bridge.

Every event carries ``seq`` (1, 2, 3 … per session), ``type`` and ``at`` (UTC). `decode_event`
reads one from JSON; an event type this version does not know becomes an `UnknownEvent`, never an
error, since a newer worker may send more.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

__all__ = [
    "EVENT_TYPES",
    "MAX_CONTEXT_VALUE",
    "AgentChoice",
    "AgentCommand",
    "AgentInfo",
    "AgentSetting",
    "Budget",
    "BudgetSet",
    "By",
    "ChildAsking",
    "ChildEnded",
    "ChildStarted",
    "ContextSourceSet",
    "ContextValue",
    "Diff",
    "Event",
    "EventBody",
    "FileChange",
    "FilesChanged",
    "KnownEvent",
    "ModelChanged",
    "Note",
    "Notified",
    "Option",
    "Plan",
    "PlanEntry",
    "Presence",
    "Question",
    "QuestionAsked",
    "QuestionResolved",
    "QueueChanged",
    "QueueItem",
    "Rewound",
    "SettingChanged",
    "ShareChanged",
    "Status",
    "StopReason",
    "TextChunk",
    "Thinking",
    "ToolEnded",
    "ToolOutput",
    "ToolStarted",
    "ToolUpdated",
    "TurnEnded",
    "TurnStarted",
    "UnknownEvent",
    "WorkerLeaving",
    "WorkerStarted",
    "decode_event",
    "now",
]


def now() -> datetime:
    """The current UTC time, the one clock of every event."""
    return datetime.now(UTC)


class By(BaseModel):
    """Who did something: set by the server, never by the client."""

    model_config = ConfigDict(defer_build=True, frozen=True)
    kind: Literal["owner", "participant"] = "owner"
    """`owner` for the machine's user, `participant` for a share."""
    name: str = ""
    """The login name of the owner, or the participant's share name."""
    share: Literal["collaborator", "viewer"] | None = Field(default=None, exclude=True)
    """A participant's share, as the web bridge says it in ``X-Tui-By`` (server side: never
    written into an event; who is attached says it as `Presence.kind`)."""


class Presence(BaseModel):
    """Someone attached now: one open event stream's person, as the status rows list them."""

    model_config = ConfigDict(defer_build=True, frozen=True)
    name: str
    kind: Literal["owner", "collaborator", "viewer"] = "owner"
    via: list[str] = []
    """What this person is attached with, each label once (``terminal``, ``script`` …); an older
    worker wrote one label an open stream, which `counts` still reads."""
    streams: dict[str, int] = {}
    """How many open streams a label of `via` stands for, where more than one (absent: one), so
    a status says a person's thousand browser tabs in a few bytes."""

    def counts(self) -> dict[str, int]:
        """Each label of `via` and how many open streams this person has with it."""
        said = Counter(self.via)
        return {label: self.streams.get(label, n) for label, n in sorted(said.items())}


class Option(BaseModel):
    """One choice of a question."""

    model_config = ConfigDict(defer_build=True, frozen=True)
    label: str
    description: str = ""


class QueueItem(BaseModel):
    """A prompt waiting behind the running turn."""

    model_config = ConfigDict(defer_build=True, frozen=True)
    queue_id: str
    request_id: str | None = None
    prompt: str
    client_id: str | None = None
    by: By = Field(default_factory=By)


class EventBase(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="ignore")
    seq: int = 0
    """Position in the journal; 0 only before the worker has appended it."""
    at: datetime = Field(default_factory=now)


class WorkerStarted(EventBase):
    type: Literal["worker_started"] = "worker_started"
    epoch: int
    pid: int
    version: str
    agent: str
    model: str | None = None
    reply_format: Literal["verbatim", "markdown"] = "verbatim"
    """As `/info` says it (a journal written before this field had only python sessions)."""
    prompt_syntax: Literal["python", "text"] = "python"
    """As `/info` says it."""
    lost: str | None = None
    """Why the previous worker is gone, when the engine that started this one knows (its
    machine was lost): the error of the turn it leaves open; None: killed or crashed."""


class TurnStarted(EventBase):
    type: Literal["turn_started"] = "turn_started"
    turn_id: str
    prompt: str
    client_id: str | None = None
    request_id: str | None = None
    queue_id: str | None = None
    by: By = Field(default_factory=By)
    origin: Literal["user", "queue", "note"] = "user"


class TextChunk(EventBase):
    type: Literal["text"] = "text"
    turn_id: str
    text: str


class ToolStarted(EventBase):
    type: Literal["tool_started"] = "tool_started"
    turn_id: str
    call_id: str
    name: str
    args: dict[str, Any] = {}
    title: str | None = None
    """What an agent says the call does (ACP's title); None: the name says it."""
    kind: str | None = None
    """An agent's kind of call (read, edit, execute …), when it says one."""
    locations: list[str] = []
    """Files the call touches, when the agent says."""


class Diff(BaseModel):
    """An edit of one file, shown as a unified diff."""

    model_config = ConfigDict(defer_build=True, frozen=True)
    path: str
    old: str | None = None
    """The text before; None for a new file."""
    new: str


class ToolOutput(EventBase):
    type: Literal["tool_output"] = "tool_output"
    turn_id: str
    call_id: str
    text: str = ""
    diff: Diff | None = None


class ToolUpdated(EventBase):
    """A running tool call the agent described again: each field given replaces the one before
    (None: unchanged). An agent first says "Preparing file…" with no input, then the real title
    and arguments; `output` and `diffs`, when given, replace what the call showed so far."""

    type: Literal["tool_updated"] = "tool_updated"
    turn_id: str
    call_id: str
    title: str | None = None
    kind: str | None = None
    args: dict[str, Any] | None = None
    locations: list[str] | None = None
    output: str | None = None
    diffs: list[Diff] | None = None


class Thinking(EventBase):
    """A chunk of a model's reasoning, shown dimmed and folded."""

    type: Literal["thinking"] = "thinking"
    turn_id: str
    text: str


class PlanEntry(BaseModel):
    """One step of an agent's plan."""

    model_config = ConfigDict(defer_build=True, frozen=True)
    content: str
    status: Literal["pending", "in_progress", "completed"] = "pending"


class Plan(EventBase):
    """An agent's plan: the whole list each time it changes."""

    type: Literal["plan"] = "plan"
    turn_id: str
    entries: list[PlanEntry] = []


class AgentCommand(BaseModel):
    """One of the agent's own slash commands."""

    model_config = ConfigDict(defer_build=True, frozen=True)
    name: str
    description: str = ""


class AgentChoice(BaseModel):
    """One value an agent offers: a mode, or a value of one of its settings."""

    model_config = ConfigDict(defer_build=True, frozen=True)
    value: str
    """What the agent is told when it is chosen (ACP's id or value)."""
    name: str = ""
    """What people read; the value when empty."""
    description: str = ""


class AgentSetting(BaseModel):
    """One of an agent's own settings for the session (an ACP config option): its model, mode,
    reasoning effort …, with the value it has now and the values it takes."""

    model_config = ConfigDict(defer_build=True, frozen=True)
    id: str
    name: str = ""
    category: str | None = None
    """``model``, ``mode``, ``thought_level`` … as the agent says; None: another kind."""
    current: str = ""
    choices: list[AgentChoice] = []


class AgentInfo(EventBase):
    """The agent's own slash commands, mode and settings, whenever they change (outside turns too)."""

    type: Literal["agent_info"] = "agent_info"
    commands: list[AgentCommand] = []
    mode: str | None = None
    """The current mode's value (one of `modes`)."""
    modes: list[AgentChoice] = []
    """The modes the agent offers (ACP's session modes)."""
    settings: list[AgentSetting] = []
    """The agent's settings (ACP's config options): its model among them, when it says one."""


class ToolEnded(EventBase):
    type: Literal["tool_ended"] = "tool_ended"
    turn_id: str
    call_id: str
    status: Literal["completed", "still_working", "terminated", "error"] = "completed"
    value: Any = None
    error: str | None = None


class Question(BaseModel):
    """A question to the people attached: what `question_asked` says and `/transcript` keeps pending."""

    model_config = ConfigDict(defer_build=True, frozen=True)
    turn_id: str
    question_id: str
    text: str
    options: list[Option] = []
    multiple: bool = False
    freeform: bool = True


class QuestionAsked(Question, EventBase):
    type: Literal["question_asked"] = "question_asked"


class QuestionResolved(EventBase):
    type: Literal["question_resolved"] = "question_resolved"
    question_id: str
    how: Literal["answered", "dismissed", "cancelled"]
    selected: list[str] = []
    freeform: str | None = None
    client_id: str | None = None
    by: By = Field(default_factory=By)


StopReason = Literal["end_turn", "max_tokens", "refusal", "max_turn_requests", "budget"]
"""Why an agent stopped a completed turn, in ACP's words: it was done (``end_turn``), its model's
token limit cut the reply (``max_tokens``), the model refused to go on (``refusal``), or the turn
reached its limit of model requests (``max_turn_requests``); or the worker stopped it at the
session's budget (``budget``: its cost, tokens or wall time)."""


class TurnEnded(EventBase):
    type: Literal["turn_ended"] = "turn_ended"
    turn_id: str
    outcome: Literal["completed", "failed", "interrupted"]
    reply: str = ""
    error: str | None = None
    usage: dict[str, int] = {}
    stop_reason: StopReason | None = None
    """Why the agent stopped, when it said (a model's finish reason, a hosted ACP agent's stop
    reason); None: it did not say, which is ``end_turn`` for a completed turn."""
    cost: float = 0.0
    """What the turn cost in USD (its model's usage priced, or its ACP agent's own report)."""
    worked: float | None = None
    """Seconds the turn worked, as its worker counts them for the budget's wall time (a turn that
    only waited for an answer to raise the budget worked none); None: from its start to its end."""


class QueueChanged(EventBase):
    type: Literal["queue_changed"] = "queue_changed"
    items: list[QueueItem] = []
    held: bool = False
    """Whether the queue waits (after an interrupt) until someone resumes it."""


class Status(EventBase):
    type: Literal["status"] = "status"
    state: Literal["idle", "working", "asking"]
    model: str | None = None
    context_used: int = 0
    context_limit: int = 0
    tokens_in: int = 0
    """Tokens the session has sent to its model so far (model-backed sessions)."""
    tokens_out: int = 0
    """Tokens the model has answered with so far."""
    children: dict[str, int] = {}
    activity: str = ""
    """What the running turn waits for, in a few words (``retrying in 4 s``); empty when nothing."""
    cost: str = ""
    """What the session has cost so far, as the agent reports it (``$0.42``); empty when unknown."""
    attached: list[Presence] = []
    """Who has an event stream open now (each name once); a `status` is also emitted when it changes."""


class ModelChanged(EventBase):
    type: Literal["model_changed"] = "model_changed"
    model: str


class SettingChanged(EventBase):
    """One of the agent's own settings (`setting` ``mode`` is its mode) set from ``/mode``: a new
    worker sets it again in the agent's new process."""

    type: Literal["setting_changed"] = "setting_changed"
    setting: str
    value: str


class Note(EventBase):
    """A line about the session: the agent's own (`by` None), or a note left for the agent from
    outside the conversation (``tui note``; `by` names who left it), which the agent is given
    with its next turn."""

    type: Literal["note"] = "note"
    text: str
    source: str = ""
    by: By | None = None


MAX_CONTEXT_VALUE = 16 * 1024
"""The most characters of a context source's value kept (its last ones)."""


class ContextSourceSet(EventBase):
    """A context source added (or replaced), or with `removed` taken away: its latest value is
    given to the agent at each turn (docs/protocol.md, "Context sources")."""

    type: Literal["context_source"] = "context_source"
    name: str
    kind: Literal["cmd", "file", "push"] = "push"
    cmd: str = ""
    path: str = ""
    every: float = 0.0
    """Seconds between two runs of `cmd` (or reads of `path`)."""
    why: str = ""
    removed: bool = False
    by: By = Field(default_factory=By)


class ContextValue(EventBase):
    """A context source's new value (bounded: its last `MAX_CONTEXT_VALUE` characters)."""

    type: Literal["context_value"] = "context_value"
    name: str
    value: str
    error: bool = False
    """The command failed (or could not run): `value` says how."""
    size: int = 0
    """Characters the value had before it was cut to its last `MAX_CONTEXT_VALUE`."""


class Notified(EventBase):
    """Someone was told of something of this session (config.toml's ``[notify]``), once: a new
    worker reads what was told from the journal and tells none of it again. It names the kinds
    of places told and a host at most, never a URL, a header or a command's arguments."""

    type: Literal["notified"] = "notified"
    key: str
    """What was told, unique in the session: ``question:ASK_ID``, ``turn_failed:TURN_ID``,
    ``turn_ended:TURN_ID``, ``budget:TURN_ID``, ``worker_died:EPOCH``."""
    event: str
    """``question``, ``turn_failed``, ``turn_ended`` or ``worker_died``."""
    told: list[str] = []
    """The places that took it: ``webhook (HOST)``, ``command (NAME)``."""
    failed: list[str] = []
    """Those that did not, each with why (``webhook (HOST): HTTP 500, 3 tries``)."""


class WorkerLeaving(EventBase):
    type: Literal["worker_leaving"] = "worker_leaving"
    reason: str = ""
    restarting: bool = False
    """A new worker is started at once (``tui restart``): a follower goes on from its cursor with
    the new worker's stream (its `worker_started` comes next) instead of stopping."""


class ChildStarted(EventBase):
    """The session started a child session (`tui send --new --parent`, ``delegate``)."""

    type: Literal["child_started"] = "child_started"
    child_id: str
    prompt: str = ""
    """The child's first turn."""
    agent: str = "python"
    model: str | None = None
    turn_id: str | None = None
    """This session's turn that started it (None: started from outside a turn)."""
    by: By | None = None
    """Who made it from outside (`tui send --new --parent`); None: this session's own ``delegate``."""


class ChildAsking(EventBase):
    """A child's question is pending (`question`), or no longer is (None)."""

    type: Literal["child_asking"] = "child_asking"
    child_id: str
    question: Question | None = None
    answering: bool = False
    """This session's own agent is answering it (``answers_children``); people may answer first."""


class ChildEnded(EventBase):
    """A child's delegated turn ended; its tokens so far are added to this session's."""

    type: Literal["child_ended"] = "child_ended"
    child_id: str
    outcome: Literal["completed", "failed", "interrupted"]
    error: str | None = None
    tokens_in: int = 0
    """The child's tokens in (its own and its children's) when it ended."""
    tokens_out: int = 0
    cost: float = 0.0
    """The child's cost in USD (its own and its children's) when it ended; added to this
    session's spend."""


class Budget(BaseModel):
    """A session's limits; None: no limit of that kind."""

    model_config = ConfigDict(defer_build=True, frozen=True)
    cost: float | None = Field(default=None, ge=0)
    """USD: its model's usage priced (genai-prices), or its ACP agent's reported cost."""
    tokens: int | None = Field(default=None, ge=0)
    """Tokens in and out, together."""
    turns: int | None = Field(default=None, ge=0)
    """Turns started."""
    time: float | None = Field(default=None, ge=0)
    """Seconds its turns have run, together (wall time)."""


class BudgetSet(EventBase):
    """The session's limits, as set when it was made or changed since (``tui budget``)."""

    type: Literal["budget_set"] = "budget_set"
    budget: Budget
    by: By | None = None
    """Who changed it; None: the defaults of ``config.toml`` or the options it was made with."""


class ShareChanged(EventBase):
    """A share of the session made or revoked (``tui share``, the web bridge's share routes). The
    shares themselves live in the web bridge's ``web/participants.json``; this says each change in
    the journal, so the chain covers it (`tui audit`, `tui verify`)."""

    type: Literal["share_changed"] = "share_changed"
    change: Literal["made", "revoked"]
    participant: str
    """The share's id (as ``web/participants.json`` has it)."""
    name: str
    kind: Literal["viewer", "collaborator"]
    expires_at: datetime | None = None
    turns: int | None = None
    """A collaborator's turn limit; None: none."""
    by: By = Field(default_factory=By)
    """Who made or revoked it: the owner."""


class FileChange(BaseModel):
    """One path a turn changed in the session's folder."""

    model_config = ConfigDict(defer_build=True, frozen=True)
    path: str
    status: Literal["added", "modified", "deleted", "renamed", "mode", "type"] = "modified"
    """``mode``: only its executable bit changed; ``type``: a file became a link, or the other way."""
    added: int = 0
    """Lines added (0 for a binary file)."""
    removed: int = 0
    old_path: str | None = None
    """Where a renamed file was."""
    binary: bool = False


class FilesChanged(EventBase):
    """What a turn did to its session's folder (docs/files.md): the checkpoints taken at its start
    and end (trees of the session's own store, ``sessions/ID/files.git``) and the paths they differ
    on. Written just before the turn's `turn_ended`."""

    type: Literal["files_changed"] = "files_changed"
    turn_id: str
    before: str
    """The checkpoint at the turn's start."""
    after: str
    """The checkpoint at its end."""
    files: list[FileChange] = []
    """The paths that differ, at most 500."""
    more: int = 0
    """Paths that differ beyond those listed."""
    skipped: list[str] = []
    """What the checkpoints left out, each with why (``big.iso (over 10 MB)``)."""


class Rewound(EventBase):
    """The session's files and conversation were put back as they were before turn `to_turn`:
    turns `to_turn` … `last_turn` are undone (the journal keeps them; they show as rewound)."""

    type: Literal["rewound"] = "rewound"
    to_turn: int
    last_turn: int
    turns: list[str] = []
    """The ids of the turns undone."""
    files: list[str] = []
    """The paths put back (at most 500 listed)."""
    more: int = 0
    """Paths put back beyond those listed."""
    forced: list[str] = []
    """Paths someone else had changed since, overwritten because the rewind was forced."""
    saved: str | None = None
    """A checkpoint of the folder just before the rewind (``tui rewind ID --undo`` puts it back)."""
    after: str | None = None
    """The checkpoint of the folder right after it."""
    agent_said: str = ""
    """What the agent says of its side of the rewind (a python session's variables were not rewound)."""
    by: By = Field(default_factory=By)


class UnknownEvent(EventBase):
    """An event of a type this version does not know; its fields are kept as they came."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="allow")
    type: str


KnownEvent = Annotated[
    WorkerStarted
    | TurnStarted
    | TextChunk
    | ToolStarted
    | ToolUpdated
    | ToolOutput
    | Thinking
    | Plan
    | AgentInfo
    | ToolEnded
    | QuestionAsked
    | QuestionResolved
    | TurnEnded
    | QueueChanged
    | Status
    | ModelChanged
    | SettingChanged
    | Note
    | Notified
    | WorkerLeaving
    | ChildStarted
    | ChildAsking
    | ChildEnded
    | ContextSourceSet
    | ContextValue
    | FilesChanged
    | Rewound
    | BudgetSet
    | ShareChanged,
    Field(discriminator="type"),
]
Event = KnownEvent | UnknownEvent
EventBody = Event
"""Any event; `UnknownEvent` for a type this version does not know."""

EVENT_TYPES: frozenset[str] = frozenset(
    model.model_fields["type"].default for model in get_args(get_args(KnownEvent)[0])
)
"""The type of every event this version knows (read from `KnownEvent`, where each is listed once)."""


@cache
def _known() -> Callable[[str | bytes], Any]:
    # Built on the first decode, not at import: a process that never decodes an event (``tui
    # sessions``, ``tui --help``) does not pay for the schema of every event type. One validator
    # of the discriminated union reads the raw JSON straight into the event's model (its core
    # validator's method, without `TypeAdapter`'s Python wrapper around each call).
    return TypeAdapter(KnownEvent).validator.validate_json


def decode_event(data: str | bytes) -> Event:
    """Decode one event from its JSON text.

    Args:
        data: one journal line or one SSE message's ``data``.

    Returns:
        The typed event, or an `UnknownEvent` when its type is not one this version knows.

    Raises:
        ValueError: the text is not an event at all (not JSON, no ``type``).
    """
    try:
        event: Event = _known()(data)
        return event
    except ValidationError as exc:
        try:
            unknown = UnknownEvent.model_validate_json(data)
        except ValidationError:
            raise ValueError(f"not an event: {exc.errors()[0]['msg']}") from exc
        if unknown.type in EVENT_TYPES:
            raise ValueError(f"malformed {unknown.type} event: {exc.errors()[0]['msg']}") from exc
        return unknown
