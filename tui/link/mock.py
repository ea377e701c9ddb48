"""`MockLink`: an `AttachLink` that needs no worker, for testing what runs on top of a link.

Like httpx's ``MockTransport``, it ships in the package so that UI tests (and anyone building on
`AttachLink`) can script a session: `emit` appends events to an in-memory journal that every open
stream delivers in order; requests are recorded in `requests` and, by default, answered the way
a worker would (a turn starts or queues, an answer resolves the question, an interrupt ends the
turn). What the session is now (`session`) comes from the one reducer, `tui.protocol.state`.
A `handler` may answer any request instead.

    link = MockLink(history=[...])
    link.emit(TextChunk(turn_id="t1", text="hello"))
    link.drop("worker restarted")      # the open stream fails; the follower reconnects
    link.located = Located("gone", "stopped by tui stop")
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from tui.errors import (
    BadCursor,
    Busy,
    NotFound,
    QuestionNotPending,
    UnknownCall,
    UnknownTurn,
    WorkerUnavailable,
)
from tui.link.base import AttachLink, Backoff, Live, Located
from tui.protocol.events import (
    By,
    Event,
    Presence,
    QuestionAsked,
    QuestionResolved,
    QueueChanged,
    QueueItem,
    Status,
    TextChunk,
    TurnEnded,
    TurnStarted,
    WorkerStarted,
)
from tui.protocol.messages import (
    ImageRef,
    Info,
    SearchHit,
    SearchResult,
    Stats,
    Transcript,
    TurnAccepted,
    TurnRecord,
)
from tui.protocol.principal import Principal
from tui.protocol.state import SessionState

__all__ = ["MockLink", "MockRequest"]


@dataclass
class MockRequest:
    """One request a client made: the route's name and its fields."""

    route: str
    """``send_turn``, ``unqueue``, ``answer``, ``dismiss``, ``interrupt``, ``set_model``, ``stats``,
    ``stop_worker``, ``delete_session``, ``archive_session``, ``transcript``, ``upload_image``,
    ``search``, ``turn_output``, ``resume_queue``."""
    body: dict[str, Any] = field(default_factory=dict)


Where = Literal["prompt", "reply", "tool", "error"]

Handler = Callable[[MockRequest], Awaitable[Any] | Any]
"""Answers a request instead of the built-in behaviour; return `NotImplemented` to fall back."""


