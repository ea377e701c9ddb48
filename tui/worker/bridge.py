"""The bridge: every route of protocol.md over HTTP, as a Starlette router around a `SessionWorker`.

Refusals are ``{"error": code, "detail": sentence, …}`` from the `tui.errors` tree. Bodies past
4 MiB get 413 before they are read whole; JSON that does not validate gets 400
``invalid_request`` naming the field.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from pydantic import ValidationError
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Router
from starlette.types import ASGIApp, Receive, Scope, Send

from tui.errors import BadCursor, InvalidRequest
from tui.protocol import (
    Answered,
    AnswerRequest,
    BudgetRequest,
    BudgetView,
    By,
    ChildAdopted,
    ChildAdoptRequest,
    ContextAddRequest,
    ContextEntry,
    ContextList,
    ContextPushed,
    ContextPushRequest,
    ContextRemoved,
    Dismissed,
    DismissRequest,
    ImageRef,
    Info,
    Interrupted,
    InterruptRequest,
    LeaveRequest,
    Left,
    ModelRequest,
    ModelSet,
    Noted,
    NoteRequest,
    Presence,
    QueueResumed,
    Recorded,
    RewindDone,
    RewindRequest,
    SearchResult,
    ShareChanged,
    ShareRecord,
    Stats,
    Transcript,
    TurnAccepted,
    TurnRequest,
    Unqueued,
)
from tui.protocol.routes import BRIDGE
from tui.protocol.wording import unshared_transcript
from tui.serve import MAX_BODY, flag, handlers, int_param, parse_body, read_body, routes, seq_header
from tui.store import JournalLine
from tui.worker.core import SessionWorker, owner
from tui.worker.hub import BEHIND, CLOSED, sse_frame

__all__ = ["MAX_BODY", "build_app"]

log = logging.getLogger("tui.worker.bridge")

KEEPALIVE = 5.0
"""Seconds between ``: ping`` comments on an idle stream."""
REPLAY_BATCH = 512
REPLAY_BYTES = 256 * 1024
"""A replay sends at most this much at once, so a slow client holds little in memory."""


def _by(request: Request) -> By | None:
    """Who a forwarded request is for: ``X-Tui-By``, which only the web bridge sends.

    The bridge socket is mode 0600 in a 0700 folder, so only this user's processes can set it;
    the web bridge sets it for participants and drops any such header its own clients send.
    """
    raw = request.headers.get("x-tui-by")
    if not raw:
        return None
    try:
        return By.model_validate_json(raw)
    except ValidationError:
        raise InvalidRequest("X-Tui-By: not a {kind, name, share} object", field="X-Tui-By") from None


def _present(request: Request) -> Presence:
    """Whose stream this is: the web bridge names a participant and their share in ``X-Tui-By``
    (``share``: collaborator or viewer); anyone else on this socket is the owner."""
    by = _by(request)
    if by is None or by.kind == "owner":
        return Presence(name=(by.name if by and by.name else owner().name), kind="owner")
    return Presence(name=by.name, kind=by.share or "viewer")


def _sse(line: JournalLine) -> bytes:
    return sse_frame(line)


EVENTS_PARAMS = frozenset({"cursor", "client_id", "presence"})
"""The query parameters ``GET /events`` takes; any other is refused (400 ``invalid_request``)."""


def build_app(worker: SessionWorker) -> ASGIApp:
    """The bridge app of one worker: the routes of `tui.protocol.routes.BRIDGE`.

    A router and the exception handlers, without `Starlette`'s application around them: its
    error page's middleware imports `html` (its entity tables stay in every idle worker), and
    an exception no handler takes is answered 500 by uvicorn just the same.
    """

    async def info(request: Request) -> Info:
        return worker.info()

    async def events(request: Request) -> Response:
        # A parameter the stream does not take (``after=5``, ``since=5``) is refused: followed
        # from 0 instead, a client would be sent the whole journal again without a word.
        for name in request.query_params:
            if name not in EVENTS_PARAMS:
                raise InvalidRequest(
                    f"{name[:40]}: /events takes no such parameter; the cursor is cursor=N "
                    "(the events after seq N; 0 from the start)",
                    field=name[:40],
                )
        cursor = int_param(request, "cursor", 0)
        last_id = seq_header(request)
        if last_id is not None:
            cursor = last_id
        last = worker.writer.journal.last_seq
        if cursor > last:
            raise BadCursor(
                f"cursor {cursor} is ahead of this session's journal (last event {last}); "
                "follow from /transcript's cursor",
                last_seq=last,
            )
        client_id = request.query_params.get("client_id") or None
        # ``presence=later``: a reader (`tui acp`'s session/load): counted as attached at once,
        # named in the journal by the next status written for another reason.
        quiet = request.query_params.get("presence") == "later"
        headers = {"cache-control": "no-cache", "x-accel-buffering": "no"}
        # `tui web` follows a session with one stream shared by all its followers (``shared``:
        # nobody's, not counted as attached) and one ``presence`` stream per follower, which
        # counts it as attached, carries no events and says where the journal ends now.
        fanout = request.headers.get("x-tui-fanout")
        if fanout == "presence":
            headers["x-tui-last-seq"] = str(last)
            body = _presence(worker, client_id, _present(request), quiet)
        elif fanout == "shared":
            body = _stream(worker, cursor, None, None)
        else:
            body = _stream(worker, cursor, client_id, _present(request), quiet)
        return StreamingResponse(body, media_type="text/event-stream", headers=headers)

    async def transcript(request: Request) -> Transcript:
        limit = int_param(request, "limit", 50, high=1000)
        q = request.query_params
        first = flag(q.get("first"))
        given = [name for name in ("before", "after", "around") if q.get(name)]
        if first:
            given.append("first")
        if len(given) > 1:
            raise InvalidRequest(
                f"{given[1]}: give one of before, after, around and first, not {' and '.join(given)}",
                field=given[1],
            )
        transcript = worker.transcript(
            limit,
            q.get("before") or None,
            after=q.get("after") or None,
            around=q.get("around") or None,
            first=first,
        )
        by = _by(request)
        # A participant is not told of the session's shares (`share_changed`): not its lines either.
        return unshared_transcript(transcript) if by is not None and by.kind == "participant" else transcript

    async def search(request: Request) -> SearchResult:
        text = request.query_params.get("q", "")
        if not text.strip():
            raise InvalidRequest("q: give the text to find (GET /search?q=TEXT)", field="q")
        return await worker.search(text, int_param(request, "limit", 200, high=10_000))

    async def turn_output(request: Request) -> Response:
        call_id = request.query_params.get("call_id") or None
        text = worker.turn_output(request.path_params["turn_id"], call_id)
        return StreamingResponse(_pieces(text), media_type=f"{BRIDGE['turn_output'].media}; charset=utf-8")

    async def turn_files(request: Request) -> Response:
        stat = request.query_params.get("stat", "") in ("1", "true")
        text = await worker.turn_files(request.path_params["turn_id"], stat=stat)
        return Response(text, media_type=f"{BRIDGE['turn_files'].media}; charset=utf-8")

    async def queue_resume(request: Request) -> QueueResumed:
        await read_body(request)
        return QueueResumed(resumed=worker.control.resume_queue())

    async def stats(request: Request) -> Stats:
        return worker.stats()

    async def turn(request: Request) -> TurnAccepted:
        body = await parse_body(request, TurnRequest)
        return worker.control.submit(body, _by(request))

    async def answer(request: Request) -> Answered:
        body = await parse_body(request, AnswerRequest)
        if not await worker.answer_child(body):  # a child's question, answered from here
            worker.control.answer(body, _by(request))
        return Answered(question_id=body.question_id)

    async def dismiss(request: Request) -> Dismissed:
        body = await parse_body(request, DismissRequest)
        if not await worker.answer_child(body):
            worker.control.dismiss(body.question_id, body.client_id, _by(request))
        return Dismissed(question_id=body.question_id)

    async def interrupt(request: Request) -> Interrupted:
        await parse_body(request, InterruptRequest)
        return Interrupted(interrupted=worker.control.interrupt(hold=True))

    async def note(request: Request) -> Noted:
        body = await parse_body(request, NoteRequest)
        return worker.control.note(body, _by(request))

    async def rewind(request: Request) -> RewindDone:
        body = await parse_body(request, RewindRequest)
        return await worker.rewind(body, _by(request))

    async def budget(request: Request) -> BudgetView:
        return worker.control.budget_view()

    async def budget_set(request: Request) -> BudgetView:
        body = await parse_body(request, BudgetRequest)
        worker.control.refuse_if_leaving()
        return worker.control.set_budget(body, _by(request))

    async def context_list(request: Request) -> ContextList:
        return worker.context_list()

    async def context_add(request: Request) -> ContextEntry:
        body = await parse_body(request, ContextAddRequest)
        return worker.context_add(body, _by(request))

    async def context_remove(request: Request) -> ContextRemoved:
        name = request.path_params["name"]
        worker.context_remove(name, _by(request))
        return ContextRemoved(name=name)

    async def context_push(request: Request) -> ContextPushed:
        name = request.path_params["name"]
        body = await parse_body(request, ContextPushRequest)
        return ContextPushed(name=name, seq=worker.context_push(name, body.value))

    async def unqueue(request: Request) -> Unqueued:
        worker.control.unqueue(request.path_params["queue_id"])
        return Unqueued(queue_id=request.path_params["queue_id"])

    async def images(request: Request) -> ImageRef:
        data = await read_body(request)
        return worker.save_image(data, request.query_params.get("name", ""))

    async def model(request: Request) -> ModelSet:
        body = await parse_body(request, ModelRequest)
        worker.set_model(body.model, body.setting)
        return ModelSet(model=body.model)

    async def child_adopt(request: Request) -> ChildAdopted:
        body = await parse_body(request, ChildAdoptRequest)
        return await worker.adopt_child(body, _by(request))

    async def share_record(request: Request) -> Recorded:
        body = await parse_body(request, ShareRecord)
        worker.control.refuse_if_leaving()
        said = worker.writer.emit(ShareChanged(**body.model_dump(), by=worker.control.by))
        return Recorded(seq=said.seq)

    async def leave(request: Request) -> Left:
        body = await parse_body(request, LeaveRequest)
        await worker.leave(body.reason or "stopped on request", body.wait, restarting=body.restart)
        return Left()

    served = routes(
        BRIDGE.values(),
        {
            "info": info,
            "events": events,
            "transcript": transcript,
            "stats": stats,
            "turn": turn,
            "answer": answer,
            "dismiss": dismiss,
            "interrupt": interrupt,
            "note": note,
            "rewind": rewind,
            "budget": budget,
            "budget_set": budget_set,
            "context_list": context_list,
            "context_add": context_add,
            "context_remove": context_remove,
            "context_push": context_push,
            "unqueue": unqueue,
            "queue_resume": queue_resume,
            "search": search,
            "turn_output": turn_output,
            "turn_files": turn_files,
            "images": images,
            "model": model,
            "child_adopt": child_adopt,
            "share_record": share_record,
            "leave": leave,
        },
    )
    return _App(ExceptionMiddleware(Router(routes=served), handlers=handlers("see GET /info")))


class _App:
    """The ASGI app around the router: it marks the scope as Starlette's application does, so the
    router's 404 and a route's 405 are raised to the exception handlers (the JSON refusals)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["app"] = self
        await self.app(scope, receive, send)


