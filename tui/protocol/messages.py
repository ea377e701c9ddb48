"""Request and reply bodies of the bridge routes (`protocol.md`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat

from tui.protocol.events import (
    AgentChoice,
    AgentCommand,
    AgentSetting,
    Budget,
    By,
    Diff,
    PlanEntry,
    Presence,
    Question,
    QueueItem,
    StopReason,
)

__all__ = [
    "FEATURES",
    "MAX_PROMPT",
    "AnswerRequest",
    "Answered",
    "BudgetRequest",
    "BudgetView",
    "ChildAdoptRequest",
    "ChildAdopted",
    "ChildView",
    "ContextAddRequest",
    "ContextEntry",
    "ContextList",
    "ContextPushRequest",
    "ContextPushed",
    "ContextRemoved",
    "Delivery",
    "DismissRequest",
    "Dismissed",
    "ImageRef",
    "Info",
    "InterruptRequest",
    "Interrupted",
    "LeaveRequest",
    "Left",
    "ModelRequest",
    "ModelSet",
    "NoteRequest",
    "Noted",
    "PendingQuestion",
    "QueueResumed",
    "Recorded",
    "RewindDone",
    "RewindRequest",
    "SearchHit",
    "SearchResult",
    "ShareRecord",
    "Stats",
    "ToolRecord",
    "Transcript",
    "TurnAccepted",
    "TurnLine",
    "TurnRecord",
    "TurnRequest",
    "Unqueued",
]

FEATURES = (
    "turns",
    "queue",
    "unqueue",
    "interrupt",
    "questions",
    "images",
    "stats",
    "model",
    "transcript",
    "search",
    "turn_output",
    "queue_resume",
    "rewind",
)
"""What a worker of this version can do, as `GET /info` names it."""


class _Wire(BaseModel):
    # Each model's validator and serializer are built on its first use rather than at import,
    # so a process pays only for the models it uses.
    model_config = ConfigDict(defer_build=True)


class _Body(_Wire):
    model_config = ConfigDict(extra="forbid")


class Info(_Wire):
    app: str = "tui-worker"
    version: str
    session_id: str
    epoch: int
    agent: str
    model: str | None = None
    reply_format: Literal["verbatim", "markdown"] = "verbatim"
    """How clients show replies: as printed (a program's output) or as Markdown (a model's prose)."""
    prompt_syntax: Literal["python", "text"] = "text"
    """What a prompt is: a Python program (a script is split as Python reads it), or text."""
    commands: list[AgentCommand] = []
    """The agent's own slash commands, for completion in the prompt."""
    mode: str | None = None
    """The agent's current mode, when it has modes (one of `modes`)."""
    modes: list[AgentChoice] = []
    """The agent's modes (ACP's session modes), for ``/mode``."""
    settings: list[AgentSetting] = []
    """The agent's own settings (ACP's config options; its model among them), for ``/model``."""
    models: list[str] = []
    """The model profiles ``/model`` takes (a model session's), for completion in the prompt."""
    resumed_at_turn: int = 0
    """How many turns the session had when this worker started (0: it started a new session):
    what earlier workers held in memory, a python session's variables, is gone."""
    features: list[str] = list(FEATURES)
    idle_seconds: float | None = None
    """How long the worker has been idle: no turn, question or queue, nobody attached (0: busy)."""
    quiet_seconds: float | None = None
    """How long since the session last did something (a turn, a question or queue waiting, an
    event), whoever is attached (0: busy); None from a worker older than this field."""
    idle_timeout: float | None = None
    """After how many idle seconds the worker lets go of the session; None: never."""


class ImageRef(_Wire):
    file: str
    name: str


Delivery = Literal["now", "queue", "auto"]
"""How a turn is sent: ``now`` starts it, refused ``409 busy`` while a turn runs; ``queue`` joins
the queue whatever runs; ``auto`` is the worker's to decide: it starts now when no turn runs, else
it is queued (the answer's `turn_id` or `queue_id` says which)."""

