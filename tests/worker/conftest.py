"""Real workers on real Unix sockets, and followers of their event streams."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import TIMEOUT, Sse, read_sse, stop_workers, wait_until

from tui.link.launch import start_worker
from tui.store import StatePaths, WorkerSidecar, create_session, is_live


@dataclass
class Follower:
    """Collects one stream's events in a task."""

    events: list[Sse] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    async def until(self, predicate: Callable[[Sse], bool], within: float = TIMEOUT) -> Sse:
        """The first event (seen so far or later) for which `predicate` holds."""
        async with asyncio.timeout(within):
            start = 0
            while True:
                for event in self.events[start:]:
                    if predicate(event):
                        return event
                start = len(self.events)
                self.changed.clear()
                if self.task is not None and self.task.done():
                    self.task.result()
                    raise AssertionError("the stream ended before the expected event")
                await self.changed.wait()

    def of(self, kind: str) -> list[Sse]:
        return [e for e in self.events if e.type == kind]


@dataclass
class Worker:
    """A session with a live worker, and ways to reach it."""

    state: StatePaths
    session_id: str
    sidecar: WorkerSidecar
    clients: list[httpx.AsyncClient] = field(default_factory=list)
    followers: list[Follower] = field(default_factory=list)

    @property
    def paths(self) -> Any:
        return self.state.session(self.session_id)

    def client(self) -> httpx.AsyncClient:
        c = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(uds=self.sidecar.socket),
            base_url="http://worker",
            timeout=httpx.Timeout(TIMEOUT),
        )
        self.clients.append(c)
        return c

    def follow(
        self, cursor: int = 0, client_id: str | None = None, headers: dict[str, str] | None = None
    ) -> Follower:
        """A task reading ``/events`` from `cursor` into a `Follower` (sending `headers`)."""
        follower = Follower()
        client = self.client()

        async def run() -> None:
            params: dict[str, Any] = {"cursor": cursor}
            if client_id:
                params["client_id"] = client_id
            async with client.stream(
                "GET", "/events", params=params, headers=headers, timeout=None
            ) as response:
                assert response.status_code == 200, await response.aread()
                async for event in read_sse(response):
                    follower.events.append(event)
                    follower.changed.set()
            follower.changed.set()

        follower.task = asyncio.create_task(run())
        self.followers.append(follower)
        return follower

    def restart(self) -> WorkerSidecar:
        self.sidecar = start_worker(self.state, self.session_id, timeout=TIMEOUT)
        return self.sidecar

    def kill(self) -> None:
        """SIGKILL the worker and wait until its lock is free."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.sidecar.pid, signal.SIGKILL)
        wait_until(lambda: not is_live(self.paths.lock), "the killed worker's lock to be free")

    async def turn(self, prompt: str, **fields: Any) -> dict[str, Any]:
        """Send a turn and return its `turn_ended` event data."""
        client = self.client()
        follower = self.follow((await client.get("/transcript", params={"limit": 0})).json()["cursor"])
        reply = await client.post("/turn", json={"prompt": prompt, **fields})
        assert reply.status_code == 202, reply.text
        turn_id = reply.json()["turn_id"]
        ended = await follower.until(lambda e: e.type == "turn_ended" and e.data["turn_id"] == turn_id)
        assert follower.task is not None
        follower.task.cancel()
        return ended.data

    async def close(self) -> None:
        for f in self.followers:
            if f.task is not None:
                f.task.cancel()
                with contextlib.suppress(BaseException):
                    await f.task
        for c in self.clients:
            await c.aclose()


@pytest.fixture
def workdir(state_dir: Path) -> Path:
    path = state_dir / "work"
    path.mkdir()
    return path


@pytest.fixture
def new_session(state_dir: Path, workdir: Path) -> Iterator[Callable[[], str]]:
    """Make sessions (no worker); every worker of them is killed at the end."""
    state = StatePaths(state_dir)
    made: list[str] = []

    def make() -> str:
        made.append(create_session(state, working_directory=workdir).id)
        return made[-1]

    yield make
    for sid in made:
        stop_workers(state_dir, sid)


@pytest.fixture
async def worker(state_dir: Path, new_session: Callable[[], str]) -> AsyncIterator[Worker]:
    """A fresh session with its worker started."""
    state = StatePaths(state_dir)
    sid = new_session()
    w = Worker(state, sid, start_worker(state, sid, timeout=TIMEOUT))
    yield w
    await w.close()
