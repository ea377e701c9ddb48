"""The page for browsers: ``GET /`` and its static files, and signing a browser in and out.

The page is static files of the package (``tui/web/static/``: no build step, nothing fetched
from elsewhere), served with a Content-Security-Policy that lets only its own scripts run. It
signs in by posting a sign-in link's one-time code to ``POST /api/signin`` (`tui.web.signin`),
which answers with an ``HttpOnly``, ``SameSite=Strict`` cookie (``Secure`` under TLS) named for
this server's port, and a page secret in the body that the page sends back as its header.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from tui.errors import Forbidden, RateLimited, TokenRevoked, Unauthorized
from tui.protocol.principal import Principal, owner_name
from tui.protocol.web import SignedIn, SignedOut, SignInRequest
from tui.serve import parse_body, refusal
from tui.web.auth import principal_of
from tui.web.gate import bridge_of, page_grant
from tui.web.signin import OWNER, OWNER_COOKIE_TTL, PAGE_HEADER

__all__ = ["PAGE_PATHS", "STATIC", "page_routes", "signin", "signout"]

STATIC = Path(__file__).parent / "static"
"""The page's files."""

PAGE_PATHS = {("get", "/")}
"""The paths the page adds to the API's routes (its files are under ``/static``)."""

POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""The page's Content-Security-Policy: its own scripts and styles only; no inline script, no
other site; so even a tag that slipped through could not run anything."""

_HEADERS = {
    "Content-Security-Policy": POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


async def index(request: Request) -> Response:
    """The page."""
    return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8", headers=_HEADERS)


class _Static(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(_HEADERS)
        return response


def page_routes() -> list[BaseRoute]:
    """``GET /`` and ``/static/…``."""
    return [Route("/", index, methods=["GET"]), Mount("/static", _Static(directory=STATIC))]


async def signin(request: Request) -> Response:
    """Exchange a one-time code for a sign-in of the same principal: a session cookie, and the page
    secret in the body. Wrong codes are limited per client address and in all (429)."""
    if request.headers.get(PAGE_HEADER) != "1":
        raise Forbidden(f"signing in needs the header {PAGE_HEADER}: 1 (the page sends it)")
    body = await parse_body(request, SignInRequest)
    bridge = bridge_of(request)
    address = request.client.host if request.client is not None else "?"
    try:
        bridge.throttle.check(address)
    except RateLimited as exc:
        response = refusal(exc)
        response.headers["Retry-After"] = str(exc.fields["retry_after"])
        return response
    try:
        grant = bridge.signins.redeem(body.code.strip())
    except Unauthorized:
        bridge.throttle.charge(address)
        raise
    expires: datetime | None
    if grant.who == OWNER:
        if grant.owner_digest != bridge.owner_digest:
            raise TokenRevoked("the owner token changed since this link was made; ask for a new one")
        principal = Principal(kind="owner", name=owner_name())
        expires = datetime.now(UTC) + timedelta(seconds=OWNER_COOKIE_TTL)
    else:
        person = bridge.participants.get(grant.who)
        if person is None:
            raise TokenRevoked("the share of this link no longer exists; ask for a new one")
        principal = principal_of(person)
        expires = person.expires_at
    held = request.cookies.get(bridge.cookie)
    value, secret = bridge.signins.sign_in(grant, expires, held)
    answer = SignedIn(principal=principal, secret=secret)
    signed = Response(answer.model_dump_json(), media_type="application/json")
    age = int((expires - datetime.now(UTC)).total_seconds()) if expires is not None else OWNER_COOKIE_TTL
    if value == held:  # the cookie carries other tabs' sign-ins too: it outlives none of them
        age = max(age, OWNER_COOKIE_TTL)
    signed.set_cookie(
        bridge.cookie,
        value,
        max_age=max(1, age),
        path="/",
        httponly=True,
        samesite="strict",
        secure=bridge.tls,
    )
    return signed


async def signout(request: Request) -> Response:
    """End the page's sign-in: forgotten here, its open streams ended, and the browser told to drop
    the cookie when it carries no other tab's sign-in.

    Raises:
        Unauthorized: no cookie, or not with its page's secret.
    """
    bridge = bridge_of(request)
    value = request.cookies.get(bridge.cookie) or ""
    grant = page_grant(bridge, request, value) if value else None
    if grant is None:
        raise Unauthorized("this page is signed out already; open a new sign-in link to sign in")
    _, others = bridge.signins.drop(value, request.headers.get(PAGE_HEADER, ""))
    bridge.close_streams_of_signin(grant.page)
    response = Response(SignedOut().model_dump_json(), media_type="application/json")
    if not others:
        response.delete_cookie(bridge.cookie, path="/", httponly=True, samesite="strict", secure=bridge.tls)
    return response
