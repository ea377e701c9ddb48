"""The web bridge app: this machine's sessions for other machines, behind bearer tokens.

Every request passes the gate first (the server is not stopping, the ``Host`` is the bound
address, no foreign ``Origin``), then its route's guard (whose token, what its kind may do, which
session). Session commands run here on the state dir; every route of protocol.md under
``/api/sessions/{id}/`` is forwarded to the session's worker over its Unix socket, with
``X-Tui-By`` naming a participant so the worker marks their turns and answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from tui import __version__
from tui.errors import InvalidRequest, NotFound, Refused, TooLarge, TuiError, WorkerUnavailable
from tui.store import StatePaths
from tui.web.auth import Level, Principal, authenticate, permit
from tui.web.forward import KEEPALIVE, Forwarder, OpenStream, StreamResponse
from tui.web.participants import ParticipantStore, parse_ttl
from tui.web.paths import WebPaths
from tui.web.sessions import LocalSessions

__all__ = ["BODY_LIMIT", "FEATURES", "STREAM_CAP", "WebBridge", "create_app", "status_of"]

log = logging.getLogger("tui.web")

FEATURES = ("session_commands", "remote_attach", "participants")
"""What this web bridge can do, as `GET /api/info` names it."""

BODY_LIMIT = 4 * 1024 * 1024
"""The largest request body taken; more gets 413."""

STREAM_CAP = 3
"""Open event streams a participant's token may hold at once; one more gets 429 ``cap_reached``."""

WATCH_EVERY = 0.2
"""Seconds between two checks of the participants file for revoked or expired open streams."""

_DRAIN_LIMIT = 64 * 1024 * 1024
_STATUS = {
    "unauthorized": 401,
    "token_revoked": 401,
    "token_expired": 401,
    "forbidden": 403,
    "not_permitted": 403,
    "misdirected": 421,
    "too_many_turns": 429,
    "cap_reached": 429,
    "not_an_image": 415,
    "server_stopping": 503,
    "no_worker": 503,
}
M = TypeVar("M", bound=BaseModel)


def status_of(error: TuiError) -> int:
    """The HTTP status of a refusal: by its code where the code says more than its class."""
    return _STATUS.get(error.code, error.status)


def refusal(error: TuiError) -> JSONResponse:
    """A refusal as the wire carries it: ``{"error", "detail", …}`` with its status."""
    return JSONResponse(error.to_wire(), status_code=status_of(error))


@dataclass(eq=False)
class WebBridge:
    """Everything a running ``tui web`` holds."""

    state: StatePaths
    owner_digest: str
    started_in: str = field(default_factory=os.getcwd)
    """The default folder of sessions created remotely: where ``tui web`` was started."""
    host: str = "127.0.0.1"
    port: int = 0
    stopping: bool = False
    streams: set[OpenStream] = field(default_factory=set)
    keepalive: float = KEEPALIVE

    def __post_init__(self) -> None:
        self.web = WebPaths.of(self.state.root)
        self.participants = ParticipantStore(self.web)
        self.sessions = LocalSessions(self.state)
        self.forwarder = Forwarder()

    @property
    def url(self) -> str:
        """The base URL clients use (on an any-address bind, this machine's outward address)."""
        host = self.host
        bound = _ip(host)
        if bound is not None and bound.is_unspecified:
            host = _outward_address(bound.version)
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    def host_allowed(self, header: str) -> bool:
        """Whether a ``Host`` header names this server: its bound address and port.

        On a loopback address ``localhost`` is taken too; on an any-address (0.0.0.0, ::) any IP
        literal is, never a name (a name is how a DNS-rebinding page would reach us).
        """
        host, port = _split_host(header)
        if port != self.port or not host:
            return False
        if host == self.host.lower():
            return True
        bound = _ip(self.host)
        if bound is not None and bound.is_loopback and (host == "localhost" or _is_loopback(host)):
            return True
        return bound is not None and bound.is_unspecified and _ip(host) is not None

    def begin_stop(self) -> None:
        """Shutting down: refuse new requests with 503, end every open stream now."""
        self.stopping = True
        for handle in list(self.streams):
            handle.close("server stopping")

    def close_streams_of_gone_tokens(self) -> None:
        """End the open streams of revoked or expired participants."""
        watched = [h for h in self.streams if h.participant_id is not None]
        if not watched:
            return
        try:
            self.participants.load()
        except TuiError:
            return
        for handle in watched:
            assert handle.participant_id is not None
            person = self.participants.get(handle.participant_id)
            state = person.state() if person is not None else "revoked"
            if state != "active":
                handle.close(f"token {state}")


