"""Web bridge figures: event latency through `tui web` beside straight from the worker (1 and 50
followers), reply throughput both ways, and turns/s of `tui send --wait` remote beside local.
Browser pages: print→arrival of a program's lines at 1 and 50 followers of ``…/changes`` (the
page's stream: the web bridge's one attachment of the session, its changes in words) beside as
many of ``…/events``, and at 50 followers of ``…/events`` while a page follows too (the
attachment then reads the same shared stream).

Run: ``.venv/bin/python bench/remote.py`` (``--pages``: the page figures only). Each figure is
printed on its own line.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import selectors
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from tui.cli import main as tui_main
from tui.link.launch import start_worker
from tui.store import StatePaths, create_session, read_sidecar
from tui.store.remotes import Remote, add_remote
from tui.web.participants import ParticipantStore
from tui.web.paths import WebPaths

Factory = Callable[[], httpx.AsyncClient]


async def _events(
    client: httpx.AsyncClient, path: str, cursor: int, cid: str
) -> AsyncIterator[tuple[str, str]]:
    params = {"cursor": cursor, "client_id": cid}
    async with client.stream("GET", path, params=params, timeout=None) as response:
        kind, data = "", ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
            elif line == "" and data:
                yield kind, data
                kind, data = "", ""


def _start_web(state: Path) -> tuple[subprocess.Popen[str], str, str]:
    token_file = state / "owner.token"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui", "web", "--port", "0", "--token-file", str(token_file)],
        env={**os.environ, "TUI_STATE_DIR": str(state)},
        stdout=subprocess.PIPE,
        text=True,
        cwd=str(state),
    )
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    assert sel.select(20), "tui web did not start"
    url = proc.stdout.readline().split()[-1]
    return proc, url, token_file.read_text().strip()


async def latency(make: Factory, prefix: str, followers: int) -> list[float]:
    """Append→arrival delays of every text event of one turn, at each of `followers` followers."""
    program = "import time\nfor i in range(60):\n    print(i, flush=True)\n    time.sleep(0.06)"
    clients = [make() for _ in range(followers)]
    async with make() as c:
        cursor = (await c.get(f"{prefix}/transcript", params={"limit": 0})).json()["cursor"]
        delays: list[float] = []
        opened = 0

        async def follow(k: int) -> None:
            nonlocal opened
            opened += 1
            async for kind, data in _events(clients[k], f"{prefix}/events", cursor, f"bench:{k}"):
                if kind == "text":
                    at = datetime.fromisoformat(json.loads(data)["at"])
                    delays.append((datetime.now(UTC) - at).total_seconds())
                elif kind == "turn_ended":
                    return

        tasks = [asyncio.create_task(follow(k)) for k in range(followers)]
        for _ in range(10_000):
            if len((await c.get(f"{prefix}/stats")).json()["attached"]) >= followers:
                break
            await asyncio.sleep(0.01)
        await c.post(f"{prefix}/turn", json={"prompt": program})
        await asyncio.gather(*tasks)
    for fc in clients:
        await fc.aclose()
    return delays


async def throughput(make: Factory, prefix: str) -> float:
    """MB/s of reply text a follower receives from a program printing as fast as it can."""
    program = "for i in range(200000):\n    print('line', i)"
    async with make() as c:
        cursor = (await c.get(f"{prefix}/transcript", params={"limit": 0})).json()["cursor"]
        chars = 0
        t = time.perf_counter()
        await c.post(f"{prefix}/turn", json={"prompt": program})
        async for kind, data in _events(c, f"{prefix}/events", cursor, "bench"):
            if kind == "text":
                chars += len(json.loads(data)["text"])
            elif kind == "turn_ended":
                break
        return chars / (time.perf_counter() - t) / 1e6


PRINTING = "import time\nfor i in range(60):\n    print(repr(time.time()), flush=True)\n    time.sleep(0.06)"
"""A program printing the time of each of its lines: what arrives says how long it took."""


async def _messages(
    client: httpx.AsyncClient, path: str, params: dict[str, Any]
) -> AsyncIterator[tuple[str, str]]:
    async with client.stream("GET", path, params=params, timeout=None) as response:
        if response.status_code != 200:
            raise LookupError(f"{path}: HTTP {response.status_code}")
        kind, data = "", ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
            elif line == "" and data:
                yield kind, data
                kind, data = "", ""


async def printed(make: Factory, prefix: str, routes: list[str]) -> dict[str, list[float]]:
    """Print→arrival delays of `PRINTING`'s lines at followers of `routes` (``events``: the
    worker's events through the fan-out; ``changes``: the page's changes), by route."""
    clients = [make() for _ in routes]
    delays: dict[str, list[float]] = {route: [] for route in routes}
    async with make() as c:
        cursor = (await c.get(f"{prefix}/transcript", params={"limit": 0})).json()["cursor"]

        async def follow(k: int, route: str) -> None:
            params: dict[str, Any] = {"client_id": f"bench:{k}"}
            if route == "events":
                params["cursor"] = cursor
            rest = ""
            async for kind, data in _messages(clients[k], f"{prefix}/{route}", params):
                change = json.loads(data)
                if kind == "text" or (kind == "Output" and change.get("step", {}).get("kind") == "text"):
                    text = rest + (change["text"] if kind == "text" else change["step"]["text"])
                    *lines, rest = text.split("\n")
                    now = time.time()
                    delays[route].extend(now - float(line) for line in lines if line)
                elif kind in ("turn_ended", "TurnEnded"):
                    return

        tasks = [asyncio.create_task(follow(k, route)) for k, route in enumerate(routes)]
        for _ in range(10_000):
            if len((await c.get(f"{prefix}/stats")).json()["attached"]) >= len(routes):
                break
            await asyncio.sleep(0.01)
        await c.post(f"{prefix}/turn", json={"prompt": PRINTING})
        await asyncio.gather(*tasks)
    for fc in clients:
        await fc.aclose()
    return delays


def pages(make: Factory, prefix: str) -> None:
    """The page figures: followers of …/changes beside as many of …/events."""
    served = True
    for n in (1, 50):
        events = asyncio.run(printed(make, prefix, ["events"] * n))["events"]
        print(f"print→arrival, {n} follower(s) of …/events through tui web:  {_figures(events)}")
        if not served:
            continue
        try:
            changes = asyncio.run(printed(make, prefix, ["changes"] * n))["changes"]
        except LookupError as exc:  # a tui web from before the page followed an attachment
            print(f"print→arrival, …/changes: not served ({exc})")
            served = False
            continue
        print(f"print→arrival, {n} follower(s) of …/changes through tui web: {_figures(changes)}")
    if served:
        mixed = asyncio.run(printed(make, prefix, ["events"] * 50 + ["changes"]))
        print(f"print→arrival, 50 of …/events while a page follows:      {_figures(mixed['events'])}")


def turns_per_second(state: Path, *extra: str, sid: str, turns: int = 20) -> float:
    """`tui send ID PROMPT --wait`, run in this process `turns` times in a row."""
    t = time.perf_counter()
    for i in range(turns):
        with (
            contextlib.redirect_stdout(io.TextIOWrapper(io.BytesIO())),
            contextlib.redirect_stderr(io.StringIO()),
        ):
            code = tui_main(["--state-dir", str(state), *extra, "send", sid, f"print({i})", "--wait"])
        assert code == 0, code
    return turns / (time.perf_counter() - t)


async def revoke_to_close(url: str, state: Path, sid: str, runs: int = 10) -> list[float]:
    """Seconds from ``tui share revoke`` (the file written) to the participant's open stream ending."""
    store = ParticipantStore(WebPaths.of(state))
    times = []
    for i in range(runs):
        _, token = store.add(sid, name=f"bench-{i}", kind="viewer")
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as c,
            c.stream("GET", f"/api/sessions/{sid}/events") as response,
        ):
            lines = response.aiter_lines()
            while await anext(lines) != "":
                pass
            t = time.perf_counter()
            store.revoke(sid, f"bench-{i}")
            async for _ in lines:
                pass
            times.append(time.perf_counter() - t)
    return times


