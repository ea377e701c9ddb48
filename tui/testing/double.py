"""`WorkerLink`: an `AttachLink` to a real worker core run in this process, for tests.

Like httpx's ``MockTransport``, it ships in the package so that UI tests, benchmarks (and anyone
building on `AttachLink`) can script a session without a process or a socket; it stands in
`tui.testing`, above the worker and the link, which never import it. It is no second worker: it
makes the real `SessionWorker` on a session of a temporary state dir (its journal, turn store
and reducer are the real ones) with a `ScriptedAgent`, whose turns run until the test ends them.
Each request goes through the worker's real Starlette bridge app (`tui.worker.bridge`) over
httpx's ``ASGITransport``; the event stream is the bridge's own stream of journal lines, read by
the client's SSE reader.

Tests script the session through the real core's writer and the agent's `TurnIO`:

    link = WorkerLink(history=[...])        # ended turns already in the journal
    turn = link.start_turn("print(1)")       # POST /turn's path: turn_started, a running turn
    link.emit(TextChunk(turn_id=turn, text="hello"))
    await link.reply("1\\n")                 # the agent returns: the worker ends the turn
    link.drop("worker restarted")            # the open stream fails; the follower reconnects
    link.located = Located("gone", "stopped by tui stop")

Every request is recorded in `requests` (the route's name in `tui.protocol.routes`, and its
body, query and path fields); a `handler` may answer any of them instead of the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import shutil
import tempfile
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Literal, cast

import httpx

from tui.errors import Busy, TuiError, WorkerUnavailable
from tui.link.base import AttachLink, Backoff, Live, Located, RouteCall
from tui.link.client import BridgeClient, _SseReader
from tui.protocol import By, Event, Presence, TurnRecord, TurnRequest, decode_event
from tui.protocol.events import (
    AgentInfo,
    EventBase,
    ToolEnded,
    ToolOutput,
    ToolStarted,
    TurnEnded,
    TurnStarted,
)
from tui.protocol.ids import short_id
from tui.protocol.messages import Delivery
from tui.protocol.principal import Principal
from tui.protocol.state import SessionState
from tui.store import Journal, JournalLine, SessionRecord, StatePaths, save_session
from tui.store.checkpoint import Checkpoint
from tui.worker.agent import Agent, AgentContext, Answer, TurnIO, TurnOutcome
from tui.worker.bridge import _stream, build_app
from tui.worker.core import SessionWorker

__all__ = ["LinkRequest", "ScriptedAgent", "ScriptedVerbs", "WorkerLink"]

Outcome = Literal["completed", "failed", "interrupted"]


@dataclass
class LinkRequest:
    """One request a client made: the route's name (``turn``, ``transcript``, ``answer`` …, and
    ``stop``, ``delete``, ``archive``, ``restart`` for the session's) and its body, query and path fields."""

    route: str
    body: dict[str, Any] = field(default_factory=dict)


Handler = Callable[[LinkRequest], Awaitable[Any] | Any]
"""Answers a request instead of the worker; return `NotImplemented` to let the worker answer."""


class ScriptedAgent(Agent):
    """An agent whose turn runs until the test ends it (`WorkerLink.end_turn`) or someone
    interrupts it; it takes any model it is switched to."""

    name: ClassVar[str] = "python"
    reply_format: ClassVar[Literal["verbatim", "markdown"]] = "verbatim"
    prompt_syntax: ClassVar[Literal["python", "text"]] = "python"

    def __init__(self, model: str | None = None, models: Sequence[str] = ()) -> None:
        self.model = model
        self.models = list(models)
        self.io: TurnIO | None = None
        """The running turn, as the worker hands it to an agent."""
        self._ending: asyncio.Future[TurnOutcome] | None = None
        self._began: asyncio.Event | None = None

    async def began(self) -> TurnIO:
        """The running turn, once the worker's task for it called `run_turn`."""
        while self.io is None:
            if self._began is None:
                self._began = asyncio.Event()
            await self._began.wait()
        return self.io

    @classmethod
    def from_context(cls, context: AgentContext) -> Agent:
        return cls(context.record.model)

    async def run_turn(self, turn: TurnIO) -> TurnOutcome:
        self.io = turn
        self._ending = asyncio.get_running_loop().create_future()
        if self._began is not None:
            self._began.set()
            self._began = None
        try:
            return await self._ending
        finally:
            self.io = None
            self._ending = None

    def end(self, outcome: TurnOutcome) -> None:
        """End the running turn as `outcome` says."""
        if self._ending is None or self._ending.done():
            raise RuntimeError("no turn is running")
        self._ending.set_result(outcome)

    def interrupt(self) -> None:
        if self._ending is not None and not self._ending.done():
            self._ending.set_result(TurnOutcome("interrupted"))

    def set_model(self, model: str) -> None:
        self.model = model


