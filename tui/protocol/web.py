"""Request and answer bodies of the web bridge's own routes (remote.md): sessions and shares.

The routes forwarded to a session's worker use the bridge's models (`tui.protocol.messages`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt

from tui.protocol.events import Budget
from tui.protocol.messages import TurnAccepted
from tui.protocol.principal import Principal

__all__ = [
    "Archived",
    "AuditReport",
    "ChainView",
    "CreateRequest",
    "Created",
    "Deleted",
    "Found",
    "FoundHit",
    "ParticipantView",
    "Participants",
    "Resolved",
    "Restarted",
    "Revoked",
    "SearchQuery",
    "SessionSummary",
    "Share",
    "ShareRequest",
    "Shared",
    "SignInRequest",
    "SignedIn",
    "SignedOut",
    "StopRequest",
    "Stopped",
    "Verified",
    "WakeRequest",
    "WebInfo",
    "WorkerView",
]

Seconds = StrictFloat
"""A number of seconds: a JSON number, never a boolean or a string."""


class _Body(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid")


class _Answer(BaseModel):
    model_config = ConfigDict(defer_build=True)


class CreateRequest(_Body):
    working_directory: str | None = None
    agent: str | None = None
    """What the session runs; None: the machine's default (config.toml's ``default_agent``)."""
    model: str | None = None
    parent_id: str | None = None
    """The session that starts this one (its child); it must exist."""
    budget: Budget | None = None
    """Its limits; None: config.toml's ``[budget]`` on the machine that runs it."""
    prompt: str | None = None
    idle: bool = False
    client_id: str | None = None
    request_id: str | None = None
    wait: Seconds = Field(default=10.0, ge=0, le=60)


class WakeRequest(_Body):
    wait: Seconds = Field(default=10.0, ge=0, le=60)


class StopRequest(_Body):
    wait: Seconds = Field(default=5.0, ge=0, le=60)


class ShareRequest(_Body):
    name: str
    kind: Literal["viewer", "collaborator"]
    ttl: str | StrictInt | None = None
    turns: StrictInt | None = Field(default=None, ge=0)


class SessionSummary(_Answer):
    """One session as `tui sessions` lists it."""

    id: str
    title: str = ""
    state: Literal["working", "idle", "asking", "stopped", "archived"] = "stopped"
    live: bool = False
    folder: str = ""
    """The session's working directory."""
    created_at: datetime
    updated_at: datetime | None = None
    agent: str = "python"
    model: str | None = None
    archived: bool = False
    parent_id: str | None = None
    """The session that started this one, for a child."""
    memory: int | None = None
    """A live worker's resident memory in bytes, its own and its processes' (sandbox, agent), never
    another session's worker (a child session's is in the child's row)."""
    idle_seconds: float | None = None
    """How long a live worker has been idle (no turn, question or queue, nobody attached)."""
    quiet_seconds: float | None = None
    """How long since a live worker's session last did something (a turn, a question or queue
    waiting, an event), whoever is attached: the IDLE of ``tui sessions``."""
    worker_version: str | None = None
    """The tui version a live worker runs."""
    outdated: bool = False
    """A live worker runs an older tui than the one installed there (``tui restart`` moves it)."""
    idle_timeout: float | None = None
    """After how many idle seconds the live worker lets go of the session; None: never."""
    node: str | None = None
    """The address of the cluster's node a live worker runs on (a session on Ray); None: this
    machine's worker, or none live."""


class WebInfo(_Answer):
    app: Literal["tui-web"] = "tui-web"
    version: str
    features: list[str] = []
    principal: Principal


class Created(_Answer):
    id: str
    short_id: str
    turn: TurnAccepted | None = None
    """The first turn, when a prompt was given."""


class Resolved(_Answer):
    id: str
    short_id: str


class Deleted(_Answer):
    id: str
    deleted: bool = True
    stopped: bool = False
    """Whether a live worker was stopped first."""


class Stopped(_Answer):
    id: str
    stopped: bool
    """False when no worker was running."""


class Archived(_Answer):
    id: str
    archived: bool = True
    """False once ``…/unarchive`` brought it back."""


class WorkerView(_Answer):
    """A session's worker now."""

    live: bool
    leaving: bool = False
    epoch: int | None = None
    version: str | None = None
    features: list[str] = []
    pid: int | None = None
    started_at: datetime | None = None
    starting: bool = False
    """A worker was started and is not ready yet: ask again (``…/worker``) in a moment."""
    left: bool = False
    """With no live worker: whether the last one stopped on purpose (it said `worker_leaving`)."""
    reason: str = ""


class Restarted(_Answer):
    id: str
    worker: WorkerView


