"""A real `tui web` under uvicorn on 127.0.0.1 port 0, started as `python -m tui web`."""

from __future__ import annotations

import asyncio
import os
import selectors
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_model_server import FakeModelServer
from helpers import TIMEOUT, Sse, read_sse, stop_workers

from tui.store import StatePaths, create_session
from tui.web.participants import ParticipantStore, parse_ttl
from tui.web.paths import WebPaths


@dataclass
class Web:
    """One running `tui web` and what a test needs to talk to it."""

    url: str
    token: str
    state: Path
    proc: subprocess.Popen[str]
    link: str = ""
    """The owner's sign-in link `tui web` printed at start."""
    clients: list[httpx.Client] = field(default_factory=list)

    @property
    def host(self) -> str:
        return self.url.removeprefix("http://")

    def client(self, token: str | None = "owner", **kw: Any) -> httpx.Client:
        """An httpx client of this web bridge with `token` (the owner's by default, None: none)."""
        headers = dict(kw.pop("headers", {}))
        if token == "owner":
            token = self.token
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        c = httpx.Client(base_url=self.url, headers=headers, timeout=kw.pop("timeout", 30.0), **kw)
        self.clients.append(c)
        return c

    def session(self, *, folder: str | None = None) -> str:
        """A new session of this machine (no worker yet)."""
        return create_session(StatePaths(self.state), working_directory=folder or str(self.state)).id

    def share(self, session_id: str, kind: str, **kw: Any) -> str:
        """A participant's token for `session_id`."""
        ttl = kw.pop("ttl", None)
        store = ParticipantStore(WebPaths.of(self.state))
        _, token = store.add(
            session_id,
            name=kw.pop("name", f"{kind}-{len(store.load())}"),
            kind=kind,
            ttl=parse_ttl(ttl) if ttl else None,
            **kw,
        )
        return token

    def stop(self) -> int:
        for c in self.clients:
            c.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(10)
        finally:
            for pipe in (self.proc.stdout, self.proc.stderr):
                if pipe is not None:
                    pipe.close()
            stop_workers(self.state)


def _readline(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    try:
        if not sel.select(timeout):
            return ""
        return proc.stdout.readline()
    finally:
        sel.close()


def start_web(state: Path, *args: str) -> Web:
    """Start `tui web --port 0` on `state`; returns once it serves."""
    token_file = state / "owner.token"
    env = {**os.environ, "TUI_STATE_DIR": str(state)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui", "web", "--port", "0", "--token-file", str(token_file), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(state),
    )
    line = _readline(proc, 20.0)
    if "serving" not in line:
        proc.kill()
        _, err = proc.communicate(5)
        raise AssertionError(f"tui web did not start: {line!r} {err}")
    url = line.split()[-1]
    assert proc.stdout is not None
    link = proc.stdout.readline().split()[-1]  # printed with the line above: read already, or at once
    return Web(url=url, token=token_file.read_text().strip(), state=state, proc=proc, link=link)


@pytest.fixture
def web(state_dir: Path) -> Iterator[Web]:
    """A `tui web` of this test's own state dir."""
    w = start_web(state_dir)
    yield w
    w.stop()


@pytest.fixture(scope="module")
def shared_web() -> Iterator[Web]:
    """One `tui web` for a module's read-only checks."""
    with tempfile.TemporaryDirectory(prefix="tui-w", dir="/tmp") as d:
        w = start_web(Path(d))
        yield w
        w.stop()


async def events_until(
    client: httpx.AsyncClient, path: str, stop: Callable[[Sse], bool], *, cursor: int = 0
) -> list[Sse]:
    """The events of `path` (an ``/events`` route) from `cursor` up to the first `stop` holds for."""
    seen: list[Sse] = []
    async with asyncio.timeout(TIMEOUT), client.stream("GET", path, params={"cursor": cursor}) as r:
        assert r.status_code == 200, await r.aread()
        async for event in read_sse(r):
            seen.append(event)
            if stop(event):
                return seen
    raise AssertionError(f"the stream ended before the expected event: {[e.type for e in seen]}")


def wake(web: Web, session_id: str) -> dict[str, Any]:
    """Start the session's worker through the web bridge."""
    reply = web.client().post(f"/api/sessions/{session_id}/wake", json={"wait": TIMEOUT})
    assert reply.status_code == 200, reply.text
    worker: dict[str, Any] = reply.json()
    return worker


def until_event(c: httpx.Client, s: str, cursor: int, kind: str) -> None:
    """Follow the session at `s` (``/api/sessions/ID``) from `cursor` until an event of `kind`."""
    with c.stream("GET", f"{s}/events", params={"cursor": cursor}, timeout=TIMEOUT) as r:
        for line in r.iter_lines():
            if line == f"event: {kind}":
                return
    raise AssertionError(f"the stream ended before {kind}")


# --- the page in a browser (headless chromium through Playwright) -----------------------------
CHROMIUM = "/usr/bin/chromium"
PHONE = {"width": 375, "height": 667}
DESKTOP = {"width": 1280, "height": 800}
WAIT = TIMEOUT * 1000  # Playwright's timeouts are in ms: they only guard against a hang


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's chromium, headless (a module using it skips when it or Playwright is missing)."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is missing: pip install -e .[test]"
    )
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield b
        b.close()


@pytest.fixture
def page_of(browser: Any) -> Iterator[Callable[..., Any]]:
    """Pages of a fresh browser context (no cookies) at phone size by default; page errors fail."""
    contexts: list[Any] = []
    errors: list[str] = []

    def make(viewport: dict[str, int] = PHONE) -> Any:
        context = browser.new_context(viewport=viewport)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: (errors.append("dialog: " + d.message), d.dismiss()))
        page.set_default_timeout(WAIT)
        return page

    yield make
    for c in contexts:
        c.close()
    assert not errors, errors


@pytest.fixture
def model_server() -> Iterator[FakeModelServer]:
    """The loopback model server, as config.toml's profile ``local``."""
    with FakeModelServer() as running:
        config = Path(os.environ["TUI_CONFIG_DIR"]) / "config.toml"
        profile = f'provider = "openai"\nmodel = "fake-1"\nbase_url = "{running.url}"\n'
        config.write_text("[models.local]\n" + profile)
        yield running