class _ClockedJournal(Journal):
    """The real journal, whose events' times come from `clock` when a test sets one (an event
    that says its own time keeps it)."""

    clock: Callable[[], datetime] | None = None
    _wrote: asyncio.Event | None = None

    def poke(self) -> None:
        """Wake whoever waits in `written`."""
        if self._wrote is not None:
            self._wrote.set()
            self._wrote = None

    async def written(self) -> None:
        """Until the next line is appended (or `poke`)."""
        if self._wrote is None:
            self._wrote = asyncio.Event()
        await self._wrote.wait()

    def append_line(self, event: Any) -> tuple[Any, JournalLine]:
        try:
            return self._append_line(event)
        finally:
            self.poke()

    def _append_line(self, event: Any) -> tuple[Any, JournalLine]:
        if self.clock is None and "at" not in event.model_fields_set:
            return super().append_line(event)
        if self._write_fd is None:
            raise TuiError(f"journal {self.path} is not open to append")
        at = event.at if "at" in event.model_fields_set else self.clock()  # type: ignore[misc]
        stamped = event.model_copy(update={"seq": self.last_seq + 1, "at": at})
        raw = stamped.model_dump_json().encode()
        typ = str(getattr(stamped, "type", ""))
        self._write_raw(stamped.seq, typ, raw)
        return stamped, JournalLine(stamped.seq, typ, raw)


def _let_go(journal: Journal, root: Path) -> None:
    """What a `WorkerLink` leaves once it is gone: its journal's files and its state dir."""
    journal.close()
    shutil.rmtree(root, ignore_errors=True)


class ScriptedVerbs:
    """The session verbs of a `WorkerLink`, as `tui.access.base.SessionAccess` is a real link's
    (`AttachLink.verbs`): each is recorded in the link's `requests` (``stop``, ``delete``,
    ``archive``, ``restart``) and its `handler` may answer it. Stopping makes the worker leave;
    a restart is refused while the session is not idle, as the access layer refuses it."""

    def __init__(self, link: WorkerLink) -> None:
        self.link = link

    async def stop(self, session_id: str) -> bool:
        link = self.link
        if await link._handled("stop", {}) is not NotImplemented:
            return True
        # This client's streams end first, as the client is leaving too (what a stream delivers
        # while the app closes is not what these tests look at).
        link.located = Located("gone", "the session was stopped")
        link.drop("the session was stopped")
        await link.worker.leave("stopped by /exit")
        return True

    async def delete(self, session_id: str, *, force: bool = False) -> None:
        await self.link._handled("delete", {"force": force})

    async def archive(self, session_id: str) -> None:
        await self.link._handled("archive", {})

    async def restart(self, session_id: str, *, wait: float = 10.0) -> bool:
        state = self.link.session.state
        if state != "idle":
            short = short_id(session_id)
            raise Busy(
                f"session {short} is {state}; restart it once it is idle, or end the turn with "
                f"`tui interrupt {short}` first"
            )
        await self.link._handled("restart", {})
        return True


