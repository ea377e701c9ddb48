"""The web bridge's gate: what every request passes before its route runs.

First the middleware (`Gate`): the server is not stopping, the ``Host`` is the bound address, no
foreign ``Origin``. Then each route's guard (`guard`): whose token, which session, and what its
kind may do there (the route's `Permission` in `tui.protocol.routes`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from tui.errors import Forbidden, Misdirected, NotFound, ServerStopping, TokenRevoked, TuiError, Unauthorized
from tui.protocol.ids import short_id
from tui.protocol.principal import Principal, owner_name
from tui.protocol.routes import RouteSpec
from tui.serve import Handler, refusal
from tui.web.auth import authenticate, principal_of
from tui.web.bridge import WebBridge
from tui.web.forward import SIGNED_IN
from tui.web.signin import OWNER, PAGE_HEADER, Grant

__all__ = [
    "Endpoint",
    "Gate",
    "bridge_of",
    "cookie_principal",
    "guard",
    "principal_of_request",
    "session_of",
]

Endpoint = Callable[[Request, Principal, str], Awaitable[Any]]
"""A route's work once its guard passed: the request, who asks, and the session's full id."""


class Gate:
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
            if origin is not None and origin.rstrip("/").lower() != f"{self.bridge.scheme}://{host.lower()}":
                error = Forbidden(
                    f"requests from pages of {origin} are not answered here; use `tui --remote NAME`"
                )
        if error is not None:
            await refusal(error)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def bridge_of(request: Request) -> WebBridge:
    """The `WebBridge` the app serving `request` was made for."""
    bridge: WebBridge = request.app.state.bridge
    return bridge


def principal_of_request(request: Request) -> Principal:
    """Who makes `request`: the trusted principal (``tui relay``), else its bearer token, else
    the page's sign-in (`tui.web.signin`): its cookie and its secret in the page's header.

    Raises:
        Refused: no token, or an unknown, revoked or expired one; a cookie without its page's
            secret, or one signed out, expired or of a revoked share.
    """
    bridge = bridge_of(request)
    SIGNED_IN.set("")
    if bridge.trusted is not None:
        return bridge.trusted
    cookie = request.cookies.get(bridge.cookie)
    if request.headers.get("authorization") is None and cookie:
        return cookie_principal(bridge, request, cookie)
    return authenticate(request.headers.get("authorization"), bridge.owner_digest, bridge.participants)


def page_grant(bridge: WebBridge, request: Request, cookie: str) -> Grant:
    """The sign-in of a request made with the cookie: the cookie and the page's secret must match.

    Raises:
        Unauthorized: no secret, a wrong one, or a sign-in that ended.
    """
    secret = request.headers.get(PAGE_HEADER, "")
    grant = bridge.signins.grant(cookie, secret) if secret else None
    if grant is None:
        raise Unauthorized(
            "this page is not signed in (the cookie counts only with its page's secret); "
            "open a new sign-in link (`tui web --link` on the machine, or `tui share`)"
        )
    return grant


def cookie_principal(bridge: WebBridge, request: Request, cookie: str) -> Principal:
    """The principal a sign-in was given for, as it stands now; the request's streams remember the
    sign-in (`SIGNED_IN`: its page digest) so they end when it does.

    Raises:
        Refused: see `principal_of_request`.
    """
    grant = page_grant(bridge, request, cookie)
    SIGNED_IN.set(grant.page)
    if grant.who == OWNER:
        if grant.owner_digest != bridge.owner_digest:
            raise TokenRevoked("the owner token changed since this page signed in; open a new sign-in link")
        return Principal(kind="owner", name=owner_name(), token_digest=grant.digest)
    person = bridge.participants.get(grant.who)
    if person is None:
        raise TokenRevoked("the share this page signed in with no longer exists; ask for a new one")
    return principal_of(person)


def guard(spec: RouteSpec, fn: Endpoint) -> Handler:
    """Authenticate, resolve the session, and check the route's permission before `fn`."""
    assert spec.permission is not None
    permission = spec.permission
    per_session = "{id}" in spec.path

    async def endpoint(request: Request) -> Any:
        bridge = bridge_of(request)
        principal = principal_of_request(request)
        sid = session_of(bridge, principal, str(request.path_params["id"])) if per_session else ""
        principal.check(permission, sid or None)
        if principal.participant_id is not None:
            bridge.participants.seen(principal.participant_id)
        return await fn(request, principal, sid)

    return endpoint


def session_of(bridge: WebBridge, principal: Principal, given: str) -> str:
    """The full id of the session `given` names, for `principal` (a participant: its own only).

    Raises:
        Refused: no such session, or another session than a participant's.
    """
    if principal.is_owner:
        return bridge.sessions.resolve(given)
    mine = principal.session_id or ""
    if not given or not mine.startswith(given.lower()):
        principal.check("read", "")  # raises not_permitted: another session
    if not bridge.sessions.exists(mine):
        raise NotFound(f"session {short_id(mine)} no longer exists on this machine")
    return mine
