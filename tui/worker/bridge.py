"""The bridge: every route of protocol.md over HTTP, as a Starlette app around a `SessionWorker`.

Refusals are ``{"error": code, "detail": sentence, …}`` from the `tui.errors` tree. Bodies past
4 MiB get 413 before they are read whole; JSON that does not validate gets 400
``invalid_request`` naming the field.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tui.errors import Conflict, InvalidRequest, NotFound, TooLarge, TuiError
from tui.protocol import (
    AnswerRequest,
    By,
    DismissRequest,
    InterruptRequest,
    LeaveRequest,
    ModelRequest,
    Presence,
    TurnRequest,
)
from tui.store import JournalLine
from tui.worker.core import SessionWorker, owner
from tui.worker.hub import BEHIND, CLOSED

__all__ = ["MAX_BODY", "build_app"]

log = logging.getLogger("tui.worker.bridge")

MAX_BODY = 4 * 1024 * 1024
"""The largest request body the bridge reads."""
KEEPALIVE = 5.0
"""Seconds between ``: ping`` comments on an idle stream."""
REPLAY_BATCH = 512
REPLAY_BYTES = 256 * 1024
"""A replay sends at most this much at once, so a slow client holds little in memory."""

M = TypeVar("M", bound=BaseModel)


def _json(model: BaseModel | dict[str, Any], status: int = 200) -> Response:
    if isinstance(model, BaseModel):
        return Response(model.model_dump_json(), status_code=status, media_type="application/json")
    return JSONResponse(model, status_code=status)


async def _body(request: Request) -> bytes:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > MAX_BODY:
        raise TooLarge(f"the request body is over {MAX_BODY // (1024 * 1024)} MiB", limit=MAX_BODY)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise TooLarge(f"the request body is over {MAX_BODY // (1024 * 1024)} MiB", limit=MAX_BODY)
        chunks.append(chunk)
    return b"".join(chunks)


async def _parse(request: Request, model: type[M]) -> M:
    raw = await _body(request)
    if not raw.strip():
        raw = b"{}"
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":
            raise InvalidRequest(f"the body is not valid JSON: {first['msg']}") from exc
        field = ".".join(str(p) for p in first["loc"]) or "body"
        raise InvalidRequest(f"{field}: {first['msg']}", field=field) from exc


def _int_param(request: Request, name: str, default: int, *, low: int = 0, high: int | None = None) -> int:
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise InvalidRequest(f"{name}: {text!r} is not a whole number", field=name) from None
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise InvalidRequest(f"{name}: must be {bound}, not {value}", field=name)
    return value


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
        raise InvalidRequest("X-Tui-By: not a {kind, name} object", field="X-Tui-By") from None


def _present(request: Request) -> Presence:
    """Whose stream this is: the web bridge names a participant's share in ``X-Tui-By``
    (``share``: collaborator or viewer); anyone else on this socket is the owner."""
    by = _by(request)
    if by is None or by.kind == "owner":
        return Presence(name=(by.name if by and by.name else owner().name), kind="owner")
    try:
        share = json.loads(request.headers.get("x-tui-by", "")).get("share")
    except (ValueError, AttributeError):
        share = None
    return Presence(name=by.name, kind="collaborator" if share == "collaborator" else "viewer")


def _sse(line: JournalLine) -> bytes:
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (line.seq, line.type.encode(), line.raw)


def build_app(worker: SessionWorker) -> Starlette:
    """The bridge app of one worker."""

    async def info(request: Request) -> Response:
        return _json(worker.info())

    async def events(request: Request) -> Response:
        cursor = _int_param(request, "cursor", 0)
        last_id = request.headers.get("last-event-id")
        if last_id is not None and last_id.strip():
            try:
                cursor = int(last_id)
            except ValueError:
                raise InvalidRequest(
                    f"Last-Event-ID: {last_id!r} is not a seq", field="Last-Event-ID"
                ) from None
        last = worker.journal.last_seq
        if cursor > last:
            raise Conflict(
                f"cursor {cursor} is ahead of this session's journal (last event {last}); "
                "follow from /transcript's cursor",
                code="bad_cursor",
                last_seq=last,
            )
        if cursor < 0:
            raise InvalidRequest("cursor: must be at least 0", field="cursor")
        client_id = request.query_params.get("client_id") or None
        return StreamingResponse(
            _stream(worker, cursor, client_id, _present(request)),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
        )

    async def transcript(request: Request) -> Response:
        limit = _int_param(request, "limit", 50, high=1000)
        before = request.query_params.get("before") or None
        return _json(worker.transcript(limit, before))

    async def turn(request: Request) -> Response:
        body = await _parse(request, TurnRequest)
        return _json(worker.submit(body, _by(request)), 202)

    async def unqueue(request: Request) -> Response:
        worker.unqueue(request.path_params["queue_id"])
        return _json({"queue_id": request.path_params["queue_id"], "removed": True})

    async def answer(request: Request) -> Response:
        body = await _parse(request, AnswerRequest)
        worker.answer(body, _by(request))
        return _json({"question_id": body.question_id, "answered": True})

    async def dismiss(request: Request) -> Response:
        body = await _parse(request, DismissRequest)
        worker.dismiss(body.question_id, body.client_id, _by(request))
        return _json({"question_id": body.question_id, "dismissed": True})

    async def interrupt(request: Request) -> Response:
        await _parse(request, InterruptRequest)
        return _json({"interrupted": worker.interrupt()})

    async def model(request: Request) -> Response:
        body = await _parse(request, ModelRequest)
        worker.set_model(body.model)
        return _json({"model": body.model})

    async def stats(request: Request) -> Response:
        return _json(worker.stats())

    async def images(request: Request) -> Response:
        data = await _body(request)
        name = request.query_params.get("name", "")
        return _json(worker.save_image(data, name), 201)

    async def leave(request: Request) -> Response:
        body = await _parse(request, LeaveRequest)
        await worker.leave("stopped on request", body.wait)
        return _json({"released": True})

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, TuiError)
        return JSONResponse(exc.to_wire(), status_code=exc.status)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            error: TuiError = NotFound(f"no route {request.method} {request.url.path}; see GET /info")
        else:
            error = InvalidRequest(
                f"{request.method} {request.url.path}: {exc.detail}", code="invalid_request"
            )
        return JSONResponse(error.to_wire(), status_code=exc.status_code)

    routes = [
        Route("/info", info, methods=["GET"]),
        Route("/events", events, methods=["GET"]),
        Route("/transcript", transcript, methods=["GET"]),
        Route("/turn", turn, methods=["POST"]),
        Route("/queue/{queue_id}", unqueue, methods=["DELETE"]),
        Route("/answer", answer, methods=["POST"]),
        Route("/question/dismiss", dismiss, methods=["POST"]),
        Route("/interrupt", interrupt, methods=["POST"]),
        Route("/model", model, methods=["POST"]),
        Route("/stats", stats, methods=["GET"]),
        Route("/images", images, methods=["POST"]),
        Route("/leave", leave, methods=["POST"]),
    ]
    return Starlette(routes=routes, exception_handlers={TuiError: refused, HTTPException: http_error})


async def _stream(
    worker: SessionWorker, cursor: int, client_id: str | None, who: Presence | None = None
) -> AsyncIterator[bytes]:
    """Replay the journal after `cursor`, then live events: no gap and no repeat at the seam.

    The subscription starts before the replay, so an event appended while the replay is sent
    waits in the queue; anything at or below the last seq sent is skipped. Opening and closing
    the stream may emit a `status` naming who is attached now.
    """
    sub = worker.hub.subscribe(client_id, who)
    worker.presence_changed()
    sent = cursor
    try:
        while True:
            # From the journal: at the start, and whenever this follower fell behind.
            while True:
                lines = worker.journal.read_after(sent, REPLAY_BATCH, REPLAY_BYTES)
                if not lines:
                    break
                yield b"".join(_sse(line) for line in lines)
                sent = lines[-1].seq
            while True:
                got = await sub.next(KEEPALIVE)
                if got is None:
                    yield b": ping\n\n"
                    continue
                if got is CLOSED:
                    # The worker is leaving: send what it appended last (worker_leaving), then end.
                    for line in worker.journal.iter_after(sent):
                        yield _sse(line)
                    return
                if got is BEHIND:
                    break
                assert isinstance(got, list)
                fresh = [line for line in got if line.seq > sent]
                if fresh and fresh[0].seq != sent + 1:
                    break
                if fresh:
                    yield b"".join(_sse(line) for line in fresh)
                    sent = fresh[-1].seq
    finally:
        worker.hub.unsubscribe(sub)
        worker.presence_changed()