class WorkerLink(AttachLink):
    """A real worker core in this process behind the `AttachLink` interface.

    Args:
        history: ended turns already in the session, oldest first (written to its journal and
            turn store before the worker starts).
        session_id: the session's id.
        client_id: this client's id.
        where: ``local`` or ``remote NAME``.
        model: the session's model.
        handler: answers requests instead of the worker.
        paths_complete: whether ``@path`` completions apply.
        principal: who this client acts as.
        agent: the session's agent's name.
        reply_format: how its replies are shown (``verbatim``: program output; ``markdown``).
        prompt_syntax: what its prompts are (``python`` programs, or ``text``).
        models: the models `set_model` offers.
        user: the owner's name in the events the worker writes (``alice``).
    """

    backoff = Backoff(first=0.01, factor=1.6, jitter=0.0, cap=0.05)

    def __init__(
        self,
        *,
        history: list[TurnRecord] | None = None,
        session_id: str = "3f2a9c0e1b7d4a55",
        client_id: str = "tui:test:1",
        where: str = "local",
        model: str | None = None,
        handler: Handler | None = None,
        paths_complete: bool = False,
        principal: Principal | None = None,
        agent: str = "python",
        reply_format: Literal["verbatim", "markdown"] = "verbatim",
        prompt_syntax: Literal["python", "text"] = "python",
        models: list[str] | None = None,
        user: str = "alice",
    ) -> None:
        self.session_id = session_id
        self.client_id = client_id
        self.where = where
        self.paths_complete = paths_complete
        self.principal = principal or Principal()
        self.handler = handler
        self.requests: list[LinkRequest] = []
        self.verbs = ScriptedVerbs(self)
        self.located = Located("live")
        """What `locate` answers; set it to script a restart or the end of the worker."""
        self.streams_opened = 0
        self.closed = False
        self._ids = itertools.count(1)
        self._drops: set[asyncio.Future[str]] = set()
        self._people: list[Any] = []
        self._asking: set[asyncio.Task[None]] = set()

        self._root = Path(tempfile.mkdtemp(prefix="tui-link-"))
        state = StatePaths(self._root / "state")
        paths = state.session(session_id)
        for folder in (paths.root, paths.turns, paths.images):
            folder.mkdir(mode=0o700, parents=True)
        record = SessionRecord(
            id=session_id,
            title="",
            created_at=datetime.now(UTC),
            working_directory=str(self._root),
            agent=agent,
            model=model,
        )
        save_session(state, record)
        self.state_paths = state
        journal = _ClockedJournal.open_for_append(paths.journal)
        assert isinstance(journal, _ClockedJournal)
        self._journal = journal
        weakref.finalize(self, _let_go, journal, self._root)
        kind = type(
            "ScriptedAgent",
            (ScriptedAgent,),
            {"name": agent, "reply_format": reply_format, "prompt_syntax": prompt_syntax},
        )
        self.agent: ScriptedAgent = kind(model, models or [])
        self.worker = SessionWorker(paths, record, journal, self.agent)
        self.worker.control.by = By(kind="owner", name=user)
        self.worker.writer.load(self._write_history(history or [], model))
        self.worker.begin()
        self.worker.resumed_at_turn = 0  # the history is the session's past, not a restart
        self._http = BridgeClient(
            transport=httpx.ASGITransport(app=build_app(self.worker)),
            label="the worker",
        )

    def _write_history(self, history: list[TurnRecord], model: str | None) -> Checkpoint | None:
        """The ended turns as the journal and the turn store hold them, and the checkpoint the
        worker starts from: turns whose record has no number (written before turns were
        numbered) do not count in the numbers of the turns that follow."""
        if not history:
            return None
        for record in history:
            self._journal.append(
                TurnStarted(
                    turn_id=record.turn_id,
                    prompt=record.prompt,
                    by=record.by,
                    client_id=record.client_id,
                    request_id=record.request_id,
                )
            )
            for tool in record.tools:
                turn, call = record.turn_id, tool.call_id
                self._journal.append(
                    ToolStarted(
                        turn_id=turn,
                        call_id=call,
                        name=tool.name,
                        args=tool.args,
                        title=tool.title,
                        kind=tool.kind,
                    )
                )
                if tool.output:
                    self._journal.append(ToolOutput(turn_id=turn, call_id=call, text=tool.output))
                self._journal.append(
                    ToolEnded(turn_id=turn, call_id=call, value=tool.value, error=tool.error)
                )
            self._journal.append(
                TurnEnded(
                    turn_id=record.turn_id,
                    outcome=record.outcome or "completed",
                    reply=record.reply,
                    error=record.error,
                )
            )
            # The record as given (tools, lines …): what /transcript pages.
            self.worker.writer.turn_store.save(record)
        mark = self._journal.mark()
        assert mark is not None
        state = SessionState(
            last_seq=mark.seq,
            model=model,
            turns_started=max(record.number for record in history),
            turns_ended=len(history),
        )
        return Checkpoint(mark=mark, state=state)

    # --- scripting ---------------------------------------------------------------------------
    @property
    def clock(self) -> Callable[[], datetime] | None:
        """When each event written from now on says it happened (None: now); tests set a fixed one."""
        return self._journal.clock

    @clock.setter
    def clock(self, clock: Callable[[], datetime] | None) -> None:
        self._journal.clock = clock

    @property
    def session(self) -> SessionState:
        """The session as its journal says it is (the worker's state)."""
        return self.worker.writer.state

    @property
    def last_seq(self) -> int:
        """The seq of the journal's last event."""
        return self.worker.writer.journal.last_seq

    @property
    def journal(self) -> list[Event]:
        """Every event of the journal, in order."""
        return [line.decode() for line in self.worker.writer.journal.iter_after(0)]

    @property
    def resumed_at_turn(self) -> int:
        return self.worker.resumed_at_turn

    @resumed_at_turn.setter
    def resumed_at_turn(self, turns: int) -> None:
        self.worker.resumed_at_turn = turns

    @property
    def present(self) -> list[Presence]:
        """Who is attached, as `status` events and the transcript say (see `attend`)."""
        return self.session.attached

    @property
    def model(self) -> str | None:
        return self.session.model

    @property
    def current(self) -> TurnRecord | None:
        """The running turn's record so far."""
        return self.session.current.record() if self.session.current is not None else None

    def next_id(self, prefix: str) -> str:
        """A fresh id such as ``r3`` for scripted requests."""
        return f"{prefix}{next(self._ids)}"

    def emit(self, event: EventBase) -> Event:
        """Write an event through the worker (journal, reducer, open streams); it gets its `seq`.

        An `agent_info` is said by the agent instead (its commands, mode and settings change, and
        the worker writes the event), so that ``/info`` says the same."""
        if isinstance(event, AgentInfo):
            self.agent.commands = list(event.commands)
            self.agent.mode = event.mode
            self.agent.modes = list(event.modes)
            self.agent.settings = list(event.settings)
            before = self.worker.writer.journal.last_seq
            self.agent.info_changed()
            lines = self.worker.writer.journal.read_after(before, 1)
            return lines[0].decode() if lines else self.journal[-1]
        return self.worker.writer.emit(event)

    def drop(self, reason: str = "the stream dropped") -> None:
        """End every open stream with `WorkerUnavailable` (the follower asks `locate` and retries)."""
        for dropped in self._drops:
            if not dropped.done():
                dropped.set_result(reason)

    def attend(self, *people: tuple[str, str]) -> None:
        """Say who is attached now, ``("ana", "viewer")`` each: a follower each in the worker's hub
        (a terminal's, hearing no events), and the `status` the worker then writes."""
        hub = self.worker.writer.hub
        for sub in self._people:
            hub.unsubscribe(sub)
        self._people = [
            hub.subscribe(f"tui:{name}:0", Presence(name=name, kind=kind), events=False)  # type: ignore[arg-type]
            for name, kind in people
        ]
        self.worker.writer.status_changed()

    def start_turn(
        self,
        prompt: str,
        *,
        by: str | None = None,
        client_id: str | None = None,
        request_id: str | None = None,
        delivery: Delivery = "now",
    ) -> str:
        """Send a turn as someone else would (the worker's ``POST /turn``); returns the turn's id
        (its queue id when it was queued)."""
        request = TurnRequest(
            prompt=prompt,
            client_id=client_id,
            request_id=request_id or self.next_id("r"),
            delivery=delivery,
        )
        accepted = self.worker.control.submit(request, By(name=by) if by else None)
        return accepted.turn_id or accepted.queue_id or ""

    async def end_turn(self, outcome: Outcome = "completed", *, error: str | None = None) -> None:
        """The agent returns: the worker writes `turn_ended` (and starts what is queued)."""
        current = self.session.current
        await self._io()
        self.agent.end(TurnOutcome(outcome, error))
        # The worker ends the turn in its own task once the agent returned: a few turns of the loop.
        while current is not None and self.session.current is current:
            await self._journal.written()

    async def reply(self, text: str, *, outcome: Outcome = "completed") -> None:
        """Stream `text` into the running turn as one chunk and end it."""
        (await self._io()).text(text)
        await self.end_turn(outcome)

    async def ask(
        self, text: str, options: list[str] | None = None, *, multiple: bool = False, freeform: bool = True
    ) -> str:
        """The running turn asks (the worker writes `question_asked`); returns the question's id."""
        from tui.protocol import Option

        io = await self._io()

        async def asking() -> None:
            with contextlib.suppress(Exception):
                answer: Answer = await io.ask(
                    text, [Option(label=o) for o in options or []], multiple=multiple, freeform=freeform
                )
                del answer

        task = asyncio.create_task(asking())
        self._asking.add(task)
        task.add_done_callback(self._asking.discard)
        task.add_done_callback(lambda _: self._journal.poke())
        while self.session.question is None and not task.done():
            await self._journal.written()
        if self.session.question is None:
            raise RuntimeError("the question was not asked")
        return self.session.question.question_id

    async def _io(self) -> TurnIO:
        if self.session.current is None:
            raise RuntimeError("no turn is running")
        return await self.agent.began()

    # --- AttachLink --------------------------------------------------------------------------
    async def locate(self) -> Located:
        return self.located

    async def open_stream(self, cursor: int) -> AsyncIterator[Event | Live]:
        if self.located.status != "live":
            raise WorkerUnavailable(self.located.reason or f"the worker is {self.located.status}")
        last = self.worker.writer.journal.last_seq
        if cursor > last:
            from tui.errors import BadCursor

            raise BadCursor(f"cursor {cursor} is ahead of the journal ({last})", last_seq=last)
        self.streams_opened += 1
        dropped: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._drops.add(dropped)
        frames = cast("AsyncGenerator[bytes, None]", _stream(self.worker, cursor, self.client_id, None))
        reader = _SseReader()
        chunk: asyncio.Future[bytes] | None = None
        try:
            yield Live(version=self.worker.info().version, epoch=self.session.epoch)
            while True:
                chunk = asyncio.ensure_future(frames.__anext__())
                racing: set[asyncio.Future[Any]] = {chunk, dropped}
                await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
                if not chunk.done():
                    raise WorkerUnavailable(dropped.result())
                try:
                    data = chunk.result()
                except StopAsyncIteration:
                    return
                complete = reader.feed(data)
                if reader.disk_full is not None:  # as `BridgeClient.events` reads the notice
                    yield Live(disk_full=reader.disk_full)
                    reader.disk_full = None
                for message, _ in complete:
                    yield decode_event(message)
        finally:
            self._drops.discard(dropped)
            if chunk is not None and not chunk.done():
                chunk.cancel()
                with contextlib.suppress(BaseException):
                    await chunk
            elif chunk is not None and not chunk.cancelled():
                chunk.exception()  # taken, even when the stream ended (StopAsyncIteration)
            await frames.aclose()

    async def _handled(self, route: str, fields: dict[str, Any]) -> Any:
        request = LinkRequest(route, fields)
        self.requests.append(request)
        if self.handler is None:
            return NotImplemented
        answer = self.handler(request)
        if isinstance(answer, Awaitable):
            answer = await answer
        return answer

    async def handle(self, call: RouteCall) -> Any:
        answer = await self._handled(call.route.name, call.fields())
        if answer is not NotImplemented:
            return answer
        if call.route.name == "turn" and self.located.status != "live":
            raise WorkerUnavailable("the worker is not running")
        return await self._http.handle(call)

    async def handle_text(self, call: RouteCall) -> AsyncIterator[str]:
        answer = await self._handled(call.route.name, call.fields())
        if answer is not NotImplemented:
            yield str(answer)
            return
        async for text in self._http.handle_text(call):
            yield text

    async def close(self) -> None:
        """The attach is over. The worker stays, so the same link can be attached again; its
        temporary state dir goes with the link."""
        self.closed = True
