"""Model session figures: tui's overhead between a provider's stream and a client, through a real
worker whose profile points at the tests' loopback OpenAI-compatible server.

- first token: time from the server sending its first chunk to a client following the worker's
  events receiving the first `text` event (the SDK, pydantic-ai, the worker's journal and its
  event stream in between);
- throughput: a 20,000-token answer (one token a chunk), tokens/s from the first text event to
  `turn_ended` at the client;
- interrupt: from `POST /interrupt` mid-stream to `turn_ended` at the client.

Run with ``.venv/bin/python bench/model.py``; figures go into docs/performance.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

# the tests' fake server, and not bench/ itself first on the path (its tui.py would hide the package)
sys.path[0] = str(Path(__file__).resolve().parent.parent / "tests")

from fake_model_server import FakeModelServer, Hang, Text  # noqa: E402

from tui.store import StatePaths, create_session  # noqa: E402
from tui.worker.launch import start_worker  # noqa: E402

TOKENS = 20_000


async def _events(client: httpx.AsyncClient, cursor: int) -> AsyncIterator[tuple[str, dict[str, object]]]:
    async with client.stream(
        "GET", "/events", params={"cursor": cursor, "client_id": "bench"}, timeout=None
    ) as r:
        kind, data = "", ""
        async for line in r.aiter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
            elif line == "" and data:
                yield kind, json.loads(data)
                kind, data = "", ""


async def _cursor(client: httpx.AsyncClient) -> int:
    answer = await client.get("/transcript")
    return int(answer.json()["cursor"])


async def first_token(client: httpx.AsyncClient, server: FakeModelServer, runs: int = 15) -> list[float]:
    gaps = []
    for i in range(runs):
        server.script(Text(["hello", " there"]))
        cursor = await _cursor(client)
        await client.post("/turn", json={"prompt": f"hi {i}"})
        seen_first = None
        async for kind, _ in _events(client, cursor):
            if kind == "text" and seen_first is None:
                seen_first = time.monotonic()
            if kind == "turn_ended":
                break
        assert seen_first is not None
        gaps.append(seen_first - server.first_byte_at[-1])
    return gaps


async def throughput(client: httpx.AsyncClient, server: FakeModelServer) -> tuple[float, int]:
    server.script(Text(["tok "] * TOKENS))
    cursor = await _cursor(client)
    await client.post("/turn", json={"prompt": "a long answer please"})
    first = None
    chars = 0
    async for kind, data in _events(client, cursor):
        if kind == "text":
            first = first or time.monotonic()
            chars += len(str(data["text"]))
        if kind == "turn_ended":
            break
    assert first is not None
    return TOKENS / (time.monotonic() - first), chars


async def interrupt(client: httpx.AsyncClient, server: FakeModelServer, runs: int = 5) -> list[float]:
    times = []
    for _ in range(runs):
        server.script(Hang(["thinking "]))
        cursor = await _cursor(client)
        await client.post("/turn", json={"prompt": "go on"})
        asked = 0.0
        async for kind, _ in _events(client, cursor):
            if kind == "text" and not asked:
                asked = time.monotonic()
                await client.post("/interrupt", json={})
            if kind == "turn_ended":
                times.append(time.monotonic() - asked)
                break
    return times


def ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:.1f} ms, max {max(values) * 1000:.1f} ms"


async def run(sock: str, server: FakeModelServer) -> None:
    async with httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(uds=sock), base_url="http://w", timeout=60
    ) as c:
        await c.post("/turn", json={"prompt": "warm up"})
        async for kind, _ in _events(c, 0):
            if kind == "turn_ended":
                break
        gaps = await first_token(c, server)
        print(f"first token, server's first byte to the client's first text event: {ms(gaps)}")
        rate, chars = await throughput(c, server)
        print(f"a {TOKENS:,}-token answer: {rate:,.0f} tokens/s at the client ({chars:,} characters)")
        print(f"interrupt mid-stream to turn_ended at the client: {ms(await interrupt(c, server))}")
        await c.post("/leave", json={})


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tui-bench-", dir="/tmp") as d, FakeModelServer() as server:
        config = Path(d) / "config"
        config.mkdir()
        (config / "config.toml").write_text(
            f'[models.local]\nprovider = "openai"\nmodel = "fake"\nbase_url = "{server.url}"\n'
        )
        os.environ["TUI_CONFIG_DIR"] = str(config)
        state = StatePaths(Path(d) / "state")
        workdir = Path(d) / "work"
        workdir.mkdir()
        sid = create_session(state, working_directory=workdir, agent="model", model="local").id
        car = start_worker(state, sid)
        asyncio.run(run(car.socket, server))


if __name__ == "__main__":
    main()