OUTPUT_PIECE = 64 * 1024
"""Characters of a turn's output sent at once."""


async def _pieces(text: str) -> AsyncIterator[bytes]:
    for start in range(0, len(text), OUTPUT_PIECE):
        yield text[start : start + OUTPUT_PIECE].encode()


async def _presence(
    worker: SessionWorker, client_id: str | None, who: Presence, quiet: bool = False
) -> AsyncIterator[bytes]:
    """A follower counted as attached while this stream is open; it carries notices (``: disk_full``)
    and keepalives, no events."""
    sub = worker.writer.hub.subscribe(client_id, who, events=False, quiet=quiet)
    if not quiet:
        worker.writer.presence_changed()
    if worker.writer.disk_full is not None:
        sub.notice(b": disk_full %s\n\n" % worker.writer.disk_full.detail.encode(errors="replace"))
    try:
        while True:
            got = await sub.next(KEEPALIVE)
            if got is None:
                yield b": ping\n\n"
            elif isinstance(got, bytes):
                yield got
            elif got is CLOSED:
                return
    finally:
        worker.writer.hub.unsubscribe(sub)
        worker.writer.presence_changed(sub)


async def _stream(
    worker: SessionWorker,
    cursor: int,
    client_id: str | None,
    who: Presence | None = None,
    quiet: bool = False,
) -> AsyncIterator[bytes]:
    """Replay the journal after `cursor`, then live events: no gap and no repeat at the seam.

    The subscription starts before the replay, so an event appended while the replay is sent
    waits in the queue; anything at or below the last seq sent is skipped. Opening and closing
    the stream may emit a `status` naming who is attached now; a `quiet` one's opening never does
    (a reader: `Subscription.named`).
    """
    sub = worker.writer.hub.subscribe(client_id, who, quiet=quiet)
    if not quiet:
        worker.writer.presence_changed()
    sent = cursor
    if worker.writer.disk_full is not None:
        # A stream opened while the disk is full hears it as the ones open when it filled did.
        sub.notice(b": disk_full %s\n\n" % worker.writer.disk_full.detail.encode(errors="replace"))
    try:
        while True:
            # From the journal: at the start, and whenever this follower fell behind.
            while True:
                lines = worker.writer.journal.read_after(sent, REPLAY_BATCH, REPLAY_BYTES)
                if not lines:
                    break
                yield b"".join(_sse(line) for line in lines)
                sent = lines[-1].seq
                sub.wrote(sent)
            while True:
                got = await sub.next(KEEPALIVE)
                if got is None:
                    yield b": ping\n\n"
                    continue
                if isinstance(got, bytes):
                    yield got
                    continue
                if got is CLOSED:
                    # The worker is leaving: send what it appended last (worker_leaving), then end.
                    for line in worker.writer.journal.iter_after(sent):
                        yield _sse(line)
                    return
                if got is BEHIND:
                    break
                assert isinstance(got, list)
                # The usual case (nothing seen twice) takes the batch as it is, with no copy.
                fresh = got if got and got[0].seq > sent else [frame for frame in got if frame.seq > sent]
                if fresh and fresh[0].seq != sent + 1:
                    break
                if fresh:
                    yield fresh[0].data if len(fresh) == 1 else b"".join(frame.data for frame in fresh)
                    sent = fresh[-1].seq
                    sub.wrote(sent)  # back here once the server wrote it to the socket
    finally:
        worker.writer.hub.unsubscribe(sub)
        worker.writer.presence_changed(sub)
