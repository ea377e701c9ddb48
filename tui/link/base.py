"""`AttachLink`: what a client (the TUI, the piped surface, `tui send --wait`) needs to know about
where its session is, and the requests it makes there.

Like httpx's ``BaseTransport``, a link implements a few methods and gets the rest: where the
worker is (`locate`), its event stream (`open_stream`) and one request of a route of the table
(`tui.protocol.routes.BRIDGE`), a `RouteCall` (`handle`). Every typed request
(`transcript`, `send_turn`, `answer` …) is written once here, on top of `call`, from the route's
`Param`s and models; a new route needs no new method on any link (``link.call(BRIDGE["x"], …)``).

`LocalLink` (this machine: the state dir and the worker's socket) and `RemoteLink` (another
machine, through its web bridge) implement it; `WorkerLink` (`tui.testing.double`) runs a real
worker in-process for tests. The event follower in `tui.link.follow` is the only code that
follows a session's events: it asks the link where the worker is (`locate`) and opens streams
(`open_stream`), and yields events and `LinkState` changes.

Every method raises from the `tui.errors` tree only.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Collection, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from tui.errors import InvalidRequest, TooLarge, WorkerUnavailable
from tui.protocol import (
    MAX_PROMPT,
    AnswerRequest,
    DismissRequest,
    Event,
    ImageRef,
    Info,
    Interrupted,
    InterruptRequest,
    ModelRequest,
    QueueResumed,
    SearchResult,
    Stats,
    Transcript,
    TurnAccepted,
    TurnRequest,
)
from tui.protocol.messages import ContextList, Delivery, Noted, NoteRequest
from tui.protocol.principal import Principal
from tui.protocol.routes import BRIDGE, RouteSpec

__all__ = [
    "AttachLink",
    "Backoff",
    "Caller",
    "Gone",
    "LinkState",
    "Live",
    "Located",
    "Reconnecting",
    "RouteCall",
    "SessionVerbs",
    "StoredLine",
]


class SessionVerbs(Protocol):
    """The session commands an attached client may ask for (``/exit``, ``/exit --delete``,
    ``/archive``, ``/restart``): the access layer's (`tui.access.base.SessionAccess`), whose
    `link` hands itself to the link it makes (`AttachLink.verbs`). Each verb and its conditions
    (a restart only when the session is idle) are written there once."""

    async def stop(self, session_id: str) -> bool: ...

    async def delete(self, session_id: str, *, force: bool = False) -> None: ...

    async def archive(self, session_id: str) -> None: ...

    async def restart(self, session_id: str, *, wait: float = 10.0) -> bool: ...


class StoredLine(Protocol):
    """One event as a session's journal stores it (`tui.store.JournalLine`)."""

    @property
    def seq(self) -> int: ...

    @property
    def type(self) -> str: ...

    def decode(self) -> Event:
        """The typed event.

        Raises:
            ValueError: the line is not an event this version can read.
        """
        ...


@dataclass(frozen=True)
class Live:
    """The stream is open to a live worker."""

    version: str = ""
    epoch: int = 0
    disk_full: str = ""
    """The worker's sentence while its disk is full (it cannot write its journal: nothing it does
    from now on reaches anyone until space is back); empty otherwise."""


@dataclass(frozen=True)
class Reconnecting:
    """The stream dropped; the next try is in `delay` seconds."""

    attempt: int
    delay: float
    reason: str


@dataclass(frozen=True)
class Gone:
    """No worker is coming back (stopped on purpose, deleted, refused): the attach is over."""

    reason: str
    exit_code: int = WorkerUnavailable.exit_code


LinkState = Live | Reconnecting | Gone


@dataclass(frozen=True)
class Located:
    """Where the worker is now, as `AttachLink.locate` answers."""

    status: Literal["live", "starting", "gone"]
    reason: str = ""
    exit_code: int = WorkerUnavailable.exit_code
    version: str = ""
    """The live worker's version, when known."""
    epoch: int = 0
    """The live worker's epoch, when known."""


