"""Signing a browser in: a sign-in link's one-time code for a cookie and a page secret bound to its
principal, on a real `tui web`; the cookie counts only with the page's secret in its header, from
the page's own origin."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import httpx
from helpers import TIMEOUT

from tui.web.paths import WebPaths
from tui.web.signin import SignIns

from .conftest import Web, wake

PAGE = {"X-Tui-Page": "1"}


def _code(link: str) -> str:
    assert "/#code=" in link, link
    return link.split("#code=", 1)[1]


def _browser(web: Web) -> httpx.Client:
    return web.client(token=None)


def _sign_in(web: Web, link: str, b: httpx.Client | None = None) -> httpx.Client:
    """A browser signed in with `link`: its cookie jar, and the page's secret as its header."""
    b = b or _browser(web)
    reply = b.post("/api/signin", json={"code": _code(link)}, headers=PAGE)
    assert reply.status_code == 200, reply.text
    b.headers["X-Tui-Page"] = reply.json()["secret"]
    return b


def _cookie(web: Web) -> str:
    return "tui_session_" + web.url.rsplit(":", 1)[1]


def test_the_owners_link_signs_in_once_for_an_httponly_strict_cookie(web: Web) -> None:
    assert web.link.startswith(web.url + "/#code=")
    b = _browser(web)
    reply = b.post("/api/signin", json={"code": _code(web.link)}, headers=PAGE)
    assert reply.status_code == 200, reply.text
    assert reply.json()["principal"]["kind"] == "owner"
    cookie = reply.headers["set-cookie"]
    assert cookie.startswith(_cookie(web) + "=")  # named for this server's port
    flags = {part.strip().lower() for part in cookie.split(";")}
    assert {"httponly", "samesite=strict", "path=/"} <= flags
    assert "secure" not in flags  # plain http: a Secure cookie would never be sent back
    secret = reply.json()["secret"]
    assert len(secret) >= 40 and secret not in cookie
    assert b.get("/api/info", headers={"X-Tui-Page": secret}).json()["principal"]["kind"] == "owner"
    # the code works once
    again = _browser(web).post("/api/signin", json={"code": _code(web.link)}, headers=PAGE)
    assert again.status_code == 401 and "used already or has expired" in again.json()["detail"]


def test_a_cookie_counts_only_with_its_pages_secret_and_from_its_own_origin(web: Web) -> None:
    b = _sign_in(web, web.link)
    secret = b.headers.pop("X-Tui-Page")
    for header in ({}, PAGE, {"X-Tui-Page": secret[:-1] + ("A" if secret[-1] != "A" else "B")}):
        refused = b.get("/api/info", headers=header)
        assert refused.status_code == 401 and "secret" in refused.json()["detail"], (header, refused.text)
        assert b.post("/api/sessions", json={}, headers=header).status_code == 401
    foreign = b.get("/api/info", headers={"X-Tui-Page": secret, "Origin": "http://evil.example"})
    assert foreign.status_code == 403
    ours = b.get("/api/info", headers={"X-Tui-Page": secret, "Origin": web.url})
    assert ours.status_code == 200
    # signing in needs the header too (a form of another site cannot send it)
    assert _browser(web).post("/api/signin", json={"code": "x"}).status_code == 403


def test_sign_out_ends_the_cookie_and_bearer_tokens_keep_working(web: Web) -> None:
    b = _sign_in(web, web.link)
    kept, secret = dict(b.cookies), b.headers["X-Tui-Page"]
    assert b.post("/api/signout").status_code == 200
    assert _cookie(web) not in b.cookies
    replay = _browser(web)
    replay.cookies.update(kept)
    refused = replay.get("/api/info", headers={"X-Tui-Page": secret})
    assert refused.status_code == 401 and "not signed in" in refused.json()["detail"]
    assert web.client().get("/api/info").json()["principal"]["kind"] == "owner"


def test_two_tabs_of_one_browser_keep_their_own_sign_ins_and_sign_out_alone(web: Web) -> None:
    sid = web.session()
    first = _sign_in(web, web.link)
    second = _browser(web)
    second.cookies.update(first.cookies)  # one browser: one cookie jar, a secret per tab
    _sign_in(web, _share(web, sid, "--name", "vi", "--kind", "viewer"), second)
    assert dict(second.cookies) == dict(first.cookies)  # the cookie was kept, not replaced
    assert first.get("/api/info").json()["principal"]["kind"] == "owner"
    assert second.get("/api/info").json()["principal"]["kind"] == "viewer"
    signed_out = second.post("/api/signout")
    assert signed_out.status_code == 200 and "set-cookie" not in signed_out.headers  # the owner's tab uses it
    assert second.get("/api/info").status_code == 401
    assert first.get("/api/info").json()["principal"]["kind"] == "owner"


def test_an_expired_code_is_refused(web: Web) -> None:
    code = SignIns(WebPaths.of(web.state)).new_code("owner", owner_digest="x", ttl=0)
    reply = _browser(web).post("/api/signin", json={"code": code}, headers=PAGE)
    assert reply.status_code == 401


