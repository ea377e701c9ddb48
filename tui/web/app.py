"""The web bridge app: this machine's sessions for other machines, behind bearer tokens.

Every request passes the gate first (`tui.web.gate`: the server is not stopping, the ``Host`` is
the bound address, no foreign ``Origin``; then its route's guard: whose token, what its kind may
do, which session). Session commands run here on the state dir; every route of protocol.md under
``/api/sessions/{id}/`` is forwarded to the session's worker over its Unix socket, with
``X-Tui-By`` naming a participant so the worker marks their turns and answers. Each endpoint
below is a route's work once its guard passed; `create_app` puts them on the route table.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Mount

from tui import __version__
from tui.errors import (
    CapReached,
    Forbidden,
    InvalidRequest,
    NotFound,
    TuiError,
    UsageError,
    WorkerUnavailable,
    error_from_wire,
)
from tui.protocol import Noted, NoteRequest, Transcript, TurnAccepted, TurnRequest
from tui.protocol.ids import short_id
from tui.protocol.page import TurnPage, turn_view
from tui.protocol.principal import Principal
from tui.protocol.routes import BRIDGE, SESSION_PREFIX, WEB, RouteSpec, forwarded
from tui.protocol.web import (
    Archived,
    AuditReport,
    Created,
    CreateRequest,
    Deleted,
    Found,
    Participants,
    Resolved,
    Restarted,
    Revoked,
    SearchQuery,
    SessionSummary,
    Shared,
    ShareRequest,
    Stopped,
    StopRequest,
    Verified,
    WakeRequest,
    WebInfo,
    WorkerView,
)
from tui.protocol.wording import unshared_transcript
from tui.redact import redact, redact_json, redact_pieces
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
from tui.store.audit import audit_of, verified
from tui.store.export import FORMATS, chain_head
from tui.store.export import export as export_journal
from tui.store.index import find_in
from tui.store.sessions import get_session
from tui.web.auth import describe
from tui.web.bridge import FEATURES, STREAM_CAP, WATCH_EVERY, WebBridge
from tui.web.changes import PAGE_TURNS, ChangesResponse
from tui.web.fanout import FollowResponse
from tui.web.forward import FORWARDED_HEADERS, OpenStream, RawStream
from tui.web.gate import Endpoint, Gate, bridge_of, guard, session_of
from tui.web.page import page_routes, signin, signout
from tui.web.participants import parse_ttl, record_shares, shares_now
from tui.web.signin import link

__all__ = ["FEATURES", "STREAM_CAP", "WebBridge", "create_app"]

log = logging.getLogger("tui.web")


# --- the machine ---------------------------------------------------------------------------
async def web_info(request: Request, principal: Principal, sid: str) -> WebInfo:
    """What this web bridge is and who is asking."""
    bridge = bridge_of(request)
    return WebInfo(
        version=__version__, features=list(FEATURES), principal=describe(principal, bridge.participants)
    )


async def openapi(request: Request, principal: Principal, sid: str) -> dict[str, Any]:
    """This API's OpenAPI document."""
    from tui.web.openapi import document

    return document()


async def sessions(request: Request, principal: Principal, sid: str) -> list[SessionSummary]:
    """Every session (``archived=1`` includes archived ones); a participant sees its one."""
    bridge = bridge_of(request)
    q = request.query_params
    rows = await bridge.sessions.summaries(include_archived=flag(q.get("archived")))
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


async def search_all(request: Request, principal: Principal, sid: str) -> Found:
    """Find text in every session (`tui.store.index`); a participant finds only in its session."""
    bridge = bridge_of(request)
    q = request.query_params
    since = None
    if q.get("since"):
        try:
            since = datetime.fromisoformat(q["since"])
        except ValueError:
            raise InvalidRequest(
                "since: an ISO 8601 time, e.g. 2026-01-31T12:00:00Z", field="since"
            ) from None
        if since.tzinfo is None:
            since = since.replace(tzinfo=UTC)
    query = SearchQuery(
        q=q.get("q", ""),
        where=[w for w in q.get("in", "").split(",") if w] or None,
        folder=q.get("working_directory") or None,
        agent=q.get("agent") or None,
        since=since,
        active=flag(q.get("active")),
        limit=int_param(request, "limit", 20, low=1, high=500),
        before=int_param(request, "before", 0) or None,
    )
    only = None if principal.is_owner else [principal.session_id or ""]
    try:
        found = await asyncio.to_thread(find_in, bridge.state, query, None, only)
    except UsageError as exc:
        raise InvalidRequest(str(exc), field="q") from None
    # What was found leaves the machine: its secrets are taken out (`tui.redact`).
    return Found.model_validate_json(redact_json(found.model_dump_json().encode()))


