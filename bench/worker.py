"""Worker and bridge figures: start to bridge ready, output throughput to a follower, journal replay
speed, and append→arrival latency with 1 and 50 followers.

Run: ``.venv/bin/python bench/worker.py``. Each figure is printed on its own line.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import httpx

from tui.link.launch import start_worker
from tui.protocol import TextChunk
from tui.store import Journal, StatePaths, create_session, read_sidecar


async def _events(
    client: httpx.AsyncClient, cursor: int, client_id: str = "bench"
) -> AsyncIterator[tuple[str, str]]:
    async with client.stream(
        "GET", "/events", params={"cursor": cursor, "client_id": client_id}, timeout=None
    ) as response:
        kind, data = "", ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
            elif line == "" and data:
                yield kind, data
                kind, data = "", ""


def _client(sock: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=sock), base_url="http://w", timeout=60)


async def _leave(sock: str) -> None:
    async with _client(sock) as c:
        await c.post("/leave", json={})


def bench_start(state: StatePaths, workdir: Path, runs: int = 7) -> None:
    times = []
    for _ in range(runs):
        sid = create_session(state, working_directory=workdir).id
        t = time.perf_counter()
        car = start_worker(state, sid)
        times.append(time.perf_counter() - t)
        asyncio.run(_leave(car.socket))
    print(
        f"worker start to bridge ready: median {statistics.median(times) * 1000:.0f} ms, "
        f"min {min(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms ({runs} starts)"
    )


async def bench_throughput(sock: str) -> None:
    lines = 200_000
    program = f"for i in range({lines}):\n    print('line', i)"
    async with _client(sock) as c:
        cursor = (await c.get("/transcript", params={"limit": 0})).json()["cursor"]
        events = chars = 0
        t = time.perf_counter()
        await c.post("/turn", json={"prompt": program})
        async for kind, data in _events(c, cursor):
            if kind == "text":
                events += 1
                chars += len(json.loads(data)["text"])
            elif kind == "turn_ended":
                break
        dt = time.perf_counter() - t
    print(
        f"program printing {lines} lines as fast as it can: {chars / dt / 1e6:.1f} MB/s of reply to a "
        f"follower, {lines / dt:,.0f} lines/s, in {events} text events ({events / dt:.0f} events/s: "
        f"output is collected every 50 ms)"
    )


async def bench_replay(state: StatePaths, workdir: Path) -> None:
    sid = create_session(state, working_directory=workdir).id
    paths = state.session(sid)
    n = 100_000
    t = time.perf_counter()
    with Journal.open_for_append(paths.journal) as j:
        for i in range(n):
            j.append(TextChunk(turn_id="t-bench", text=f"chunk {i}\n"))
    append_rate = n / (time.perf_counter() - t)
    print(f"journal append (write + index): {append_rate:,.0f} events/s")
    t = time.perf_counter()
    car = start_worker(state, sid)
    print(f"worker start on a {n:,}-event journal: {(time.perf_counter() - t) * 1000:.0f} ms")
    async with _client(car.socket) as c:
        got = 0
        t = time.perf_counter()
        async for _kind, _data in _events(c, 0):
            got += 1
            if got >= n:
                break
        dt = time.perf_counter() - t
        print(f"replay from cursor 0 to one follower: {got / dt:,.0f} events/s")
        got = 0
        t = time.perf_counter()
        async for _kind, _data in _events(c, n - 1000):
            got += 1
            if got >= 1000:
                break
        print(
            f"follow from cursor {n - 1000:,} (last 1000 events): {(time.perf_counter() - t) * 1000:.1f} ms"
        )
    await _leave(car.socket)


async def bench_latency(sock: str, followers: int) -> None:
    program = "import time\nfor i in range(60):\n    print(i, flush=True)\n    time.sleep(0.06)"
    # Clients first: making one costs milliseconds (an SSL context each), which must not count.
    clients = [_client(sock) for _ in range(followers)]
    async with _client(sock) as c:
        cursor = (await c.get("/transcript", params={"limit": 0})).json()["cursor"]
        delays: list[float] = []

        async def follow(k: int) -> None:
            async for kind, data in _events(clients[k], cursor, f"bench:{k}"):
                if kind == "text":
                    at = datetime.fromisoformat(json.loads(data)["at"])
                    delays.append((datetime.now(UTC) - at).total_seconds())
                elif kind == "turn_ended":
                    return

        tasks = [asyncio.create_task(follow(k)) for k in range(followers)]
        while len((await c.get("/stats")).json()["attached"]) < followers:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        await c.post("/turn", json={"prompt": program})
        await asyncio.gather(*tasks)
    for fc in clients:
        await fc.aclose()
    flat = sorted(delays)
    p99 = flat[min(len(flat) - 1, int(len(flat) * 0.99))]
    print(
        f"append→arrival with {followers} follower(s): median {statistics.median(flat) * 1000:.2f} ms, "
        f"p99 {p99 * 1000:.2f} ms ({len(flat)} arrivals)"
    )


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tui-bench-", dir="/tmp") as d:
        state = StatePaths(Path(d))
        workdir = Path(d) / "work"
        workdir.mkdir()
        bench_start(state, workdir)
        sid = create_session(state, working_directory=workdir).id
        car = start_worker(state, sid)
        asyncio.run(bench_throughput(car.socket))
        asyncio.run(bench_latency(car.socket, 1))
        asyncio.run(bench_latency(car.socket, 50))
        asyncio.run(_leave(car.socket))
        asyncio.run(bench_replay(state, workdir))
        assert read_sidecar(state.session(sid).sidecar) is None


if __name__ == "__main__":
    main()