MAX_PROMPT = 1_000_000
"""The most characters a turn's prompt may have."""


class TurnRequest(_Body):
    prompt: str = Field(max_length=MAX_PROMPT)
    client_id: str | None = None
    request_id: str | None = Field(default=None, max_length=200)
    images: list[ImageRef] = []
    delivery: Delivery = "now"


class TurnAccepted(_Wire):
    turn_id: str | None = None
    queue_id: str | None = None
    seq: int


class AnswerRequest(_Body):
    question_id: str
    selected: list[str] = []
    freeform: str | None = None
    client_id: str | None = None


class DismissRequest(_Body):
    question_id: str
    client_id: str | None = None


MAX_NOTE = 64 * 1024
"""The longest note, in characters."""


class NoteRequest(_Body):
    text: str = Field(min_length=1, max_length=MAX_NOTE)
    source: str = Field(default="", max_length=100)
    """What left it, in a word (``ci``), shown beside who sent it."""
    now: bool = False
    """A session with no running turn starts a turn of its own for it (else it waits for the next)."""
    client_id: str | None = None


class RewindRequest(_Body):
    """Put the session's files and conversation back as they were before turn `to_turn`."""

    to_turn: int | None = Field(default=None, ge=1)
    """The first turn undone (1 is the session's first turn); None only with `undo`."""
    force: bool = False
    """Overwrite the paths someone else changed since (a checkpoint of them is taken first)."""
    undo: bool = False
    """Put back the files the last rewind changed, as they were just before it."""


class RewindDone(_Wire):
    seq: int
    """The `rewound` event (0 for an undo, which writes a note)."""
    to_turn: int = 0
    files: list[str] = []
    """The paths put back (at most 500 listed)."""
    more: int = 0
    forced: list[str] = []
    """Paths someone else had changed, overwritten because the rewind was forced."""
    saved: str | None = None
    """The checkpoint of the folder just before the rewind."""


class Noted(_Wire):
    seq: int
    """The note's event."""
    turn_id: str | None = None
    """The turn started for it (``now``), None when it waits for the next turn."""


CONTEXT_NAME = r"^[A-Za-z0-9_.-]{1,64}$"
"""What a context source's name may be (it goes in a route's path)."""
MAX_EVERY = 86400
"""The longest a context source may wait between two reads, in seconds (a day)."""


class ContextAddRequest(_Body):
    name: str = Field(pattern=CONTEXT_NAME)
    cmd: str = Field(default="", max_length=4096)
    """A shell command run in the session's sandbox every `every` seconds: its output is the value."""
    path: str = Field(default="", max_length=4096)
    """A file (relative to the session's folder) read in the sandbox every `every` seconds."""
    push: bool = False
    """The value is pushed from outside (``POST /context/{name}/push``)."""
    every: float = Field(default=0.0, ge=0, le=MAX_EVERY)
    why: str = Field(default="", max_length=500)
    """What the source is for, shown to the agent beside its value."""


class ContextEntry(_Wire):
    """A context source and its latest value."""

    name: str
    kind: Literal["cmd", "file", "push"]
    cmd: str = ""
    path: str = ""
    every: float = 0.0
    why: str = ""
    value: str = ""
    error: bool = False
    size: int = 0
    """Characters of the value before it was cut to its last 16 KiB."""
    at: datetime | None = None
    """When the value was taken (None: none yet)."""


class BudgetRequest(_Wire):
    """Change a session's limits (``POST /budget``): a limit left out stays as it is; 0 takes
    that limit away."""

    cost: float | None = Field(default=None, ge=0)
    """USD."""
    tokens: int | None = Field(default=None, ge=0)
    turns: int | None = Field(default=None, ge=0)
    time: float | None = Field(default=None, ge=0)
    """Seconds of its turns' wall time."""


