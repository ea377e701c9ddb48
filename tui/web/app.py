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
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from tui import __version__
from tui.errors import CapReached, Forbidden, InvalidRequest, Misdirected, NotFound, ServerStopping, TuiError
from tui.protocol import TurnAccepted, TurnRequest
from tui.protocol.ids import short_id
from tui.protocol.principal import Principal
from tui.protocol.routes import BRIDGE, SESSION_PREFIX, WEB, RouteSpec, forwarded
from tui.protocol.web import (
    Archived,
    Created,
    CreateRequest,
    Deleted,
    Participants,
    Resolved,
    Restarted,
    Revoked,
    SessionSummary,
    Shared,
    ShareRequest,
    Stopped,
    StopRequest,
    WakeRequest,
    WebInfo,
    WorkerView,
)
from tui.serve import (
    Handler,
    decode,
    flag,
    handlers,
    int_param,
    parse_body,
    read_body,
    refusal,
    routes,
    seq_header,
)
from tui.store import StatePaths
from tui.store.export import FORMATS
from tui.store.export import export as export_journal
from tui.web.auth import authenticate, describe
from tui.web.fanout import FanOuts, FollowResponse
from tui.web.forward import FORWARDED_HEADERS, KEEPALIVE, Forwarder, OpenStream
from tui.web.participants import ParticipantStore, parse_ttl
from tui.web.paths import WebPaths
from tui.web.sessions import LocalSessions

__all__ = ["FEATURES", "STREAM_CAP", "WebBridge", "create_app"]

log = logging.getLogger("tui.web")

FEATURES = ("session_commands", "remote_attach", "participants")
"""What this web bridge can do, as `GET /api/info` names it."""

STREAM_CAP = 3
"""Open event streams a participant's token may hold at once; one more gets 429 ``cap_reached``."""

WATCH_EVERY = 0.2
"""Seconds between two checks of the participants file for revoked or expired open streams."""


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
    trusted: Principal | None = None
    """Who every request is, with no token: the owner for ``tui relay``, which only the user's
    own SSH connection reaches (`tui.web.relay`). None: tokens decide."""

    def __post_init__(self) -> None:
        self.web = WebPaths.of(self.state.root)
        self.participants = ParticipantStore(self.web)
        self.sessions = LocalSessions(self.state)
        self.forwarder = Forwarder()
        self.fanouts = FanOuts(BRIDGE["events"].path)

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
            error = ServerStopping("this web bridge is shutting down; try again in a second")
        elif not self.bridge.host_allowed(host):
            error = Misdirected(
                f"this web bridge answers as {self.bridge.url} only, not {host or 'no Host'}; "
                f"use that address (`tui remote add NAME {self.bridge.url} --token-file F`)"
            )
        else:
            origin = headers.get("origin")
            if origin is not None and origin.rstrip("/").lower() != f"http://{host.lower()}":
                error = Forbidden(
                    f"requests from pages of {origin} are not answered here; use `tui --remote NAME`"
                )
        if error is not None:
            await refusal(error)(scope, receive, send)
            return
        await self.app(scope, receive, send)


# --- routes ----------------------------------------------------------------------------------
Endpoint = Callable[[Request, Principal, str], Awaitable[Any]]
"""A route's work once its guard passed: the request, who asks, and the session's full id."""