class MockLink(AttachLink):
    """A scripted session behind the `AttachLink` interface.

    Args:
        history: ended turns already in the session, oldest first (what `transcript` pages).
        session_id: the session's id.
        client_id: this client's id.
        where: ``local`` or ``remote NAME``.
        version: the worker version `info` and `worker_started` report.
        model: the session's model.
        handler: answers requests instead of the built-in behaviour.
        paths_complete: whether ``@path`` completions apply.
        auto_start: emit `worker_started` and a `status` at once, like a fresh worker.
        agent: the session's agent.
        reply_format: how its replies are shown (``verbatim``: program output; ``markdown``).
        prompt_syntax: what its prompts are (``python`` programs, or ``text``).
    """

    backoff = Backoff(first=0.01, factor=1.6, jitter=0.0, cap=0.05)

    def __init__(
        self,
        *,
        history: list[TurnRecord] | None = None,
        session_id: str = "3f2a9c0e1b7d4a55",
        client_id: str = "tui:test:1",
        where: str = "local",
        version: str = "0.1.0",
        model: str | None = None,
        handler: Handler | None = None,
        paths_complete: bool = False,
        auto_start: bool = True,
        principal: Principal | None = None,
        agent: str = "python",
        reply_format: Literal["verbatim", "markdown"] = "verbatim",
        prompt_syntax: Literal["python", "text"] = "python",
        models: list[str] | None = None,
    ) -> None:
        self.agent = agent
        self.models = list(models or [])
        self.reply_format: Literal["verbatim", "markdown"] = reply_format
        self.prompt_syntax: Literal["python", "text"] = prompt_syntax
        self.session_id = session_id
        self.principal = principal or Principal()
        self.client_id = client_id
        self.where = where
        self.paths_complete = paths_complete
        self.version = version
        self.handler = handler
        self.history: list[TurnRecord] = list(history or [])
        self.journal: list[Event] = []
        self.requests: list[MockRequest] = []
        self.located = Located("live")
        self.resumed_at_turn = 0
        """What `info` says of the worker's start (`Info.resumed_at_turn`)."""
        self.clock: Callable[[], datetime] | None = None
        """When each emitted event says it happened (None: now); tests set a fixed clock."""
        """What `locate` answers; set it to script a restart or the end of the worker."""
        self.streams_opened = 0
        self.closed = False
        self._seq = max((t.ended_seq or t.started_seq for t in self.history), default=0)
        self._changed = asyncio.Event()
        self._drop: str | None = None
        self._ids = itertools.count(1)
        self.session = SessionState(last_seq=self._seq, model=model)
        """The session as its journal says it is."""
        if auto_start:
            self.emit(WorkerStarted(epoch=1, pid=4242, version=version, agent=agent, model=model))

    # --- scripting ---------------------------------------------------------------------------
    def emit(self, event: Event) -> Event:
        """Append an event to the journal (its `seq` assigned) and deliver it to open streams."""
        self._seq += 1
        update: dict[str, Any] = {"seq": self._seq}
        if self.clock is not None and "at" not in event.model_fields_set:
            update["at"] = self.clock()
        if isinstance(event, Status) and "attached" not in event.model_fields_set:
            update["attached"] = list(self.present)  # as the worker does: every status says who
        event = event.model_copy(update=update)
        self.journal.append(event)
        ended = self.session.apply(event).ended_by(event)
        if ended is not None:
            if self.history and self.history[-1].turn_id == ended.turn_id:
                self.history[-1] = ended
            else:
                self.history.append(ended)
        self._wake()
        return event

    def drop(self, reason: str = "the stream dropped") -> None:
        """End every open stream with `WorkerUnavailable` (the follower asks `locate` and retries)."""
        self._drop = reason
        self._wake()

    def attend(self, *people: tuple[str, str]) -> None:
        """Say who is attached now, ``("ana", "viewer")`` each, with a `status` as the worker does."""
        present = [Presence(name=name, kind=kind) for name, kind in people]  # type: ignore[arg-type]
        self.emit(Status(state=self.session.state, model=self.model, attached=present))

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
        """A fresh id such as ``t3`` or ``q1`` for scripted events."""
        return f"{prefix}{next(self._ids)}"

    def start_turn(self, prompt: str, *, by: str = "alice", turn_id: str | None = None, **fields: Any) -> str:
        """Emit `turn_started` (and a working `status`); returns the turn's id."""
        turn_id = turn_id or self.next_id("t")
        self.emit(TurnStarted(turn_id=turn_id, prompt=prompt, by=By(name=by), **fields))
        self.emit(Status(state="working", model=self.model))
        return turn_id

    def end_turn(
        self,
        outcome: Literal["completed", "failed", "interrupted"] = "completed",
        *,
        error: str | None = None,
        hold: bool = False,
    ) -> None:
        """Emit `turn_ended` for the running turn, then start the next queued prompt if any (with
        `hold`, as after an interrupt, the queue waits instead until `resume_queue`)."""
        if self.current is None:
            raise RuntimeError("no turn is running")
        self.emit(
            TurnEnded(turn_id=self.current.turn_id, outcome=outcome, reply=self.current.reply, error=error)
        )
        if hold and self.session.queue and not self.session.queue_held:
            self.emit(QueueChanged(items=list(self.session.queue), held=True))
        self._next_queued()

    def _next_queued(self) -> None:
        if self.current is not None:
            return
        if self.session.queue and not self.session.queue_held:
            item, rest = self.session.queue[0], self.session.queue[1:]
            self.emit(QueueChanged(items=rest))
            self.start_turn(item.prompt, by=item.by.name, request_id=item.request_id, origin="queue")
        else:
            self.emit(Status(state="idle", model=self.model))

    def reply(
        self, text: str, *, outcome: Literal["completed", "failed", "interrupted"] = "completed"
    ) -> None:
        """Stream `text` into the running turn as one chunk and end it."""
        if self.current is None:
            raise RuntimeError("no turn is running")
        self.emit(TextChunk(turn_id=self.current.turn_id, text=text))
        self.end_turn(outcome)

    def ask(
        self, text: str, options: list[str] | None = None, *, multiple: bool = False, freeform: bool = True
    ) -> str:
        """Emit `question_asked` in the running turn; returns the question's id."""
        from tui.protocol import Option

        if self.current is None:
            raise RuntimeError("no turn is running")
        qid = self.next_id("q")
        self.emit(
            QuestionAsked(
                turn_id=self.current.turn_id,
                question_id=qid,
                text=text,
                options=[Option(label=o) for o in options or []],
                multiple=multiple,
                freeform=freeform,
            )
        )
        self.emit(Status(state="asking", model=self.model))
        return qid

    # --- the session as the journal says ---------------------------------------------------
    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # --- AttachLink ------------------------------------------------------------------------
    async def locate(self) -> Located:
        return self.located

    async def open_stream(self, cursor: int) -> AsyncIterator[Event | Live]:
        if self.located.status == "gone":
            raise WorkerUnavailable(self.located.reason or "the worker is gone")
        if self.located.status == "starting":
            raise WorkerUnavailable("the worker is starting")
        if cursor > self._seq:
            raise BadCursor(f"cursor {cursor} is ahead of the journal ({self._seq})")
        self.streams_opened += 1
        self._drop = None
        yield Live(version=self.version, epoch=1)
        index = 0
        while True:
            while index < len(self.journal):
                event = self.journal[index]
                index += 1
                if event.seq > cursor:
                    yield event
            reason = self._take_drop()
            if reason is not None:
                raise WorkerUnavailable(reason)
            await self._changed.wait()

    def _take_drop(self) -> str | None:
        reason, self._drop = self._drop, None
        return reason

    async def _handle(self, route: str, **body: Any) -> Any:
        request = MockRequest(route, body)
        self.requests.append(request)
        if self.handler is not None:
            answer = self.handler(request)
            if isinstance(answer, Awaitable):
                answer = await answer
            if answer is not NotImplemented:
                return answer
        return NotImplemented

    async def transcript(
        self,
        limit: int = 50,
        *,
        before: str | None = None,
        after: str | None = None,
        around: str | None = None,
    ) -> Transcript:
        answer = await self._handle("transcript", limit=limit, before=before, after=after, around=around)
        if answer is not NotImplemented:
            return answer  # type: ignore[no-any-return]
        ids = [t.turn_id for t in self.history]
        for named in (before, after, around):
            if named is not None and named not in ids:
                raise NotFound(f"no ended turn {named!r} in this session")
        end = ids.index(before) if before is not None else len(ids)
        start = max(0, end - limit)
        if after is not None:
            start = ids.index(after) + 1
            end = min(len(ids), start + limit)
        elif around is not None:
            start = max(0, min(ids.index(around) - limit // 2, len(ids) - limit))
            end = min(len(ids), start + limit)
        newer = end < len(ids)
        return Transcript(
            turns=self.history[start:end] if limit else [],
            current=self.current if before is None and not newer else None,
            question=self.session.question,
            queue=list(self.session.queue),
            queue_held=self.session.queue_held,
            state=self.session.state,
            model=self.model,
            cursor=self._seq,
            has_more=start > 0,
            has_newer=newer,
            attached=list(self.present),
            turns_started=self.session.turns_started,
            notes=list(self.session.notes) if before is None and not newer else [],
        )

    async def info(self) -> Info:
        return Info(
            version=self.version,
            session_id=self.session_id,
            epoch=1,
            agent=self.agent,
            model=self.model,
            reply_format=self.reply_format,
            prompt_syntax=self.prompt_syntax,
            commands=list(self.session.commands),
            models=self.models,
            resumed_at_turn=self.resumed_at_turn,
        )

    async def send_turn(
        self,
        prompt: str,
        *,
        request_id: str,
        delivery: Literal["now", "queue"] = "now",
        images: list[ImageRef] | None = None,
    ) -> TurnAccepted:
        answer = await self._handle("send_turn", prompt=prompt, request_id=request_id, delivery=delivery)
        if answer is not NotImplemented:
            return answer  # type: ignore[no-any-return]
        if request_id in self.session.requests:
            return self.session.requests[request_id]
        if self.located.status != "live":
            raise WorkerUnavailable("the worker is not running")
        if self.current is not None:
            if delivery == "now":
                raise Busy("a turn is running; queue this prompt or wait")
            item = QueueItem(
                queue_id=self.next_id("u"),
                request_id=request_id,
                prompt=prompt,
                client_id=self.client_id,
                by=By(name="alice"),
            )
            self.emit(QueueChanged(items=[*self.session.queue, item], held=self.session.queue_held))
        else:
            self.start_turn(prompt, request_id=request_id, client_id=self.client_id)
        return self.session.requests[request_id]

    async def unqueue(self, queue_id: str) -> None:
        if await self._handle("unqueue", queue_id=queue_id) is not NotImplemented:
            return
        if not any(i.queue_id == queue_id for i in self.session.queue):
            raise NotFound(f"queue item {queue_id} already started or never was")
        items = [i for i in self.session.queue if i.queue_id != queue_id]
        self.emit(QueueChanged(items=items, held=self.session.queue_held and bool(items)))

    async def answer(self, question_id: str, selected: list[str], freeform: str | None = None) -> None:
        if await self._handle(
            "answer", question_id=question_id, selected=selected, freeform=freeform
        ) is not (NotImplemented):
            return
        self._resolve(question_id, "answered", selected, freeform)

    async def dismiss(self, question_id: str) -> None:
        if await self._handle("dismiss", question_id=question_id) is not NotImplemented:
            return
        self._resolve(question_id, "dismissed", [], None)

    def _resolve(self, question_id: str, how: Any, selected: list[str], freeform: str | None) -> None:
        if self.session.question is None or self.session.question.question_id != question_id:
            raise QuestionNotPending("that question is no longer pending")
        self.emit(
            QuestionResolved(
                question_id=question_id,
                how=how,
                selected=selected,
                freeform=freeform,
                client_id=self.client_id,
                by=By(name="alice"),
            )
        )
        self.emit(Status(state="working", model=self.model))

    async def interrupt(self) -> bool:
        answer = await self._handle("interrupt")
        if answer is not NotImplemented:
            return bool(answer)
        if self.current is None:
            return False
        if self.session.question is not None:
            self.emit(
                QuestionResolved(
                    question_id=self.session.question.question_id, how="cancelled", client_id=self.client_id
                )
            )
        self.end_turn("interrupted", hold=True)
        return True

    async def resume_queue(self) -> bool:
        answer = await self._handle("resume_queue")
        if answer is not NotImplemented:
            return bool(answer)
        if not self.session.queue_held:
            return False
        self.emit(QueueChanged(items=list(self.session.queue), held=False))
        self._next_queued()
        return True

    async def search(self, text: str, *, limit: int = 200) -> SearchResult:
        answer = await self._handle("search", text=text, limit=limit)
        if answer is not NotImplemented:
            return answer  # type: ignore[no-any-return]
        needle = text.lower()
        hits: list[SearchHit] = []
        for record in [*self.history, *([self.current] if self.current is not None else [])]:
            fields: list[tuple[Literal["prompt", "reply", "tool", "error"], str]] = [
                ("prompt", record.prompt)
            ]
            fields += [("tool", f"{t.args}\n{t.output}") for t in record.tools]
            fields += [("reply", record.reply), ("error", record.error or "")]
            places = dict.fromkeys(where for where, value in fields if needle in value.lower())
            hits += [SearchHit(turn_id=record.turn_id, where=where, snippet=text) for where in places]
        return SearchResult(hits=hits[:limit], total=len(hits), more=len(hits) > limit)

    async def turn_output(self, turn_id: str, *, call_id: str | None = None) -> AsyncIterator[str]:
        answer = await self._handle("turn_output", turn_id=turn_id, call_id=call_id)
        if answer is not NotImplemented:
            yield str(answer)
            return
        record = self.current if self.current is not None and self.current.turn_id == turn_id else None
        record = record or next((t for t in self.history if t.turn_id == turn_id), None)
        if record is None:
            raise UnknownTurn(f"no turn {turn_id!r} in this session")
        if call_id is None:
            text = record.reply
        else:
            tool = next((t for t in record.tools if t.call_id == call_id), None)
            if tool is None:
                raise UnknownCall(f"turn {turn_id} has no tool call {call_id!r}")
            text = tool.output
        for start in range(0, len(text), 64 * 1024):
            yield text[start : start + 64 * 1024]

    async def set_model(self, model: str, setting: str | None = None) -> None:
        if await self._handle("set_model", model=model) is not NotImplemented:
            return
        from tui.protocol import ModelChanged

        self.emit(ModelChanged(model=model))

    async def stats(self) -> Stats:
        answer = await self._handle("stats")
        if answer is not NotImplemented:
            return answer  # type: ignore[no-any-return]
        return Stats(turns=len(self.history), events=self._seq, attached=[self.client_id])

    async def upload_image(self, path: Path) -> ImageRef:
        answer = await self._handle("upload_image", path=str(path))
        if answer is not NotImplemented:
            return answer  # type: ignore[no-any-return]
        return ImageRef(file=path.name, name=path.name)

    async def stop_worker(self) -> None:
        if await self._handle("stop_worker") is not NotImplemented:
            return
        from tui.protocol import WorkerLeaving

        self.emit(WorkerLeaving(reason="stopped by /exit"))
        self.located = Located("gone", "the session was stopped")

    async def delete_session(self) -> None:
        await self._handle("delete_session")

    async def archive_session(self) -> None:
        await self._handle("archive_session")

    async def close(self) -> None:
        self.closed = True