@dataclass(frozen=True)
class Backoff:
    """Reconnect delays: `first` seconds, times `factor` each try, ±`jitter`, at most `cap`."""

    first: float = 0.1
    factor: float = 1.6
    jitter: float = 0.2
    cap: float = 30.0


@dataclass(frozen=True)
class RouteCall:
    """One request of a route of `BRIDGE`, as a link or a client hands it on (httpx's ``Request``)."""

    route: RouteSpec
    body: BaseModel | None = None
    """Its JSON body."""
    query: Mapping[str, Any] = field(default_factory=dict)
    content: bytes | None = None
    """A raw body instead (``POST /images``)."""
    path: Mapping[str, str] = field(default_factory=dict)
    """What fills the route's path (``queue_id``, ``turn_id``)."""

    @property
    def url(self) -> str:
        return self.route.url(**self.path)

    def json(self) -> Any:
        """The body as JSON (None without one)."""
        return self.body.model_dump(mode="json", exclude_none=True) if self.body is not None else None

    def fields(self) -> dict[str, Any]:
        """Its body's, query's and path's fields in one mapping (what a test looks at)."""
        body = self.body.model_dump() if self.body is not None else {}
        return {**body, **self.query, **self.path}


class Caller(ABC):
    """Whatever sends routes' requests (a link, `BridgeClient`): it implements `handle` (and
    `handle_text` for the routes that answer streamed text) once; callers use `call` and
    `stream_text`."""

    @abstractmethod
    async def handle(self, call: RouteCall) -> Any:
        """One request: its answer decoded into the route's answer type.

        Raises:
            TuiError: the worker's refusal as its exception; `WorkerUnavailable` or `Unreachable`
                when it could not be asked.
        """

    async def handle_text(self, call: RouteCall) -> AsyncIterator[str]:
        """A request whose answer is streamed text, as it arrives. Default: refused."""
        raise InvalidRequest(f"this session cannot answer {call.route.method} {call.route.path} here")
        yield ""  # type: ignore[unreachable]  # makes this an async generator, as the others are

    async def call(
        self,
        route: RouteSpec,
        body: BaseModel | None = None,
        *,
        query: Mapping[str, Any] | None = None,
        content: bytes | None = None,
        **path: str,
    ) -> Any:
        """Route `route` of `BRIDGE`: `body` as its JSON (or `content` as its raw body), `query` as
        its query, `path` filling its path; its answer decoded into the route's answer type."""
        return await self.handle(RouteCall(route, body, query or {}, content, path))

    def stream_text(
        self, route: RouteSpec, *, query: Mapping[str, Any] | None = None, **path: str
    ) -> AsyncIterator[str]:
        """Route `route` of `BRIDGE`, answering streamed text (``turn_output``), as it arrives."""
        return self.handle_text(RouteCall(route, None, query or {}, None, path))