class ShareRecord(_Body):
    """A share made or revoked, to write in the journal (``POST /shares``: the owner's own tools,
    after changing ``web/participants.json``; not forwarded by the web bridge)."""

    change: Literal["made", "revoked"]
    participant: str = Field(min_length=1, max_length=64)
    name: str = Field(min_length=1, max_length=64)
    kind: Literal["viewer", "collaborator"]
    expires_at: datetime | None = None
    turns: int | None = Field(default=None, ge=0)


class Recorded(_Wire):
    seq: int
    """The event that says it."""


class BudgetView(_Wire):
    """A session's limits and what it has spent of each (``GET``/``POST /budget``)."""

    budget: Budget
    cost: float = 0.0
    """USD spent: its turns' and its children's, the running turn's so far too."""
    tokens: int = 0
    turns: int = 0
    time: float = 0.0
    """Seconds its turns have run."""
    reached: str | None = None
    """Which limit it has reached, in a few words (``cost $0.06 of $0.05``); None: none."""


class ContextList(_Wire):
    sources: list[ContextEntry] = []
    now: datetime
    """The worker's clock, to tell each value's age."""


class ContextRemoved(_Wire):
    name: str
    removed: bool = True


MAX_PUSH = 4 * 1024 * 1024 - 1024
"""The longest pushed value: in characters on the wire, and in bytes of its JSON string for
`tui context push`, so its request fits the 4 MiB a body may be."""


class ContextPushRequest(_Body):
    value: str = Field(max_length=MAX_PUSH)


class ContextPushed(_Wire):
    name: str
    seq: int


class InterruptRequest(_Body):
    client_id: str | None = None


class ModelRequest(_Body):
    model: str
    setting: str | None = None
    """Which of the agent's own settings to change instead of its model: ``mode``, or the id of
    one of its `Info.settings` (an ACP agent's); None: the model."""


class LeaveRequest(_Body):
    wait: StrictFloat = Field(default=2.0, ge=0, le=60)
    reason: str = Field(default="", max_length=200)
    """Why it leaves, for `worker_leaving` ("stopped on request" when empty)."""
    restart: bool = False
    """A new worker takes the session over at once: followers wait for it (`worker_leaving.restarting`)."""


class Unqueued(_Wire):
    queue_id: str
    removed: bool = True


class Answered(_Wire):
    question_id: str
    answered: bool = True


class Dismissed(_Wire):
    question_id: str
    dismissed: bool = True


class Interrupted(_Wire):
    interrupted: bool
    """False when no turn was running."""


class ModelSet(_Wire):
    model: str


class QueueResumed(_Wire):
    resumed: bool
    """False when the queue was not held."""


class Left(_Wire):
    released: bool = True


class ToolRecord(_Wire):
    call_id: str
    name: str
    args: dict[str, Any] = {}
    output: str = ""
    status: str = "completed"
    value: Any = None
    error: str | None = None
    title: str | None = None
    """What the agent says the call does, when it says (else the name says it)."""
    kind: str | None = None
    locations: list[str] = []
    diffs: list[Diff] = []
    """The edits the call made, in order."""
    at_reply: int = 0
    """How many characters of the turn's reply had come when the call started (where it goes)."""


class TurnLine(_Wire):
    """A line of a turn, in the order and place it came: a question answered, or a note."""

    kind: Literal["answered", "note", "before"]
    """``answered``: a question answered (its line is also in `TurnRecord.answered`); ``note``: a
    note said during the turn; ``before``: a note said between the turn before and this one."""
    text: str
    """The line as it is shown (``answered by root: Allow``, ``note from claude: …``)."""
    tools: int = 0
    """How many of the turn's tool calls had started when it came."""
    at_reply: int = 0
    """How many characters of the reply had come when it came."""