async def resolve(request: Request, principal: Principal, sid: str) -> Resolved:
    """The full id of an id or unique prefix (``?id=PREFIX``)."""
    bridge = bridge_of(request)
    given = request.query_params.get("id", "")
    if not given:
        raise InvalidRequest("id: a session id or prefix is needed (?id=PREFIX)", field="id")
    full = session_of(bridge, principal, given)
    return Resolved(id=full, short_id=short_id(full))


async def create(request: Request, principal: Principal, sid: str) -> Created:
    """A new session, its worker started; its first turn when ``prompt`` is given."""
    bridge = bridge_of(request)
    body = await parse_body(request, CreateRequest)
    parent = None if body.parent_id is None else session_of(bridge, principal, body.parent_id)
    # A child works in its parent's folder unless it is given one.
    inherited = None if parent is None else (await bridge.sessions.show(parent)).folder
    folder = body.working_directory or inherited or bridge.started_in
    new_id = await bridge.sessions.create(
        working_directory=folder,
        agent=body.agent,
        model=body.model,
        wait=body.wait,
        parent_id=parent,
        budget=body.budget,
    )
    created = Created(id=new_id, short_id=short_id(new_id))
    if body.prompt and not body.idle:
        turn = TurnRequest(prompt=body.prompt, client_id=body.client_id, request_id=body.request_id)
        answer = await bridge.forwarder.send(
            bridge.sessions.socket(new_id),
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
    bridge = bridge_of(request)
    return await bridge.sessions.show(sid)


async def delete(request: Request, principal: Principal, sid: str) -> Deleted:
    """Remove the session (``?force=1`` stops a live worker first)."""
    bridge = bridge_of(request)
    stopped = await bridge.sessions.delete(sid, force=flag(request.query_params.get("force")))
    return Deleted(id=sid, stopped=stopped)


async def stop(request: Request, principal: Principal, sid: str) -> Stopped:
    """Stop the worker; the session stays."""
    bridge = bridge_of(request)
    await parse_body(request, StopRequest)
    return Stopped(id=sid, stopped=await bridge.sessions.stop(sid))


async def restart(request: Request, principal: Principal, sid: str) -> Restarted:
    """Stop the worker and start a new one."""
    bridge = bridge_of(request)
    body = await parse_body(request, WakeRequest)
    return Restarted(id=sid, worker=await bridge.sessions.restart(sid, wait=body.wait))


async def archive(request: Request, principal: Principal, sid: str) -> Archived:
    """Hide the session from lists."""
    bridge = bridge_of(request)
    await read_body(request)
    await bridge.sessions.archive(sid)
    return Archived(id=sid)


async def unarchive(request: Request, principal: Principal, sid: str) -> Archived:
    """List the session again."""
    bridge = bridge_of(request)
    await read_body(request)
    await bridge.sessions.unarchive(sid)
    return Archived(id=sid, archived=False)


async def wake(request: Request, principal: Principal, sid: str) -> WorkerView:
    """Start the worker when none runs; wait for it up to ``wait`` seconds (``starting`` if it
    is not ready by then)."""
    bridge = bridge_of(request)
    body = await parse_body(request, WakeRequest)
    return await bridge.sessions.wake(sid, wait=body.wait)


async def worker(request: Request, principal: Principal, sid: str) -> WorkerView:
    """The session's worker now (never started by this)."""
    bridge = bridge_of(request)
    return bridge.sessions.worker(sid)


async def export(request: Request, principal: Principal, sid: str) -> Response:
    """The session's whole transcript from its journal, streamed (``format``: text, markdown,
    jsonl)."""
    bridge = bridge_of(request)
    fmt = request.query_params.get("format") or "text"
    if fmt not in FORMATS:
        raise InvalidRequest(f"format: {fmt!r} is not one of {', '.join(FORMATS)}", field="format")
    # An export through the web bridge leaves the machine: always redacted (`tui.redact`).
    journal = bridge.state.session(sid).journal
    head = chain_head(journal)
    # A participant's export says nothing of the session's shares (another participant's included).
    made = export_journal(journal, fmt, get_session(bridge.state, sid), shares=principal.is_owner)
    pieces = redact_pieces(made, fmt)
    media = f"{WEB['export'].media}; charset=utf-8"
    return StreamingResponse(pieces, media_type=media, headers={"X-Tui-Chain-Head": head})


async def verify(request: Request, principal: Principal, sid: str) -> Verified:
    """The session's journal checked here, where it is (``?head=SEQ:HASH``: one kept elsewhere)."""
    bridge = bridge_of(request)
    head = request.query_params.get("head") or None
    return await asyncio.to_thread(verified, bridge.state.session(sid).journal, sid, head)


async def audit(request: Request, principal: Principal, sid: str) -> AuditReport:
    """Who did what in the session, read from its journal here, with its chain's head."""
    bridge = bridge_of(request)
    shares = shares_now(bridge.participants, sid)
    return await asyncio.to_thread(audit_of, bridge.state.session(sid).journal, sid, shares)


# --- participants --------------------------------------------------------------------------
def _on_this_machine(bridge: WebBridge) -> WebBridge:
    """`bridge`, when it may share: ``tui relay`` (an SSH remote) refuses.

    Raises:
        Forbidden: this is ``tui relay``.
    """
    if bridge.trusted is not None:
        raise Forbidden(
            "an SSH remote does not share its sessions: shares are made on that machine itself, "
            "through its `tui web` (run `tui share ID --name N --kind viewer` there)"
        )
    return bridge


async def participants(request: Request, principal: Principal, sid: str) -> Participants:
    """Who the session is shared with."""
    bridge = _on_this_machine(bridge_of(request))
    return Participants(participants=[p.view() for p in bridge.participants.of_session(sid)])


async def share(request: Request, principal: Principal, sid: str) -> Shared:
    """Share the session: a new participant, its token shown once."""
    bridge = _on_this_machine(bridge_of(request))
    body = await parse_body(request, ShareRequest)
    ttl = parse_ttl(str(body.ttl)) if body.ttl is not None else None
    person, token = bridge.participants.add(sid, name=body.name, kind=body.kind, ttl=ttl, turns=body.turns)
    _unrecorded(sid, await record_shares(bridge.sessions.access, sid, [person], "made"))
    return Shared(
        participant=person.view(),
        token=token,
        url=bridge.url,
        command=f"tui remote add NAME {bridge.url} --token-file FILE",
        link=link(bridge.url, bridge.signins.new_code(person.id)),
    )


async def revoke(request: Request, principal: Principal, sid: str) -> Revoked:
    """Revoke one participant (``?participant=NAME``) or all of the session's."""
    bridge = _on_this_machine(bridge_of(request))
    who = request.query_params.get("participant") or None
    done = bridge.participants.revoke(sid, who)
    bridge.close_streams_of_gone_tokens()
    _unrecorded(sid, await record_shares(bridge.sessions.access, sid, done, "revoked"))
    return Revoked(revoked=[p.view() for p in done])


def _unrecorded(sid: str, why: str | None) -> None:
    if why is not None:
        log.warning("session %s: a share changed that its journal does not say: %s", short_id(sid), why)


# --- forwarded to the worker ---------------------------------------------------------------
def forward(spec: RouteSpec) -> Endpoint:
    async def forwarded(request: Request, principal: Principal, sid: str) -> Response:
        bridge = bridge_of(request)
        params = {k: str(v) for k, v in request.path_params.items() if k != "id"}
        for name, value in params.items():
            if not _ID.fullmatch(value):
                raise NotFound(f"{name} {value[:40]!r}: no such id in this session", field=name)
        _check_headers(request)
        raw = await read_body(request)
        body = decode(raw, spec.request) if spec.request is not None else None
        taken = None
        if spec.spends_turn and principal.participant_id is not None and _starts_turn(body):
            taken = bridge.participants.take_turn(principal.participant_id)
        try:
            answer = await bridge.forwarder.send(
                bridge.sessions.socket(sid),
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
        if taken is not None and (answer.status_code >= 300 or not _turn_started(spec, answer)):
            bridge.participants.give_back_turn(taken.id)
        return answer

    return forwarded


def _starts_turn(body: object) -> bool:
    """Whether a request of a `spends_turn` route may start a turn: a prompt always (run now or
    queued), a note only with ``now``."""
    return not isinstance(body, NoteRequest) or body.now


def _turn_started(spec: RouteSpec, answer: Response) -> bool:
    """Whether the worker's answer says a turn was started or queued: a note with ``now`` that
    found a turn running is read with the next one (`Noted.turn_id` null) and spends nothing."""
    if spec.answer is not Noted:
        return True
    try:
        return Noted.model_validate_json(bytes(answer.body)).turn_id is not None
    except ValueError:
        return True


def forward_text(spec: RouteSpec) -> Endpoint:
    """A route answering with streamed text (a turn's whole output): passed through as it comes."""

    async def forwarded(request: Request, principal: Principal, sid: str) -> Response:
        bridge = bridge_of(request)
        params = {k: str(v) for k, v in request.path_params.items() if k != "id"}
        for name, value in params.items():
            if not _ID.fullmatch(value):
                raise NotFound(f"{name} {value[:40]!r}: no such id in this session", field=name)
        _check_headers(request)
        upstream = await bridge.forwarder.open_stream(
            bridge.sessions.socket(sid),
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
            # A streamed answer (a turn's output) leaves the machine: its secrets are taken out,
            # a partial last line held until the rest of it comes (`tui.redact`).
            rest = b""
            try:
                async for chunk in upstream.aiter_raw():
                    lines, _, rest = (rest + chunk).rpartition(b"\n")
                    if lines:
                        yield redact(lines.decode("utf-8", "replace") + "\n").encode()
                if rest:
                    yield redact(rest.decode("utf-8", "replace")).encode()
            finally:
                await upstream.aclose()

        media = upstream.headers.get("content-type", spec.media)
        return StreamingResponse(pieces(), media_type=media)

    return forwarded


async def _presence(
    bridge: WebBridge,
    principal: Principal,
    socket: str,
    handle: OpenStream,
    query: bytes,
    headers: Mapping[str, str],
) -> RawStream | Response:
    """A follower's presence stream from its worker, or the worker's refusal to pass on (the
    handle is let go of when there is no stream)."""
    try:
        presence = await bridge.forwarder.open_stream(
            socket,
            BRIDGE["events"].path,
            query=query,
            headers=headers,
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
    return presence


async def events(request: Request, principal: Principal, sid: str) -> Response:
    """The session's event stream, passed through from its worker."""
    bridge = bridge_of(request)
    if principal.participant_id is not None:
        mine = [h for h in bridge.streams if h.token_digest == principal.token_digest]
        if len(mine) >= STREAM_CAP:
            raise CapReached(f"this token already has {STREAM_CAP} open streams; close one first")
    _check_headers(request)
    last_id = seq_header(request)
    socket = bridge.sessions.socket(sid)
    handle = OpenStream(principal.token_digest, sid, principal.participant_id)
    bridge.streams.add(handle)
    # Who follows is counted by the worker through a presence stream of each follower (it
    # checks the cursor too); the events come on one stream per session, shared.
    presence = await _presence(bridge, principal, socket, handle, request.url.query.encode(), request.headers)
    if isinstance(presence, Response):
        return presence
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


async def changes(request: Request, principal: Principal, sid: str) -> Response:
    """The session's changes as the page draws them (`tui.web.changes`): from the cursor the page
    sends, with no gap and no repeat, or from a snapshot."""
    bridge = bridge_of(request)
    if principal.participant_id is not None:
        mine = [h for h in bridge.streams if h.token_digest == principal.token_digest]
        if len(mine) >= STREAM_CAP:
            raise CapReached(f"this token already has {STREAM_CAP} open streams; close one first")
    cursor = request.headers.get("last-event-id") or request.query_params.get("cursor") or ""
    socket = bridge.sessions.socket(sid)
    handle = OpenStream(principal.token_digest, sid, principal.participant_id)
    bridge.streams.add(handle)
    # The page is counted as attached by a presence stream of its own, as a follower of /events is.
    client_id = request.query_params.get("client_id")
    query = urlencode({"client_id": client_id}).encode() if client_id else b""
    presence = await _presence(bridge, principal, socket, handle, query, {})
    if isinstance(presence, Response):
        return presence
    try:
        followed = await bridge.pages.join(sid, everything=principal.is_owner)
        if followed.ended and not followed.made:
            followed.leave()
            raise WorkerUnavailable("the session's worker could not be followed; POST …/wake starts it")
    except BaseException:
        bridge.streams.discard(handle)
        await presence.aclose()
        raise
    return ChangesResponse(
        followed, cursor, presence, handle, keepalive=bridge.keepalive, on_end=bridge.streams.discard
    )


async def turns(request: Request, principal: Principal, sid: str) -> TurnPage:
    """Older turns as the page draws them (``?before=TURN``)."""
    bridge = bridge_of(request)
    query = BRIDGE["transcript"].params(
        limit=int_param(request, "limit", PAGE_TURNS, low=1, high=200),
        before=request.query_params.get("before") or None,
    )
    answer = await bridge.forwarder.send(
        bridge.sessions.socket(sid), "GET", BRIDGE["transcript"].path, query=urlencode(query).encode()
    )
    if answer.status_code != 200:
        raise error_from_wire(json.loads(bytes(answer.body) or b"null"), answer.status_code)
    transcript = Transcript.model_validate_json(bytes(answer.body))
    if not principal.is_owner:
        transcript = unshared_transcript(transcript)
    return TurnPage(turns=[turn_view(r) for r in transcript.turns], has_more=transcript.has_more)


OWN: dict[str, Endpoint] = {
    "web_info": web_info,
    "openapi": openapi,
    "sessions": sessions,
    "create": create,
    "resolve": resolve,
    "search_all": search_all,
    "show": show,
    "delete": delete,
    "stop": stop,
    "restart": restart,
    "archive": archive,
    "unarchive": unarchive,
    "wake": wake,
    "worker": worker,
    "changes": changes,
    "turns": turns,
    "export": export,
    "verify": verify,
    "audit": audit,
    "participants": participants,
    "share": share,
    "revoke": revoke,
}
"""The endpoints of the routes of `WEB`, served here (after their guard)."""

OPEN: dict[str, Handler] = {"signin": signin, "signout": signout}
"""The routes of `WEB` served without a guard."""


def create_app(bridge: WebBridge) -> Starlette:
    """The web bridge's ASGI app for `bridge`: the routes of `tui.protocol.routes.WEB`, and every
    route of `BRIDGE` that a remote may use forwarded under ``/api/sessions/{id}``."""
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
    endpoints = {**OWN, **passed}
    # Signing in and out need no token: the code, or the cookie, is what they are about.
    handlers_outside = {
        spec.name: guard(spec, endpoints[spec.name]) for spec in outside if spec.name not in OPEN
    }
    served = [
        *page_routes(),
        *routes(outside, {**handlers_outside, **OPEN}),
        Mount(
            SESSION_PREFIX,
            routes=routes(
                mounted,
                {spec.name: guard(spec, endpoints[spec.name]) for spec in mounted},
                prefix=SESSION_PREFIX,
            ),
        ),
    ]

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
            await bridge.pages.close()
            await bridge.fanouts.close()
            await bridge.forwarder.close()

    app = Starlette(
        routes=served,
        exception_handlers={**handlers("see GET /api/openapi.json"), Exception: _on_crash},
        lifespan=lifespan,
    )
    # `/api/sessions/` is no route: a 404 saying so, not a redirect.
    app.router.redirect_slashes = False
    app.add_middleware(Gate, bridge=bridge)
    app.state.bridge = bridge
    return app


async def _on_crash(request: Request, exc: Exception) -> Response:
    log.exception("%s %s failed", request.method, request.url.path)
    return refusal(TuiError(f"the web bridge failed on {request.method} {request.url.path}: {exc}"))


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