def create_app(bridge: WebBridge) -> Starlette:
    """The web bridge's ASGI app for `bridge`: the routes of `tui.protocol.routes.WEB`, and every
    route of `BRIDGE` that a remote may use forwarded under ``/api/sessions/{id}``."""
    s = bridge.sessions

    def guard(spec: RouteSpec, fn: Endpoint) -> Handler:
        """Authenticate, resolve the session, and check the route's permission before `fn`."""
        assert spec.permission is not None
        permission = spec.permission
        per_session = "{id}" in spec.path

        async def endpoint(request: Request) -> Any:
            principal = bridge.trusted or authenticate(
                request.headers.get("authorization"), bridge.owner_digest, bridge.participants
            )
            sid = _session_of(principal, str(request.path_params["id"])) if per_session else ""
            principal.check(permission, sid or None)
            if principal.participant_id is not None:
                bridge.participants.seen(principal.participant_id)
            return await fn(request, principal, sid)

        return endpoint

    def _session_of(principal: Principal, given: str) -> str:
        if principal.is_owner:
            return s.resolve(given)
        mine = principal.session_id or ""
        if not given or not mine.startswith(given.lower()):
            principal.check("read", "")  # raises not_permitted: another session
        if not s.exists(mine):
            raise NotFound(f"session {short_id(mine)} no longer exists on this machine")
        return mine

    # --- the machine ---------------------------------------------------------------------------
    async def web_info(request: Request, principal: Principal, sid: str) -> WebInfo:
        """What this web bridge is and who is asking."""
        return WebInfo(
            version=__version__, features=list(FEATURES), principal=describe(principal, bridge.participants)
        )

    async def openapi(request: Request, principal: Principal, sid: str) -> dict[str, Any]:
        """This API's OpenAPI document."""
        from tui.web.openapi import document

        return document()

    async def sessions(request: Request, principal: Principal, sid: str) -> list[SessionSummary]:
        """Every session (``archived=1`` includes archived ones); a participant sees its one."""
        q = request.query_params
        rows = await s.summaries(include_archived=flag(q.get("archived")))
        if not principal.is_owner:
            rows = [r for r in rows if r.id == principal.session_id]
        if flag(q.get("live")):
            rows = [r for r in rows if r.live]
        if q.get("working_directory"):
            rows = [r for r in rows if r.folder == q["working_directory"]]
        sort = q.get("sort")
        if sort in ("created_at", "title", "state"):
            rows.sort(key=lambda r: str(getattr(r, sort)), reverse=q.get("order", "desc") != "asc")
        elif q.get("order") == "asc":
            rows.reverse()
        if q.get("limit"):
            rows = rows[: int_param(request, "limit", len(rows))]
        return rows

    async def resolve(request: Request, principal: Principal, sid: str) -> Resolved:
        """The full id of an id or unique prefix (``?id=PREFIX``)."""
        given = request.query_params.get("id", "")
        if not given:
            raise InvalidRequest("id: a session id or prefix is needed (?id=PREFIX)", field="id")
        full = _session_of(principal, given)
        return Resolved(id=full, short_id=short_id(full))

    async def create(request: Request, principal: Principal, sid: str) -> Created:
        """A new session, its worker started; its first turn when ``prompt`` is given."""
        body = await parse_body(request, CreateRequest)
        folder = body.working_directory or bridge.started_in
        new_id = await s.create(working_directory=folder, agent=body.agent, model=body.model, wait=body.wait)
        created = Created(id=new_id, short_id=short_id(new_id))
        if body.prompt and not body.idle:
            turn = TurnRequest(prompt=body.prompt, client_id=body.client_id, request_id=body.request_id)
            answer = await bridge.forwarder.send(
                s.socket(new_id),
                "POST",
                BRIDGE["turn"].path,
                body=turn.model_dump_json(exclude_none=True).encode(),
                headers={"content-type": "application/json"},
            )
            if answer.status_code < 300:
                created.turn = TurnAccepted.model_validate_json(bytes(answer.body))
        return created

    # --- one session ---------------------------------------------------------------------------
    async def show(request: Request, principal: Principal, sid: str) -> SessionSummary:
        """The session's summary."""
        return await s.show(sid)

    async def delete(request: Request, principal: Principal, sid: str) -> Deleted:
        """Remove the session (``?force=1`` stops a live worker first)."""
        stopped = await s.delete(sid, force=flag(request.query_params.get("force")))
        return Deleted(id=sid, stopped=stopped)

    async def stop(request: Request, principal: Principal, sid: str) -> Stopped:
        """Stop the worker; the session stays."""
        await parse_body(request, StopRequest)
        return Stopped(id=sid, stopped=await s.stop(sid))

    async def restart(request: Request, principal: Principal, sid: str) -> Restarted:
        """Stop the worker and start a new one."""
        body = await parse_body(request, WakeRequest)
        return Restarted(id=sid, worker=await s.restart(sid, wait=body.wait))

    async def archive(request: Request, principal: Principal, sid: str) -> Archived:
        """Hide the session from lists."""
        await read_body(request)
        await s.archive(sid)
        return Archived(id=sid)

    async def unarchive(request: Request, principal: Principal, sid: str) -> Archived:
        """List the session again."""
        await read_body(request)
        await s.unarchive(sid)
        return Archived(id=sid, archived=False)

    async def wake(request: Request, principal: Principal, sid: str) -> WorkerView:
        """Start the worker when none runs; wait for it up to ``wait`` seconds (``starting`` if it
        is not ready by then)."""
        body = await parse_body(request, WakeRequest)
        return await s.wake(sid, wait=body.wait)

    async def worker(request: Request, principal: Principal, sid: str) -> WorkerView:
        """The session's worker now (never started by this)."""
        return s.worker(sid)

    async def export(request: Request, principal: Principal, sid: str) -> Response:
        """The session's whole transcript from its journal, streamed (``format``: text, markdown,
        jsonl)."""
        fmt = request.query_params.get("format") or "text"
        if fmt not in FORMATS:
            raise InvalidRequest(f"format: {fmt!r} is not one of {', '.join(FORMATS)}", field="format")
        pieces = export_journal(bridge.state.session(sid).journal, fmt)
        return StreamingResponse(pieces, media_type=f"{WEB['export'].media}; charset=utf-8")

    # --- participants --------------------------------------------------------------------------
    async def participants(request: Request, principal: Principal, sid: str) -> Participants:
        """Who the session is shared with."""
        return Participants(participants=[p.view() for p in bridge.participants.of_session(sid)])

    async def share(request: Request, principal: Principal, sid: str) -> Shared:
        """Share the session: a new participant, its token shown once."""
        body = await parse_body(request, ShareRequest)
        ttl = parse_ttl(str(body.ttl)) if body.ttl is not None else None
        person, token = bridge.participants.add(
            sid, name=body.name, kind=body.kind, ttl=ttl, turns=body.turns
        )
        return Shared(
            participant=person.view(),
            token=token,
            url=bridge.url,
            command=f"tui remote add NAME {bridge.url} --token-file FILE",
        )

    async def revoke(request: Request, principal: Principal, sid: str) -> Revoked:
        """Revoke one participant (``?participant=NAME``) or all of the session's."""
        who = request.query_params.get("participant") or None
        done = bridge.participants.revoke(sid, who)
        bridge.close_streams_of_gone_tokens()
        return Revoked(revoked=[p.view() for p in done])

    # --- forwarded to the worker ---------------------------------------------------------------
    def forward(spec: RouteSpec) -> Endpoint:
        async def forwarded(request: Request, principal: Principal, sid: str) -> Response:
            params = {k: str(v) for k, v in request.path_params.items() if k != "id"}
            for name, value in params.items():
                if not _ID.fullmatch(value):
                    raise NotFound(f"{name} {value[:40]!r}: no such id in this session", field=name)
            _check_headers(request)
            raw = await read_body(request)
            if spec.request is not None:
                decode(raw, spec.request)
            taken = None
            if spec.spends_turn and principal.participant_id is not None:
                taken = bridge.participants.take_turn(principal.participant_id)
            try:
                answer = await bridge.forwarder.send(
                    s.socket(sid),
                    request.method,
                    BRIDGE[spec.name].url(**params),
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

        return forwarded

    def forward_text(spec: RouteSpec) -> Endpoint:
        """A route answering with streamed text (a turn's whole output): passed through as it comes."""

        async def forwarded(request: Request, principal: Principal, sid: str) -> Response:
            params = {k: str(v) for k, v in request.path_params.items() if k != "id"}
            for name, value in params.items():
                if not _ID.fullmatch(value):
                    raise NotFound(f"{name} {value[:40]!r}: no such id in this session", field=name)
            _check_headers(request)
            upstream = await bridge.forwarder.open_stream(
                s.socket(sid),
                BRIDGE[spec.name].url(**params),
                query=request.url.query.encode(),
                headers=request.headers,
                extra=_by(principal),
            )
            if upstream.status_code != 200:
                body = await upstream.aread()
                await upstream.aclose()
                return Response(body, status_code=upstream.status_code, media_type="application/json")

            async def pieces() -> AsyncIterator[bytes]:
                try:
                    async for chunk in upstream.aiter_raw():
                        yield chunk
                finally:
                    await upstream.aclose()

            media = upstream.headers.get("content-type", spec.media)
            return StreamingResponse(pieces(), media_type=media)

        return forwarded

    async def events(request: Request, principal: Principal, sid: str) -> Response:
        """The session's event stream, passed through from its worker."""
        if principal.participant_id is not None:
            mine = [h for h in bridge.streams if h.token_digest == principal.token_digest]
            if len(mine) >= STREAM_CAP:
                raise CapReached(f"this token already has {STREAM_CAP} open streams; close one first")
        _check_headers(request)
        last_id = seq_header(request)
        socket = s.socket(sid)
        handle = OpenStream(principal.token_digest, sid, principal.participant_id)
        bridge.streams.add(handle)
        # Who follows is counted by the worker through a presence stream of each follower (it
        # checks the cursor too); the events come on one stream per session, shared.
        try:
            presence = await bridge.forwarder.open_stream(
                socket,
                BRIDGE["events"].path,
                query=request.url.query.encode(),
                headers=request.headers,
                extra={**_by(principal), "X-Tui-Fanout": "presence"},
            )
        except BaseException:
            bridge.streams.discard(handle)
            raise
        if presence.status_code != 200:
            bridge.streams.discard(handle)
            body = await presence.aread()
            await presence.aclose()
            return Response(body, status_code=presence.status_code, media_type="application/json")
        try:
            at = int(presence.headers["x-tui-last-seq"])
            shared = await bridge.fanouts.join(socket, at)
        except BaseException:
            bridge.streams.discard(handle)
            await presence.aclose()
            raise
        cursor = last_id if last_id is not None else int_param(request, "cursor", 0)
        return FollowResponse(
            bridge.fanouts,
            shared,
            presence,
            cursor,
            handle,
            keepalive=bridge.keepalive,
            on_end=bridge.streams.discard,
        )

    own: dict[str, Endpoint] = {
        "web_info": web_info,
        "openapi": openapi,
        "sessions": sessions,
        "create": create,
        "resolve": resolve,
        "show": show,
        "delete": delete,
        "stop": stop,
        "restart": restart,
        "archive": archive,
        "unarchive": unarchive,
        "wake": wake,
        "worker": worker,
        "export": export,
        "participants": participants,
        "share": share,
        "revoke": revoke,
    }
    remote = forwarded()
    passed: dict[str, Endpoint] = {
        spec.name: forward_text(spec) if spec.media.startswith("text/plain") else forward(spec)
        for spec in remote
        if spec.name != "events"
    }
    passed["events"] = events
    # A session's own routes go in one Mount with its forwarded ones, so that a method a path does
    # not take is a 405 naming the ones it does, wherever the path is served.
    inside = [spec for spec in WEB.values() if spec.path.startswith(SESSION_PREFIX + "/")]
    outside = [spec for spec in WEB.values() if spec not in inside]
    mounted = [*inside, *remote]
    endpoints = {**own, **passed}
    served = [
        *routes(outside, {spec.name: guard(spec, endpoints[spec.name]) for spec in outside}),
        Mount(
            SESSION_PREFIX,
            routes=routes(
                mounted,
                {spec.name: guard(spec, endpoints[spec.name]) for spec in mounted},
                prefix=SESSION_PREFIX,
            ),
        ),
    ]

    async def on_crash(request: Request, exc: Exception) -> Response:
        log.exception("%s %s failed", request.method, request.url.path)
        return refusal(TuiError(f"the web bridge failed on {request.method} {request.url.path}: {exc}"))

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
            await bridge.fanouts.close()
            await bridge.forwarder.close()

    app = Starlette(
        routes=served,
        exception_handlers={**handlers("see GET /api/openapi.json"), Exception: on_crash},
        lifespan=lifespan,
    )
    # `/api/sessions/` is no route: a 404 saying so, not a redirect.
    app.router.redirect_slashes = False
    app.add_middleware(_Gate, bridge=bridge)
    app.state.bridge = bridge
    return app


async def _watch(bridge: WebBridge) -> None:
    while True:
        await asyncio.sleep(WATCH_EVERY)
        bridge.close_streams_of_gone_tokens()


_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
"""What an id in a forwarded path looks like (a queue id): anything else is no such id."""


def _check_headers(request: Request) -> None:
    """Refuse header values the worker's bridge could not be sent (not ASCII)."""
    for name in FORWARDED_HEADERS:
        value = request.headers.get(name)
        if value is not None and not value.isascii():
            raise InvalidRequest(f"{name}: not ASCII", field=name)


def _by(principal: Principal) -> dict[str, str]:
    if principal.is_owner:
        return {}
    # `share` tells the worker whether the stream is a collaborator's or a viewer's (who is attached).
    return {"X-Tui-By": json.dumps({"kind": "participant", "name": principal.name, "share": principal.kind})}
