"""The page's cookie alone is worth nothing: another port of 127.0.0.1 gets it (cookies ignore the
port) but cannot act with it; two `tui web` on one host keep their own sign-ins. A real `tui web`,
headless Chromium through Playwright, as a person would use them."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import TIMEOUT

from .conftest import Web, start_web

CHROMIUM = "/usr/bin/chromium"
WAIT = TIMEOUT * 1000

if not Path(CHROMIUM).exists():
    pytest.skip("chromium is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is missing: pip install -e .[test]")


class _Recorder(BaseHTTPRequestHandler):
    """Another local server the browser opens (a dev server, a context source's command): it keeps
    the Cookie header it was sent."""

    seen: list[str]

    def do_GET(self) -> None:
        self.seen.append(self.headers.get("Cookie") or "")
        body = b"<!doctype html><title>elsewhere</title><p>another local server</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def other_port() -> Iterator[tuple[str, list[str]]]:
    """A tiny server on 127.0.0.1, port 0: its url and the Cookie headers it received."""
    seen: list[str] = []
    handler = type("Recorder", (_Recorder,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield b
        b.close()


@pytest.fixture
def browser(chromium: Any) -> Iterator[Any]:
    """One browser profile (its cookie jar shared by its tabs); a page error fails the test."""
    context = chromium.new_context()
    errors: list[str] = []
    context.on("weberror", lambda e: errors.append(str(e.error)))
    yield context
    context.close()
    assert not errors, errors


def _page(context: Any) -> Any:
    page = context.new_page()
    page.set_default_timeout(WAIT)
    return page


def test_a_server_on_another_local_port_gets_the_cookie_but_cannot_act_with_it(
    web: Web, browser: Any, other_port: tuple[str, list[str]]
) -> None:
    page = _page(browser)
    page.goto(web.link)
    page.wait_for_selector("#newsession")
    elsewhere, seen = other_port
    foreign = _page(browser)  # the user follows a link to a local dev server, in another tab
    foreign.goto(elsewhere + "/")
    foreign.wait_for_selector("text=another local server")
    assert seen and "tui_session" in seen[-1], seen  # cookies ignore the port: it was sent
    assert foreign.evaluate("sessionStorage.length") == 0  # the page's secret was not
    replay = httpx.Client(base_url=web.url, timeout=TIMEOUT, headers={"Cookie": seen[-1], "X-Tui-Page": "1"})
    web.clients.append(replay)
    info = replay.get("/api/info")
    assert info.status_code == 401, info.text
    made = replay.post("/api/sessions", json={"agent": "python"})
    assert made.status_code == 401, made.text
    assert web.client().get("/api/sessions").json() == []  # nothing was made
    # the signed-in page keeps working, across a reload of its tab too
    page.fill("#newsession input[name=agent]", "python")
    page.click("#newsession button[type=submit]")
    page.wait_for_selector("#prompt")
    page.reload()
    page.wait_for_selector("#prompt")
    assert len(web.client().get("/api/sessions").json()) == 1


def test_two_tui_webs_on_one_host_keep_their_own_sign_ins(state_dir: Path, browser: Any) -> None:
    with tempfile.TemporaryDirectory(prefix="tui-", dir="/tmp") as other:
        first, second = start_web(state_dir), start_web(Path(other))
        try:
            a, b = _page(browser), _page(browser)
            a.goto(first.link)
            a.wait_for_selector("#newsession")
            b.goto(second.link)
            b.wait_for_selector("#newsession")
            for page in (a, b):  # signed in still, each with its own server's cookie and secret
                page.reload()
                page.wait_for_selector("#newsession")
                assert page.inner_text("#me").endswith("owner")
            names = {c["name"] for c in browser.cookies()}
            assert {f"tui_session_{w.url.rsplit(':', 1)[1]}" for w in (first, second)} <= names
        finally:
            first.stop()
            second.stop()