def _figures(delays: list[float]) -> str:
    flat = sorted(delays)
    p99 = flat[min(len(flat) - 1, int(len(flat) * 0.99))]
    return f"median {statistics.median(flat) * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms ({len(flat)} arrivals)"


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tui-bench-", dir="/tmp") as d:
        root = Path(d)
        server = root / "server"
        client = root / "client"
        server.mkdir()
        client.mkdir()
        proc, url, token = _start_web(server)
        state = StatePaths(server)
        try:
            sid = create_session(state, working_directory=server).id
            car = start_worker(state, sid)
            prefix = f"/api/sessions/{sid}"

            def direct() -> httpx.AsyncClient:
                transport = httpx.AsyncHTTPTransport(uds=car.socket)
                return httpx.AsyncClient(transport=transport, base_url="http://w", timeout=60)

            def remote() -> httpx.AsyncClient:
                return httpx.AsyncClient(
                    base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60
                )

            if "--pages" in sys.argv:
                pages(remote, prefix)
                return
            for n in (1, 50):
                here = asyncio.run(latency(direct, "", n))
                there = asyncio.run(latency(remote, prefix, n))
                print(f"append→arrival, {n} follower(s), straight from the worker: {_figures(here)}")
                print(f"append→arrival, {n} follower(s), through tui web:         {_figures(there)}")
            fast = asyncio.run(throughput(direct, ""))
            slow = asyncio.run(throughput(remote, prefix))
            print(f"reply throughput straight from the worker: {fast:.1f} MB/s")
            print(f"reply throughput through tui web:          {slow:.1f} MB/s")

            pages(remote, prefix)

            closed = asyncio.run(revoke_to_close(url, server, sid))
            median, worst = statistics.median(closed) * 1000, max(closed) * 1000
            print(f"revoke to the participant's stream closed: median {median:.0f} ms, max {worst:.0f} ms")

            (client / "lab.token").write_text(token + "\n")
            add_remote(StatePaths(client), Remote("lab", url, str(client / "lab.token")))
            local = turns_per_second(server, sid=sid)
            far = turns_per_second(client, "--remote", "lab", sid=sid)
            print(
                f"tui send --wait, 20 turns in a row: local {local:.1f} turns/s, --remote {far:.1f} turns/s"
            )
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(10)
            for folder in (server / "sessions").iterdir():
                worker = read_sidecar(folder / "worker.json")
                if worker is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(worker.pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
