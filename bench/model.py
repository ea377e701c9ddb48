"""Model session figures: tui's overhead between a provider's stream and a client, through a real
worker whose profile points at the tests' loopback OpenAI-compatible server.

- first token: time from the server sending its first chunk to a client following the worker's
  events receiving the first `text` event (the SDK, pydantic-ai, the worker's journal and its
  event stream in between), beside the same gap for the raw `AsyncOpenAI` client;
- throughput: a 5,000-token answer (one token a chunk), tokens/s from the first text event to
  `turn_ended` at the client, beside the raw `AsyncOpenAI` client's tokens/s from its first
  content chunk to the end of its stream, in interleaved pairs, and how many `text` events
  carried the answer;
- ``tui send ID --wait`` of that answer, beside a script that prints it through the raw SDK
  (both whole processes, the worker already running);
- interrupt: from `POST /interrupt` mid-stream to `turn_ended` at the client.

Run with ``.venv/bin/python bench/model.py``; figures go into docs/performance.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

# the tests' fake server, and not bench/ itself first on the path (its tui.py would hide the package)
sys.path[0] = str(Path(__file__).resolve().parent.parent / "tests")

from fake_model_server import FakeModelServer, Hang, Text  # noqa: E402

from tui.link.launch import start_worker  # noqa: E402
from tui.store import StatePaths, create_session  # noqa: E402

TOKENS = 5_000
PAIRS = 5


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
    chars = events = 0
    async for kind, data in _events(client, cursor):
        if kind == "text":
            first = first or time.monotonic()
            chars += len(str(data["text"]))
            events += 1
        if kind == "turn_ended":
            break
    assert first is not None and chars == TOKENS * len("tok ")
    return TOKENS / (time.monotonic() - first), events


async def raw_sdk(server: FakeModelServer) -> tuple[float, float]:
    """The raw `AsyncOpenAI` client on the same server: (tokens/s, first-token gap in s)."""
    from openai import AsyncOpenAI

    sdk = AsyncOpenAI(api_key="none", base_url=server.url, max_retries=0)
    server.script(Text(["tok "] * TOKENS))
    stream = await sdk.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "a long answer please"}], stream=True
    )
    first = None
    chars = 0
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            first = first or time.monotonic()
            chars += len(chunk.choices[0].delta.content)
    end = time.monotonic()
    await sdk.close()
    assert first is not None and chars == TOKENS * len("tok ")
    return TOKENS / (end - first), first - server.first_byte_at[-1]


RAW_SCRIPT = """
import asyncio, sys
from openai import AsyncOpenAI
async def main():
    sdk = AsyncOpenAI(api_key="none", base_url=sys.argv[1], max_retries=0)
    stream = await sdk.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "a long answer please"}], stream=True
    )
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            sys.stdout.write(chunk.choices[0].delta.content)
asyncio.run(main())
"""


def send_wait(sid: str, server: FakeModelServer) -> tuple[float, float]:
    """Seconds of ``tui send ID --wait`` and of the raw SDK script, each printing the answer."""
    server.script(Text(["tok "] * TOKENS))
    began = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "tui", "send", sid, "a long answer please", "--wait"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    ours = time.monotonic() - began
    assert out.count("tok") == TOKENS, out[-300:]
    server.script(Text(["tok "] * TOKENS))
    began = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", RAW_SCRIPT, server.url], capture_output=True, text=True, check=True
    ).stdout
    raw = time.monotonic() - began
    assert out.count("tok") == TOKENS
    return ours, raw


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


async def run(sock: str, sid: str, server: FakeModelServer) -> None:
    async with httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(uds=sock), base_url="http://w", timeout=60
    ) as c:
        await c.post("/turn", json={"prompt": "warm up"})
        async for kind, _ in _events(c, 0):
            if kind == "turn_ended":
                break
        print(f"load average {os.getloadavg()[0]:.2f}; {PAIRS} interleaved pairs each")
        gaps = await first_token(c, server)
        raw_gaps = [(await raw_sdk(server))[1] for _ in range(PAIRS)]
        added = statistics.median(gaps) - statistics.median(raw_gaps)
        print(
            f"first token, server's first byte to the client's first text: tui {ms(gaps)}; "
            f"raw SDK {ms(raw_gaps)}; added {1000 * added:.1f} ms"
        )
        ours, raws, counts = [], [], []
        for _ in range(PAIRS):
            rate, events = await throughput(c, server)
            ours.append(rate)
            counts.append(events)
            raws.append((await raw_sdk(server))[0])
        ratio = statistics.median(a / b for a, b in zip(ours, raws, strict=True))
        print(
            f"a {TOKENS:,}-token answer, one token a chunk: tui {statistics.median(ours):,.0f} tokens/s "
            f"at the client in {statistics.median(counts):,.0f} text events; raw SDK "
            f"{statistics.median(raws):,.0f} tokens/s; ratio {ratio:.2f}x"
        )
        walls = [await asyncio.to_thread(send_wait, sid, server) for _ in range(3)]
        print(
            f"send --wait of that answer: tui {statistics.median(w[0] for w in walls):.2f} s; raw SDK "
            f"script {statistics.median(w[1] for w in walls):.2f} s; ratio "
            f"{statistics.median(w[0] / w[1] for w in walls):.2f}x"
        )
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
        os.environ["TUI_STATE_DIR"] = str(Path(d) / "state")
        state = StatePaths(Path(d) / "state")
        workdir = Path(d) / "work"
        workdir.mkdir()
        sid = create_session(state, working_directory=workdir, agent="model", model="local").id
        car = start_worker(state, sid)
        asyncio.run(run(car.socket, sid, server))


if __name__ == "__main__":
    main()