class AttachLink(Caller):
    """One attached session, wherever it is.

    A link implements three methods (`locate`, `open_stream`, `handle`: one route's request) and
    may give one more (`handle_text` for the routes that answer streamed text); the typed requests
    are built on them. The session's verbs are the access layer's (`verbs`).

    Attributes:
        session_id: the session's full id.
        client_id: this client process (``tui:<host>:<pid>``).
        where: ``local`` or ``remote NAME``, for the status row.
        backoff: the reconnect delays for this kind of link.
        paths_complete: whether ``@path`` completions apply (this machine's files).
    """

    session_id: str
    client_id: str
    where: str = "local"
    backoff: Backoff = Backoff()
    paths_complete: bool = False
    failure: str | None = None
    """Why the session's machine could not be asked the last time, for the closing line."""
    no_worker_timeout: float = 10.0
    """Seconds with no live worker after which the follower gives up (10 locally, 120 remotely)."""
    retry_hint: float | None = None
    """The last ``retry:`` a stream sent, in seconds: the follower waits at least that long."""
    principal: Principal = Principal()
    """Who this client acts as (the owner unless the link says otherwise; see `whoami`)."""
    reads: bool = False
    """Whether this client only reads until it acts (`tui acp`): opening its event stream writes
    nothing to the session's journal; the next `status` written for anything else names it."""
    verbs: SessionVerbs | None = None
    """The session's stop, delete, archive and restart: the access layer that made this link
    (None: a link made otherwise, which cannot do them)."""

    @property
    def place(self) -> str:
        """Where the session runs, as the status row says it: `where` unless the link knows
        better (a worker on a cluster's node: ``ray node 10.0.0.5``)."""
        return self.where

    # --- what a link implements ---------------------------------------------------------------
    @abstractmethod
    async def locate(self) -> Located:
        """Where the worker is: live, starting (wait and ask again), or gone for good.

        A link restarts a worker that died without `worker_leaving` (at most 3 times in 60 s).
        """

    @abstractmethod
    def open_stream(self, cursor: int) -> AsyncIterator[Event | Live]:
        """The events after `cursor`, then live ones, until the stream drops.

        A link may yield a `Live` first, once the stream is open, so that a follower knows the
        worker is there before it sends anything.

        Raises:
            WorkerUnavailable: the stream could not be opened or dropped (the follower retries).
            Refused, NotFound: gone for good.
        """

    async def whoami(self) -> Principal:
        """Who this client acts as now (a remote link asks its machine). Default: `principal`."""
        return self.principal

    def stored(
        self, after: int, until: int, types: Collection[str] | None = None
    ) -> Generator[tuple[int, Sequence[StoredLine]]] | None:
        """The session's events with ``after < seq <= until`` (of `types` only, when given) read
        from its journal file, when this machine holds it: batches in order, each with the last
        seq read so far (blocking reads: step it in a thread; close it when done). None: the
        session's events are read through its worker only. Default: None."""
        return None

    def command(self, *words: str) -> str:
        """A command as the user must type it here, e.g. ``tui answer 3f2a --option 1``.

        A remote link spells ``--remote NAME`` into it.
        """
        return " ".join(("tui", *words))

    async def close(self) -> None:
        """The attach is over: let go of connections."""

    # --- the typed requests, each written once on `call` ----------------------------------------
    async def info(self) -> Info:
        """The worker's `GET /info`: version, epoch, features."""
        info: Info = await self.call(BRIDGE["info"])
        return info

    async def transcript(
        self,
        limit: int = 50,
        *,
        before: str | None = None,
        after: str | None = None,
        around: str | None = None,
        first: bool = False,
    ) -> Transcript:
        """A page of `limit` ended turns (the last ones, or those before turn `before`, right after
        turn `after`, around turn `around`, or with `first` the session's first ones), the current
        one, question, queue.

        A worker older than ``first`` answers the last page instead (``has_more`` tells).

        Raises:
            NotFound: the turn named is no turn of the session.
        """
        route = BRIDGE["transcript"]
        query = route.params(limit=limit, before=before, after=after, around=around, first=first or None)
        transcript: Transcript = await self.call(route, query=query)
        return transcript

    async def search(self, text: str, *, limit: int = 200) -> SearchResult:
        """Where `text` occurs in the whole session (case-insensitive), oldest first."""
        route = BRIDGE["search"]
        result: SearchResult = await self.call(route, query=route.params(q=text, limit=limit))
        return result

    def turn_output(self, turn_id: str, *, call_id: str | None = None) -> AsyncIterator[str]:
        """A turn's whole reply, or one of its tool call's whole output, as it streams.

        Raises:
            UnknownTurn, UnknownCall: no such turn, or no such call in it.
        """
        route = BRIDGE["turn_output"]
        return self.stream_text(route, query=route.params(call_id=call_id), turn_id=turn_id)

    def turn_files(self, turn_id: str, *, stat: bool = False) -> AsyncIterator[str]:
        """What a turn did to the session's files: a unified diff (or its ``--stat``), streamed.

        Raises:
            UnknownTurn: no such turn.
            InvalidRequest: the session keeps no checkpoints.
        """
        route = BRIDGE["turn_files"]
        return self.stream_text(route, query=route.params(stat="1" if stat else None), turn_id=turn_id)

    async def send_turn(
        self,
        prompt: str,
        *,
        request_id: str,
        delivery: Delivery = "now",
        images: list[ImageRef] | None = None,
    ) -> TurnAccepted:
        """Start a turn, or queue it behind the running one (`delivery` ``auto``: the worker
        decides). Idempotent by `request_id`."""
        if len(prompt) > MAX_PROMPT:
            raise TooLarge(
                f"the prompt is {len(prompt):,} characters and a turn takes at most {MAX_PROMPT:,}: "
                "send it in parts, or save it to a file and send a turn that reads the file",
                limit=MAX_PROMPT,
            )
        request = TurnRequest(
            prompt=prompt,
            client_id=self.client_id,
            request_id=request_id,
            images=images or [],
            delivery=delivery,
        )
        accepted: TurnAccepted = await self.call(BRIDGE["turn"], request)
        return accepted

    async def unqueue(self, queue_id: str) -> None:
        """Take a queued prompt back (NotFound once it started)."""
        await self.call(BRIDGE["unqueue"], queue_id=queue_id)

    async def answer(self, question_id: str, selected: list[str], freeform: str | None = None) -> None:
        """Answer the pending question with option labels and/or free text."""
        request = AnswerRequest(
            question_id=question_id, selected=selected, freeform=freeform, client_id=self.client_id
        )
        await self.call(BRIDGE["answer"], request)

    async def dismiss(self, question_id: str) -> None:
        """Dismiss the pending question."""
        await self.call(BRIDGE["dismiss"], DismissRequest(question_id=question_id, client_id=self.client_id))

    async def interrupt(self) -> bool:
        """End the running turn `interrupted` (the queue then waits); False when nothing ran."""
        reply: Interrupted = await self.call(BRIDGE["interrupt"], InterruptRequest(client_id=self.client_id))
        return reply.interrupted

    async def resume_queue(self) -> bool:
        """Run a queue held after an interrupt; False when it was not held."""
        reply: QueueResumed = await self.call(BRIDGE["queue_resume"])
        return reply.resumed

    async def set_model(self, model: str, setting: str | None = None) -> None:
        """Switch the session's model (or its agent's `setting`, ``mode`` …)."""
        await self.call(BRIDGE["model"], ModelRequest(model=model, setting=setting))

    async def note(self, text: str) -> Noted:
        """`/note TEXT`: a note the agent is given with its next turn, shown as from this client."""
        noted: Noted = await self.call(BRIDGE["note"], NoteRequest(text=text, client_id=self.client_id))
        return noted

    async def context_list(self) -> ContextList:
        """`/context`: the session's context sources and their latest values."""
        listed: ContextList = await self.call(BRIDGE["context_list"])
        return listed

    async def context_remove(self, name: str) -> None:
        """`/context remove NAME`: the source's runs stop and the agent no longer sees it."""
        await self.call(BRIDGE["context_remove"], name=name)

    async def stats(self) -> Stats:
        """The session's figures for `/stats`."""
        stats: Stats = await self.call(BRIDGE["stats"])
        return stats

    async def upload_image(self, path: Path) -> ImageRef:
        """Store an image where the worker reads it."""
        try:
            data = await asyncio.to_thread(path.read_bytes)
        except OSError as exc:
            raise InvalidRequest(f"cannot read image {path}: {exc.strerror}; check the path") from exc
        route = BRIDGE["images"]
        ref: ImageRef = await self.call(route, content=data, query=route.params(name=path.name))
        return ref