class TurnRecord(_Wire):
    """One turn, compact: what a fresh attach shows without replaying the journal."""

    turn_id: str
    prompt: str
    number: int = 0
    """The turn's 1-based position in the session (0: not known, a record older than numbers)."""
    by: By = Field(default_factory=By)
    client_id: str | None = None
    request_id: str | None = None
    origin: str = "user"
    started_seq: int = 0
    ended_seq: int | None = None
    started_at: str | None = None
    ended_at: str | None = None
    reply: str = ""
    tools: list[ToolRecord] = []
    outcome: Literal["completed", "failed", "interrupted"] | None = None
    """None while the turn runs."""
    error: str | None = None
    stop_reason: StopReason | None = None
    """Why its agent stopped, when it said (`TurnEnded.stop_reason`)."""
    answered: list[str] = []
    """One line for each question this turn asked: what was answered, and by whom."""
    thinking: str = ""
    """A model's reasoning during the turn, when it showed any."""
    plan: list[PlanEntry] = []
    """The agent's plan as it last stood in this turn."""
    lines: list[TurnLine] = []
    """Its answered questions and notes, in the order they came (with the notes said before it)."""
    rewound: bool = False
    """A later rewind undid this turn (its files and its place in the conversation)."""


class PendingQuestion(Question):
    """The question waiting for an answer, as `/transcript` gives it."""


class ChildView(_Wire):
    """A child session as its parent knows it (from `child_started`, `child_asking`, `child_ended`)."""

    child_id: str
    state: Literal["running", "asking", "completed", "failed", "interrupted"] = "running"
    prompt: str = ""
    agent: str = "python"
    model: str | None = None
    question: Question | None = None
    """The child's pending question (while ``asking``)."""
    answering: bool = False
    """This session's own agent is answering that question."""
    error: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    """The child's totals when it last ended (each `child_ended` says them again, whole)."""
    cost: float = 0.0
    """What the child had spent when it last ended, in USD."""


class ChildAdoptRequest(_Body):
    """A child made from outside (``tui send --new --parent``), for its parent's worker to follow."""

    child_id: str = Field(min_length=1, max_length=100)
    prompt: str = Field(default="", max_length=MAX_PROMPT)
    """The child's first turn, as it was sent."""
    turn_id: str | None = Field(default=None, max_length=100)
    """The child's turn that prompt started: followed until it ends (None: until the child is idle)."""


class ChildAdopted(_Wire):
    child_id: str
    following: bool = True


class Transcript(_Wire):
    turns: list[TurnRecord] = []
    current: TurnRecord | None = None
    question: PendingQuestion | None = None
    queue: list[QueueItem] = []
    state: Literal["idle", "working", "asking"] = "idle"
    model: str | None = None
    cursor: int = 0
    has_more: bool = False
    """There are ended turns older than the first one returned."""
    has_newer: bool = False
    """There are ended turns newer than the last one returned (only an ``after``/``around`` page)."""
    queue_held: bool = False
    """The queue waits (after an interrupt) until someone resumes it."""
    attached: list[Presence] = []
    """Who has an event stream open when the transcript is read."""
    turns_started: int = 0
    """How many turns the session started so far (the next one is ``#turns_started + 1``)."""
    notes: list[str] = []
    """Notes said since the last turn ended, while no turn ran (the next turn's ``before`` lines)."""
    children: list[ChildView] = []
    """The sessions this one started, oldest first, and how each stands."""


class SearchHit(_Wire):
    """One turn where the text was found, and where in it."""

    turn_id: str
    where: Literal["prompt", "reply", "tool", "error"]
    snippet: str
    """The line around the match, cut to a readable length."""


class SearchResult(_Wire):
    hits: list[SearchHit] = []
    """In session order, oldest first."""
    total: int = 0
    """How many hits the whole session holds."""
    more: bool = False
    """More hits exist than were returned (`total` says how many)."""


class Stats(_Wire):
    turns: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    """USD it spent (its children's too), the running turn's so far included."""
    uptime: float = 0.0
    events: int = 0
    attached: list[str] = []
    streams: int = 0
    """Open streams the worker sends events to (`tui web` shares one among a session's followers)."""