class Share(BaseModel):
    """One share of one session, as it is kept and shown (the token's digest is kept apart)."""

    model_config = ConfigDict(defer_build=True)
    id: str
    """A short random id of this share."""
    session_id: str
    name: str
    """Who it is for: shown in the transcript next to their turns and answers."""
    kind: Literal["viewer", "collaborator"]
    created_at: datetime
    expires_at: datetime | None = None
    turns: int | None = None
    """A collaborator's turn limit (None: no limit)."""
    turns_used: int = 0
    revoked_at: datetime | None = None
    last_seen: datetime | None = None


class ParticipantView(Share):
    """A share as lists show it, with its state now."""

    model_config = ConfigDict(defer_build=True)
    state: Literal["active", "expired", "revoked"]
    turns_left: int | None = None


class Participants(_Answer):
    participants: list[ParticipantView] = []


class Shared(_Answer):
    participant: ParticipantView
    token: str
    """Shown once; only its digest is kept."""
    url: str
    command: str
    link: str | None = None
    """A link that signs a browser in as this participant (a one-time code in its fragment)."""


class SignInRequest(_Body):
    code: str = Field(max_length=200)
    """The one-time code of a sign-in link's fragment."""


class SignedIn(_Answer):
    principal: Principal
    secret: str = ""
    """The page secret: the page keeps it in ``sessionStorage`` and sends it as ``X-Tui-Page``."""


class SignedOut(_Answer):
    signed_out: bool = True


class Revoked(_Answer):
    revoked: list[ParticipantView] = []


class FoundHit(_Answer):
    """One text of one session where the words of ``GET /api/search`` were found."""

    session_id: str
    title: str = ""
    folder: str = ""
    agent: str = "python"
    archived: bool = False
    turn: int
    """The turn's 1-based number in its session (``tui attach ID --turn N``; 0: before the first)."""
    at: datetime
    """When that turn started."""
    where: Literal["prompt", "reply", "tool", "error", "note", "question", "answer", "child"]
    name: str = ""
    """The tool's name, for ``tool`` (and a tool's ``error``)."""
    snippet: str
    """The line around the match, cut to a readable length."""
    match: list[int]
    """Where the words are in `snippet`: [start, end)."""


class Found(_Answer):
    """A page of ``GET /api/search``: the newest hits first."""

    hits: list[FoundHit] = []
    next: int | None = None
    """Pass it as ``before`` for the next page; None: no more hits."""


class SearchQuery(_Body):
    """What ``tui search`` asks a machine (``GET /api/search``'s query)."""

    q: str
    """The text: its words in that order, case-insensitive; a final ``*`` makes the last a prefix."""
    where: list[str] | None = None
    """Only these kinds of text (``prompt``, ``reply``, ``tool``, ``error``, ``note``, …)."""
    folder: str | None = None
    """Only sessions in this folder or below it."""
    agent: str | None = None
    since: datetime | None = None
    """Only turns started at or after it."""
    active: bool = False
    """Leave archived sessions out."""
    limit: int = Field(default=20, ge=1, le=500)
    before: int | None = None
    """The previous page's ``next``."""


class ChainView(_Answer):
    """A journal's chain as `tui verify` found it (`tui.store.chain.Verdict`)."""

    chained: bool
    """False: an older tui wrote the journal; nothing can be checked."""
    intact: bool
    head: str | None = None
    """``SEQ:HASH``, the chain's last link, when intact."""
    since_seq: int | None = None
    """The seq the chain starts at (lines before it are one block)."""
    problem: str | None = None
    """The first line changed, removed, reordered or added, in words."""
    line: int | None = None
    """Its line number in the journal (1-based)."""


class Verified(ChainView):
    """``GET /api/sessions/{id}/verify``: the session's journal checked where it is (`tui verify`)."""

    session_id: str
    head_kept: str | None = None
    """The ``SEQ:HASH`` asked about (``?head=``): one kept elsewhere."""
    head_found: bool = True
    """Whether the kept head is a link of the journal's chain now (True when none was asked)."""
    says: str = ""
    """The verdict in one line, as `tui verify` prints it."""


class AuditReport(_Answer):
    """``GET /api/sessions/{id}/audit``: who did what in the session (`tui audit`)."""

    session_id: str
    chain: ChainView
    entries: list[dict[str, Any]] = []
    """Each prompt, answer, tool call, file changed, rewind, note, child, turn's end and share,
    in journal order: ``seq``, ``at``, ``what``, ``by`` and what else it says."""
    costs: dict[str, Any] = {}
    """``usage`` (tokens by kind, summed) and ``cost`` (the agent's last reported)."""
    shares: list[dict[str, Any]] = []
    """Each share of the session: name, kind, ``made_at``, ``revoked_at``, ``state`` and whether
    the journal says it (``in_chain``)."""