def _outward_address(version: int) -> str:
    """The address other machines reach this one at: the source of a route out (nothing is sent)."""
    family, probe, fallback = (
        (socket.AF_INET6, "2001:db8::1", "::1")
        if version == 6
        else (socket.AF_INET, "192.0.2.1", "127.0.0.1")
    )
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((probe, 9))
            return str(s.getsockname()[0])
    except OSError:
        return fallback


def _split_host(header: str) -> tuple[str, int | None]:
    h = header.strip().lower()
    if h.startswith("["):
        host, _, rest = h[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = h.rpartition(":") if ":" in h else (h, "", "")
    try:
        return host, int(port) if port else 80
    except ValueError:
        return host, None


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None


def _is_loopback(text: str) -> bool:
    ip = _ip(text)
    return ip is not None and ip.is_loopback


class _Gate:
    """ASGI middleware: stopping, Host and Origin, before any route runs."""

    def __init__(self, app: ASGIApp, bridge: WebBridge) -> None:
        self.app = app
        self.bridge = bridge

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        error: TuiError | None = None
        host = headers.get("host", "")
        if self.bridge.stopping:
            error = WorkerUnavailable(
                "this web bridge is shutting down; try again in a second", code="server_stopping"
            )
        elif not self.bridge.host_allowed(host):
            error = Refused(
                f"this web bridge answers as {self.bridge.url} only, not {host or 'no Host'}; "
                f"use that address (`tui remote add NAME {self.bridge.url} --token-file F`)",
                code="misdirected",
            )
        else:
            origin = headers.get("origin")
            if origin is not None and origin.rstrip("/").lower() != f"http://{host.lower()}":
                error = Refused(
                    f"requests from pages of {origin} are not answered here; use `tui --remote NAME`",
                    code="forbidden",
                )
        if error is not None:
            await refusal(error)(scope, receive, send)
            return
        await self.app(scope, receive, send)


# --- bodies ----------------------------------------------------------------------------------
class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateRequest(_Body):
    working_directory: str | None = None
    agent: str = "python"
    model: str | None = None
    prompt: str | None = None
    idle: bool = False
    client_id: str | None = None
    request_id: str | None = None
    wait: float = Field(default=10.0, ge=0, le=60)


class WakeRequest(_Body):
    wait: float = Field(default=10.0, ge=0, le=60)


class StopRequest(_Body):
    wait: float = Field(default=5.0, ge=0, le=60)


class ShareRequest(_Body):
    name: str
    kind: Literal["viewer", "collaborator"]
    ttl: str | int | None = None
    turns: int | None = Field(default=None, ge=0)


async def read_body(request: Request, limit: int = BODY_LIMIT) -> bytes:
    """The request's body, at most `limit` bytes.

    Raises:
        TooLarge: the body is larger (the rest is read and dropped, so the client hears the 413).
    """
    declared = request.headers.get("content-length")
    chunks: list[bytes] = []
    size = 0
    over = declared is not None and declared.isdigit() and int(declared) > limit
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            over = True
        if not over:
            chunks.append(chunk)
        elif size > _DRAIN_LIMIT:
            break
    if over:
        raise TooLarge(f"the body is larger than {limit // (1024 * 1024)} MiB; send less", code="too_large")
    return b"".join(chunks)


def _check_json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw.strip() else {}
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"the body is not JSON: {exc}", code="invalid_request") from exc


async def parse_body(request: Request, model: type[M]) -> M:
    """The JSON body validated as `model` (an empty body is ``{}``).

    Raises:
        InvalidRequest: not JSON, or a field that does not validate (named in the sentence).
    """
    data = _check_json(await read_body(request))
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise InvalidRequest(f"{where}: {first['msg']}", code="invalid_request", field=where) from exc


# --- routes ----------------------------------------------------------------------------------
Handler = Callable[[Request, Principal, str], Awaitable[Response]]