def _share(web: Web, sid: str, *args: str) -> str:
    env = {**os.environ, "TUI_STATE_DIR": str(web.state)}
    command = [sys.executable, "-m", "tui", "share", sid, *args]
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if "in a browser" in ln)
    return line.split()[-1]


def test_tui_shares_link_signs_in_as_that_participant_with_its_limits(web: Web) -> None:
    sid = web.session()
    wake(web, sid)
    link = _share(web, sid, "--name", "vi", "--kind", "viewer", "--ttl", "1h")
    assert link.startswith(web.url + "/#code=")
    b = _sign_in(web, link)
    me = b.get("/api/info").json()["principal"]
    assert me["kind"] == "viewer" and me["name"] == "vi" and me["session_id"] == sid and me["expires_at"]
    assert b.get(f"/api/sessions/{sid}/transcript").status_code == 200
    turn = b.post(f"/api/sessions/{sid}/turn", json={"prompt": "1"})
    assert turn.status_code == 403 and turn.json()["error"] == "not_permitted"
    other = web.session()
    assert b.get(f"/api/sessions/{other}").status_code == 403


def test_revoking_the_share_ends_the_cookie_and_its_open_stream(web: Web) -> None:
    sid = web.session()
    wake(web, sid)
    link = _share(web, sid, "--name", "co", "--kind", "collaborator", "--turns", "1")
    b = _sign_in(web, link)
    me = b.get("/api/info").json()["principal"]
    assert me["kind"] == "collaborator" and me["turns_left"] == 1
    with b.stream("GET", f"/api/sessions/{sid}/events") as stream:
        assert stream.status_code == 200
        revoked = subprocess.run(
            [sys.executable, "-m", "tui", "share", "revoke", sid, "--participant", "co"],
            env={**os.environ, "TUI_STATE_DIR": str(web.state)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert revoked.returncode == 0, revoked.stderr
        for _ in stream.iter_raw():  # the stream ends by itself once the share is revoked
            pass
    after = b.get("/api/info")
    assert after.status_code == 401 and after.json()["error"] == "token_revoked"


def test_tui_web_link_prints_a_fresh_owner_link(web: Web) -> None:
    env = {**os.environ, "TUI_STATE_DIR": str(web.state)}
    out = subprocess.run(
        [sys.executable, "-m", "tui", "web", "--link"], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    link = out.stdout.split()[-1]
    assert link != web.link
    b = _sign_in(web, link)
    assert b.get("/api/info").json()["principal"]["kind"] == "owner"


def test_tui_web_link_without_a_running_tui_web_says_what_to_do(state_dir: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tui", "web", "--link"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode != 0
    assert "tui web is not running here" in out.stderr and "Traceback" not in out.stderr


def test_wrong_codes_write_nothing_and_are_rate_limited_with_a_retry_after(web: Web) -> None:
    signins = SignIns(WebPaths.of(web.state)).file
    before = (signins.read_bytes(), signins.stat().st_mtime_ns)
    b = _browser(web)
    wrong = [b.post("/api/signin", json={"code": f"wrong-{n}"}, headers=PAGE) for n in range(10)]
    assert [r.status_code for r in wrong] == [401] * 10
    assert (signins.read_bytes(), signins.stat().st_mtime_ns) == before  # never rewritten
    limited = b.post("/api/signin", json={"code": _code(web.link)}, headers=PAGE)
    assert limited.status_code == 429, limited.text
    refusal = limited.json()
    assert refusal["error"] == "rate_limited" and "too many wrong sign-in codes" in refusal["detail"]
    assert int(limited.headers["retry-after"]) >= 1
    assert web.client().get("/api/info").status_code == 200  # tokens are not limited


def test_signing_out_ends_that_pages_open_streams(web: Web) -> None:
    sid = web.session()
    wake(web, sid)
    b = _sign_in(web, web.link)
    ended = [threading.Event(), threading.Event()]
    with contextlib.ExitStack() as open_streams:
        for n, route in enumerate(("events", "changes")):  # the page follows …/changes
            stream = open_streams.enter_context(b.stream("GET", f"/api/sessions/{sid}/{route}"))
            assert stream.status_code == 200, route

            def drain(stream: httpx.Response = stream, done: threading.Event = ended[n]) -> None:
                with contextlib.suppress(httpx.HTTPError):
                    for _ in stream.iter_raw():
                        pass
                done.set()

            threading.Thread(target=drain, daemon=True).start()
        tab = _browser(web)  # the same page: its cookie and its secret
        tab.cookies.update(b.cookies)
        tab.headers["X-Tui-Page"] = b.headers["X-Tui-Page"]
        assert tab.post("/api/signout").status_code == 200
        for route, done in zip(("events", "changes"), ended, strict=True):
            assert done.wait(TIMEOUT), f"the {route} stream was still open after sign-out"
