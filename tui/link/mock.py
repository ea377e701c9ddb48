"""`MockLink`: an `AttachLink` that needs no worker, for testing what runs on top of a link.

Like httpx's ``MockTransport``, it ships in the package so that UI tests (and anyone building on
`AttachLink`) can script a session: `emit` appends events to an in-memory journal that every open
stream delivers in order; requests are recorded in `requests` and, by default, answered the way
a worker would (a turn starts or queues, an answer resolves the question, an interrupt ends the
turn). A `handler` may answer any request instead.

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
from pathlib import Path
from typing import Any, Literal

from tui.errors import (
    BadCursor,
    Busy,
    NotFound,
    QuestionNotPending,
    WorkerUnavailable,
)
from tui.link.base import AttachLink, Backoff, Live, Located
from tui.protocol import (
    By,
    Event,
    ImageRef,
    Info,
    PendingQuestion,
    Presence,
    QuestionAsked,
    QuestionResolved,
    QueueChanged,
    QueueItem,
    Stats,
    Status,
    TextChunk,
    ToolEnded,
    ToolOutput,
    ToolRecord,
    ToolStarted,
    Transcript,
    TurnAccepted,
    TurnEnded,
    TurnRecord,
    TurnStarted,
    WorkerStarted,
)
from tui.protocol.principal import Principal

__all__ = ["MockLink", "MockRequest"]


@dataclass
class MockRequest:
    """One request a client made: the route's name and its fields."""

    route: str
    """``send_turn``, ``unqueue``, ``answer``, ``dismiss``, ``interrupt``, ``set_model``, ``stats``,
    ``stop_worker``, ``delete_session``, ``archive_session``, ``transcript``, ``upload_image``."""
    body: dict[str, Any] = field(default_factory=dict)


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
        agent: the session's agent (``python``: replies are program output).
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
    ) -> None:
        self.agent = agent
        self.session_id = session_id
        self.principal = principal or Principal()
        self.present: list[Presence] = []
        """Who is attached, as `status` events and the transcript say (see `attend`)."""
        self.client_id = client_id
        self.where = where
        self.paths_complete = paths_complete
        self.version = version
        self.model = model
        self.handler = handler
        self.history: list[TurnRecord] = list(history or [])
        self.journal: list[Event] = []
        self.requests: list[MockRequest] = []
        self.located = Located("live")
        """What `locate` answers; set it to script a restart or the end of the worker."""
        self.streams_opened = 0
        self.closed = False
        self._seq = max((t.ended_seq or t.started_seq for t in self.history), default=0)
        self._changed = asyncio.Event()
        self._drop: str | None = None
        self._ids = itertools.count(1)
        self.current: TurnRecord | None = None
        self.question: PendingQuestion | None = None
        self.queue: list[QueueItem] = []
        self.state: Literal["idle", "working", "asking"] = "idle"
        self._request_ids: dict[str, TurnAccepted] = {}
        if auto_start:
            self.emit(WorkerStarted(epoch=1, pid=4242, version=version, agent=agent, model=model))

    # --- scripting ---------------------------------------------------------------------------
    def emit(self, event: Event) -> Event:
        """Append an event to the journal (its `seq` assigned) and deliver it to open streams."""
        self._seq += 1
        update: dict[str, Any] = {"seq": self._seq}
        if isinstance(event, Status) and "attached" not in event.model_fields_set:
            update["attached"] = list(self.present)  # as the worker does: every status says who
        event = event.model_copy(update=update)
        self.journal.append(event)
        self._track(event)
        self._wake()
        return event

    def drop(self, reason: str = "the stream dropped") -> None:
        """End every open stream with `WorkerUnavailable` (the follower asks `locate` and retries)."""
        self._drop = reason
        self._wake()

    def attend(self, *people: tuple[str, str]) -> None:
        """Say who is attached now, ``("ana", "viewer")`` each, with a `status` as the worker does."""
        self.present = [Presence(name=name, kind=kind) for name, kind in people]  # type: ignore[arg-type]
        self.emit(Status(state=self.state, model=self.model, attached=list(self.present)))

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
    ) -> None:
        """Emit `turn_ended` for the running turn, then start the next queued prompt if any."""
        if self.current is None:
            raise RuntimeError("no turn is running")
        self.emit(
            TurnEnded(turn_id=self.current.turn_id, outcome=outcome, reply=self.current.reply, error=error)
        )
        if self.queue:
            item, rest = self.queue[0], self.queue[1:]
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

    def _track(self, event: Event) -> None:
        if isinstance(event, TurnStarted):
            self.current = TurnRecord(
                turn_id=event.turn_id,
                prompt=event.prompt,
                by=event.by,
                client_id=event.client_id,
                request_id=event.request_id,
                origin=event.origin,
                started_seq=event.seq,
            )
            self.state = "working"
        elif isinstance(event, TextChunk) and self.current:
            self.current.reply += event.text
        elif isinstance(event, ToolStarted) and self.current:
            self.current.tools.append(ToolRecord(call_id=event.call_id, name=event.name, args=event.args))
        elif isinstance(event, ToolOutput | ToolEnded) and self.current:
            for tool in self.current.tools:
                if tool.call_id == event.call_id:
                    if isinstance(event, ToolOutput):
                        tool.output += event.text
                    else:
                        tool.status, tool.value, tool.error = event.status, event.value, event.error
        elif isinstance(event, QuestionAsked):
            self.question = PendingQuestion(**event.model_dump(exclude={"seq", "at", "type"}))
            self.state = "asking"
        elif isinstance(event, QuestionResolved):
            self.question = None
            self.state = "working" if self.current else "idle"
        elif isinstance(event, TurnEnded) and self.current:
            record = self.current.model_copy(
                update={"outcome": event.outcome, "error": event.error, "ended_seq": event.seq}
            )
            self.history.append(record)
            self.current = None
            self.question = None
            self.state = "idle"
        elif isinstance(event, QueueChanged):
            self.queue = list(event.items)
        elif isinstance(event, Status):
            self.state = event.state

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

    async def transcript(self, limit: int = 50, before: str | None = None) -> Transcript:
        answer = await self._handle("transcript", limit=limit, before=before)
        if answer is not NotImplemented:
            return answer  # type: ignore[no-any-return]
        turns = self.history
        if before is not None:
            ids = [t.turn_id for t in turns]
            turns = turns[: ids.index(before)] if before in ids else []
        page = turns[-limit:] if limit else []
        return Transcript(
            turns=page,
            current=self.current,
            question=self.question,
            queue=self.queue,
            state=self.state,
            model=self.model,
            cursor=self._seq,
            has_more=len(turns) > len(page),
            attached=list(self.present),
        )

    async def info(self) -> Info:
        return Info(
            version=self.version, session_id=self.session_id, epoch=1, agent=self.agent, model=self.model
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
        if request_id in self._request_ids:
            return self._request_ids[request_id]
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
            event = self.emit(QueueChanged(items=[*self.queue, item]))
            accepted = TurnAccepted(queue_id=item.queue_id, seq=event.seq)
        else:
            turn_id = self.start_turn(prompt, request_id=request_id, client_id=self.client_id)
            accepted = TurnAccepted(turn_id=turn_id, seq=self._seq)
        self._request_ids[request_id] = accepted
        return accepted

    async def unqueue(self, queue_id: str) -> None:
        if await self._handle("unqueue", queue_id=queue_id) is not NotImplemented:
            return
        if not any(i.queue_id == queue_id for i in self.queue):
            raise NotFound(f"queue item {queue_id} already started or never was")
        self.emit(QueueChanged(items=[i for i in self.queue if i.queue_id != queue_id]))

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
        if self.question is None or self.question.question_id != question_id:
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
        if self.question is not None:
            self.emit(
                QuestionResolved(
                    question_id=self.question.question_id, how="cancelled", client_id=self.client_id
                )
            )
        self.end_turn("interrupted")
        return True

    async def set_model(self, model: str) -> None:
        if await self._handle("set_model", model=model) is not NotImplemented:
            return
        from tui.protocol import ModelChanged

        self.model = model
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