def create_app(bridge: WebBridge) -> Starlette:
    """The web bridge's ASGI app for `bridge`."""
    s = bridge.sessions

    def guard(
        level: Level, *, session: bool = True
    ) -> Callable[[Handler], Callable[[Request], Awaitable[Response]]]:
        def wrap(fn: Handler) -> Callable[[Request], Awaitable[Response]]:
            async def endpoint(request: Request) -> Response:
                principal = authenticate(
                    request.headers.get("authorization"), bridge.owner_digest, bridge.participants
                )
                sid = ""
                if session:
                    sid = _session_of(principal, str(request.path_params["id"]))
                permit(principal, level, sid or None)
                if principal.participant_id is not None:
                    bridge.participants.seen(principal.participant_id)
                return await fn(request, principal, sid)

            endpoint.__name__ = fn.__name__
            endpoint.__doc__ = fn.__doc__
            return endpoint

        return wrap

    def _session_of(principal: Principal, given: str) -> str:
        if principal.is_owner:
            return s.resolve(given)
        mine = principal.session_id or ""
        if not given or not mine.startswith(given.lower()):
            permit(principal, "read", "")  # raises not_permitted: another session
        if not s.exists(mine):
            raise NotFound(f"session {mine[:8]} no longer exists on this machine")
        return mine

    # --- the machine ---------------------------------------------------------------------------
    @guard("any", session=False)
    async def info(request: Request, principal: Principal, sid: str) -> Response:
        """What this web bridge is and who is asking."""
        return JSONResponse(
            {
                "app": "tui-web",
                "version": __version__,
                "features": list(FEATURES),
                "principal": principal.info(bridge.participants),
            }
        )

    @guard("any", session=False)
    async def openapi(request: Request, principal: Principal, sid: str) -> Response:
        """This API's OpenAPI schema."""
        from tui.web.openapi import schema

        return JSONResponse(schema())

    @guard("owner", session=False)
    async def list_sessions(request: Request, principal: Principal, sid: str) -> Response:
        """Every session (``archived=1`` includes archived ones)."""
        q = request.query_params
        rows = await s.summaries(include_archived=_flag(q.get("archived")))
        if _flag(q.get("live")):
            rows = [r for r in rows if r["live"]]
        if q.get("working_directory"):
            rows = [r for r in rows if r["folder"] == q["working_directory"]]
        if q.get("sort") in ("created_at", "title", "state"):
            rows.sort(key=lambda r: str(r[q["sort"]]), reverse=q.get("order", "desc") != "asc")
        elif q.get("order") == "asc":
            rows.reverse()
        if q.get("limit"):
            rows = rows[: _int(q["limit"], "limit")]
        return JSONResponse(rows)

    @guard("any", session=False)
    async def resolve(request: Request, principal: Principal, sid: str) -> Response:
        """The full id of an id or unique prefix (``?id=PREFIX``)."""
        given = request.query_params.get("id", "")
        if not given:
            raise InvalidRequest("id: a session id or prefix is needed (?id=PREFIX)", field="id")
        full = _session_of(principal, given)
        return JSONResponse({"id": full, "short_id": full[:8]})

    @guard("owner", session=False)
    async def create(request: Request, principal: Principal, sid: str) -> Response:
        """A new session, its worker started; its first turn when ``prompt`` is given."""
        body = await parse_body(request, CreateRequest)
        folder = body.working_directory or bridge.started_in
        new_id = await s.create(working_directory=folder, agent=body.agent, model=body.model, wait=body.wait)
        reply: dict[str, Any] = {"id": new_id, "short_id": new_id[:8], "turn": None}
        if body.prompt and not body.idle:
            turn = {"prompt": body.prompt, "client_id": body.client_id, "request_id": body.request_id}
            answer = await bridge.forwarder.send(
                s.socket(new_id),
                "POST",
                "/turn",
                body=json.dumps(turn).encode(),
                headers={"content-type": "application/json"},
            )
            reply["turn"] = json.loads(bytes(answer.body)) if answer.status_code < 300 else None
        return JSONResponse(reply, status_code=201)

    # --- one session ---------------------------------------------------------------------------
    @guard("read")
    async def show(request: Request, principal: Principal, sid: str) -> Response:
        """The session's summary."""
        return JSONResponse(await s.show(sid))

    @guard("owner")
    async def delete(request: Request, principal: Principal, sid: str) -> Response:
        """Remove the session (``?force=1`` stops a live worker first)."""
        stopped = await s.delete(sid, force=_flag(request.query_params.get("force")))
        return JSONResponse({"id": sid, "deleted": True, "stopped": stopped})

    @guard("owner")
    async def stop(request: Request, principal: Principal, sid: str) -> Response:
        """Stop the worker; the session stays."""
        await parse_body(request, StopRequest)
        return JSONResponse({"id": sid, "stopped": await s.stop(sid)})

    @guard("owner")
    async def restart(request: Request, principal: Principal, sid: str) -> Response:
        """Stop the worker and start a new one."""
        body = await parse_body(request, WakeRequest)
        return JSONResponse({"id": sid, "worker": await s.restart(sid, wait=body.wait)})

    @guard("owner")
    async def archive(request: Request, principal: Principal, sid: str) -> Response:
        """Hide the session from lists."""
        await read_body(request)
        await s.archive(sid)
        return JSONResponse({"id": sid, "archived": True})

    @guard("read")
    async def wake(request: Request, principal: Principal, sid: str) -> Response:
        """Start the worker when none runs; wait for it up to ``wait`` seconds."""
        body = await parse_body(request, WakeRequest)
        worker = await s.wake(sid, wait=body.wait)
        if not worker["live"]:
            raise WorkerUnavailable(
                f"the worker of session {sid[:8]} did not come up within {body.wait:g} s; try again",
                code="no_worker",
            )
        return JSONResponse(worker)

    @guard("read")
    async def worker(request: Request, principal: Principal, sid: str) -> Response:
        """The session's worker now (never started by this)."""
        return JSONResponse(s.worker(sid))

    # --- participants --------------------------------------------------------------------------
    @guard("owner")
    async def participants_list(request: Request, principal: Principal, sid: str) -> Response:
        """Who the session is shared with."""
        return JSONResponse({"participants": [p.view() for p in bridge.participants.of_session(sid)]})

    @guard("owner")
    async def participants_add(request: Request, principal: Principal, sid: str) -> Response:
        """Share the session: a new participant, its token shown once."""
        body = await parse_body(request, ShareRequest)
        ttl = parse_ttl(str(body.ttl)) if body.ttl is not None else None
        person, token = bridge.participants.add(
            sid, name=body.name, kind=body.kind, ttl=ttl, turns=body.turns
        )
        return JSONResponse(
            {
                "participant": person.view(),
                "token": token,
                "url": bridge.url,
                "command": f"tui remote add NAME {bridge.url} --token-file FILE",
            },
            status_code=201,
        )

    @guard("owner")
    async def participants_revoke(request: Request, principal: Principal, sid: str) -> Response:
        """Revoke one participant (``?participant=NAME``) or all of the session's."""
        who = request.query_params.get("participant") or None
        done = bridge.participants.revoke(sid, who)
        bridge.close_streams_of_gone_tokens()
        return JSONResponse({"revoked": [p.view() for p in done]})

    # --- forwarded to the worker ---------------------------------------------------------------
    def forward(path: str, level: Level, *, turn: bool = False) -> Callable[[Request], Awaitable[Response]]:
        async def forwarded(request: Request, principal: Principal, sid: str) -> Response:
            raw = await read_body(request)
            if request.method == "POST" and not path.endswith("/images"):
                _check_json(raw)
            target = path.format(**request.path_params)
            taken = None
            if turn and principal.participant_id is not None:
                taken = bridge.participants.take_turn(principal.participant_id)
            try:
                socket = s.socket(sid)
                answer = await bridge.forwarder.send(
                    socket,
                    request.method,
                    target,
                    query=request.url.query.encode(),
                    headers=request.headers,
                    body=raw,
                    extra=_by(principal),
                )
            except BaseException:
                if taken is not None:
                    bridge.participants.give_back_turn(taken.id)
                raise
            if taken is not None and answer.status_code >= 300:
                bridge.participants.give_back_turn(taken.id)
            return answer

        forwarded.__name__ = "forward_" + path.strip("/").replace("/", "_").replace("{", "").replace("}", "")
        return guard(level)(forwarded)

    @guard("read")
    async def events(request: Request, principal: Principal, sid: str) -> Response:
        """The session's event stream, passed through from its worker."""
        if principal.participant_id is not None:
            mine = [h for h in bridge.streams if h.token_digest == principal.token_digest]
            if len(mine) >= STREAM_CAP:
                raise Refused(
                    f"this token already has {STREAM_CAP} open streams; close one first",
                    code="cap_reached",
                )
        socket = s.socket(sid)
        handle = OpenStream(principal.token_digest, sid, principal.participant_id)
        bridge.streams.add(handle)
        try:
            upstream = await bridge.forwarder.open_stream(
                socket,
                "/events",
                query=request.url.query.encode(),
                headers=request.headers,
                extra=_by(principal),
            )
        except BaseException:
            bridge.streams.discard(handle)
            raise
        if upstream.status_code != 200:
            bridge.streams.discard(handle)
            body = await upstream.aread()
            await upstream.aclose()
            return Response(body, status_code=upstream.status_code, media_type="application/json")
        return StreamResponse(upstream, handle, keepalive=bridge.keepalive, on_end=bridge.streams.discard)

    routes = [
        Route("/api/info", info, methods=["GET"]),
        Route("/api/openapi.json", openapi, methods=["GET"]),
        Route("/api/sessions", list_sessions, methods=["GET"]),
        Route("/api/sessions", create, methods=["POST"]),
        Route("/api/sessions/resolve", resolve, methods=["GET"]),
        Route("/api/sessions/{id}", show, methods=["GET"]),
        Route("/api/sessions/{id}", delete, methods=["DELETE"]),
        Route("/api/sessions/{id}/stop", stop, methods=["POST"]),
        Route("/api/sessions/{id}/restart", restart, methods=["POST"]),
        Route("/api/sessions/{id}/archive", archive, methods=["POST"]),
        Route("/api/sessions/{id}/wake", wake, methods=["POST"]),
        Route("/api/sessions/{id}/worker", worker, methods=["GET"]),
        Route("/api/sessions/{id}/participants", participants_list, methods=["GET"]),
        Route("/api/sessions/{id}/participants", participants_add, methods=["POST"]),
        Route("/api/sessions/{id}/participants", participants_revoke, methods=["DELETE"]),
        Route("/api/sessions/{id}/events", events, methods=["GET"]),
        Route("/api/sessions/{id}/info", forward("/info", "read"), methods=["GET"]),
        Route("/api/sessions/{id}/transcript", forward("/transcript", "read"), methods=["GET"]),
        Route("/api/sessions/{id}/stats", forward("/stats", "read"), methods=["GET"]),
        Route("/api/sessions/{id}/turn", forward("/turn", "write", turn=True), methods=["POST"]),
        Route("/api/sessions/{id}/answer", forward("/answer", "write"), methods=["POST"]),
        Route("/api/sessions/{id}/question/dismiss", forward("/question/dismiss", "write"), methods=["POST"]),
        Route("/api/sessions/{id}/interrupt", forward("/interrupt", "write"), methods=["POST"]),
        Route(
            "/api/sessions/{id}/queue/{queue_id}", forward("/queue/{queue_id}", "write"), methods=["DELETE"]
        ),
        Route("/api/sessions/{id}/images", forward("/images", "write"), methods=["POST"]),
        Route("/api/sessions/{id}/model", forward("/model", "owner"), methods=["POST"]),
    ]

    async def on_tui_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, TuiError)
        return refusal(exc)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            return refusal(NotFound(f"no route {request.method} {request.url.path}; see /api/openapi.json"))
        error = InvalidRequest(f"{request.method} {request.url.path}: {exc.detail}", code="invalid_request")
        return JSONResponse(error.to_wire(), status_code=exc.status_code)

    async def on_crash(request: Request, exc: Exception) -> Response:
        log.exception("%s %s failed", request.method, request.url.path)
        error = TuiError(f"the web bridge failed on {request.method} {request.url.path}: {exc}")
        return JSONResponse(error.to_wire(), status_code=500)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        watcher = asyncio.create_task(_watch(bridge))
        try:
            yield
        finally:
            bridge.begin_stop()
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            await bridge.forwarder.close()

    app = Starlette(
        routes=routes,
        exception_handlers={TuiError: on_tui_error, HTTPException: on_http_error, Exception: on_crash},
        lifespan=lifespan,
    )
    app.add_middleware(_Gate, bridge=bridge)
    app.state.bridge = bridge
    return app


async def _watch(bridge: WebBridge) -> None:
    while True:
        await asyncio.sleep(WATCH_EVERY)
        bridge.close_streams_of_gone_tokens()


def _by(principal: Principal) -> dict[str, str]:
    if principal.is_owner:
        return {}
    # `share` tells the worker whether the stream is a collaborator's or a viewer's (who is attached).
    return {"X-Tui-By": json.dumps({"kind": "participant", "name": principal.name, "share": principal.kind})}


def _flag(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true", "yes", "on")


def _int(value: str, name: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise InvalidRequest(f"{name}: {value!r} is not a whole number", field=name) from None
