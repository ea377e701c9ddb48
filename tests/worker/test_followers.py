"""Followers: every journal event exactly once and in order, across killed workers; many
followers at once; a stalled follower holds no one back."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from pathlib import Path

import httpx
import pytest
from helpers import TIMEOUT, eventually, read_sse, stop_workers

from tui.link.launch import start_worker
from tui.store import StatePaths, create_session, read_sidecar
from worker.conftest import Follower, Worker

PRINTER = "import time\nfor i in range(400):\n    print({}, i, flush=True)\n    time.sleep(0.001)"


def _journal_seqs(path: Path) -> list[int]:
    return [json.loads(line)["seq"] for line in path.read_text().splitlines()]


class Restarts:
    """How many times the test started the worker again; a follower that lost its worker waits
    for the next start instead of retrying on a clock."""

    def __init__(self) -> None:
        self.count = 0
        self._changed = asyncio.Condition()

    async def started(self) -> None:
        async with self._changed:
            self.count += 1
            self._changed.notify_all()

    async def after(self, count: int) -> None:
        """Return once the worker was started again after the `count`th start."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.count > count)


async def _reconnecting_follower(state: StatePaths, sid: str, seen: list[int], restarts: Restarts) -> None:
    """Follow the session like a client would: on any drop, find the worker again and resume."""
    cursor = 0
    while True:
        generation = restarts.count
        car = read_sidecar(state.session(sid).sidecar)
        if car is None:
            await restarts.after(generation)
            continue
        transport = httpx.AsyncHTTPTransport(uds=car.socket)
        try:
            async with (
                httpx.AsyncClient(transport=transport, base_url="http://w") as client,
                client.stream("GET", "/events", params={"cursor": cursor}, timeout=None) as response,
            ):
                if response.status_code == 200:
                    async for event in read_sse(response):
                        assert event.seq == cursor + 1, f"got {event.seq} after {cursor}"
                        seen.append(event.seq)
                        cursor = event.seq
        except (httpx.TransportError, httpx.RemoteProtocolError):
            pass
        await restarts.after(generation)  # the stream ended: its worker was killed


async def test_a_follower_sees_every_event_once_across_killed_workers(state_dir: Path, workdir: Path) -> None:
    state = StatePaths(state_dir)
    sid = create_session(state, working_directory=workdir).id
    rng = random.Random(7)
    seen: list[int] = []
    restarts = Restarts()
    try:
        start_worker(state, sid, timeout=TIMEOUT)
        follower = asyncio.create_task(_reconnecting_follower(state, sid, seen, restarts))
        for round_ in range(5):
            car = read_sidecar(state.session(sid).sidecar)
            assert car is not None
            async with httpx.AsyncClient(
                transport=httpx.AsyncHTTPTransport(uds=car.socket), base_url="http://w"
            ) as client:
                program = PRINTER.format(round_)
                await client.post("/turn", json={"prompt": program})
            await asyncio.sleep(rng.uniform(0.0, 0.4))  # a random point in the turn to kill it at
            stop_workers(state.root, sid)
            await asyncio.to_thread(start_worker, state, sid, timeout=TIMEOUT)
            await restarts.started()
        journal = state.session(sid).journal
        await eventually(lambda: bool(seen) and seen[-1] == _journal_seqs(journal)[-1])
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
        seqs = _journal_seqs(journal)
        assert seqs == list(range(1, len(seqs) + 1))
        assert seen == seqs, "every journal event exactly once, in order"
        starts = [json.loads(x) for x in journal.read_text().splitlines()]
        assert sum(1 for e in starts if e["type"] == "worker_started") == 6
    finally:
        stop_workers(state.root, sid)


async def test_twenty_followers_see_the_same_events_and_a_stalled_one_holds_no_one_back(
    state_dir: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = StatePaths(state_dir)
    sid = create_session(state, working_directory=workdir).id
    monkeypatch.setenv("TUI_FOLLOWER_QUEUE", "64:65536")  # small queues, so the bound is reached
    car = start_worker(state, sid, timeout=TIMEOUT)
    monkeypatch.delenv("TUI_FOLLOWER_QUEUE")
    w = Worker(state, sid, car)
    try:
        stalled_client = w.client()
        async with stalled_client.stream("GET", "/events", params={"client_id": "stalled"}) as stalled:
            assert stalled.status_code == 200
            followers: list[Follower] = [w.follow(client_id=f"f{n}") for n in range(20)]
            await asyncio.gather(*(f.until(lambda e: e.type == "status") for f in followers))
            # About 4 MB of output in a few hundred events: far past the stalled one's queue and socket.
            program = (
                "import time\nfor i in range(300):\n    print('x' * 14000, flush=True)\n    time.sleep(0.002)"
            )
            await w.client().post("/turn", json={"prompt": program})
            ends = await asyncio.gather(
                *(f.until(lambda e: e.type == "turn_ended", within=60) for f in followers)
            )
            assert {e.seq for e in ends} == {ends[0].seq}
            reference = [e.seq for e in followers[0].events]
            for f in followers[1:]:
                assert [e.seq for e in f.events][: len(reference)] == reference[: len(f.events)]
            await eventually(lambda: "fell behind" in w.paths.log.read_text())
            # The stalled client reads at last: it still gets every event exactly once, in order.
            got: list[int] = []
            async with asyncio.timeout(60):
                async for event in read_sse(stalled):
                    got.append(event.seq)
                    if event.type == "turn_ended":
                        break
            assert got == list(range(1, len(got) + 1))
            assert got[-1] == ends[0].seq
    finally:
        await w.close()
        stop_workers(state.root, sid)
