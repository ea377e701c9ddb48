"""Model session figures: tui's overhead between a provider's stream and a client, through a real
worker whose profile points at the tests' loopback OpenAI-compatible server, run in a process
and a session of its own: neither the worker nor the raw SDK shares an interpreter with it, and
on a loaded machine (Linux's autogroup scheduling shares the CPU between sessions, and the worker
has a session of its own) it does not take its CPU from the raw SDK's share alone.

- first token: a 5,000-chunk answer written in one go (the whole burst arrives at once), time
  from the server sending it to a client following the worker's events receiving the first `text`
  event (the SDK, pydantic-ai, the worker's journal and its event stream in between), beside the
  same gap for the raw SDK reading the same answer, for each API a profile speaks: Chat
  Completions (`AsyncOpenAI`), Responses (`AsyncOpenAI().responses`), Anthropic Messages
  (`AsyncAnthropic`), in interleaved rounds, one worker per API;
- throughput: a 5,000-token answer (one token a chunk), tokens/s from the server's first chunk
  to `turn_ended` at the client, beside the raw `AsyncOpenAI` client's tokens/s from the
  server's first chunk to the end of its stream, in interleaved pairs, and how many `text`
  events carried the answer (a clock that starts at the server, so that a reader that batches
  is not credited with the time before its first batch);
- ``tui send ID --wait`` of that answer, beside a script that prints it through the raw SDK
  (both whole processes, the worker already running);
- interrupt: from `POST /interrupt` mid-stream to `turn_ended` at the client;
- pydantic-ai alone: the same answer through the model tui builds (`build_model`) and through
  pydantic-ai's own `OpenAIChatModel`, each model's `request_stream` read in this process, beside
  the raw SDK, interleaved.

Run with ``.venv/bin/python bench/model.py`` (``--first-token``: the first-token figures alone);
figures go into docs/performance.md.
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

# the tests' folder first on the path: the loopback model server lives there
TESTS = str(Path(__file__).resolve().parent.parent / "tests")
sys.path[0] = TESTS

from tui.link.launch import start_worker  # noqa: E402
from tui.store import StatePaths, create_session  # noqa: E402

TOKENS = 5_000
PAIRS = 5

SERVER = """
import sys, threading
sys.path.insert(0, sys.argv[1])
from fake_model_server import FakeModelServer, Hang, Text, _last_user_text, default_reply
from starlette.responses import JSONResponse
from starlette.routing import Route

def reply(messages):
    words = _last_user_text(messages).strip().split("\\n\\n")[-1]
    if words == "a long answer please":
        return Text(["tok "] * int(sys.argv[2]))
    if words.startswith("burst "):
        return Text(["tok "] * int(sys.argv[2]), burst=True)
    if words.startswith("hi "):
        return Text(["hello", " there"])
    if words == "go on":
        return Hang(["thinking "])
    return default_reply(messages)

server = FakeModelServer(reply)

async def first_byte(request):
    return JSONResponse(server.first_byte_at)

server.app.router.routes.append(Route("/first_byte", first_byte))
server.start()
print(server.port, flush=True)
threading.Event().wait()
"""


class Server:
    """The tests' fake server in a process of its own, answering by the prompt (see `SERVER`)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER, TESTS, str(TOKENS)],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.root = f"http://127.0.0.1:{self.port}"

    async def first_byte_at(self) -> float:
        """`time.monotonic()` (the same clock in every process) when the last answer began."""
        async with httpx.AsyncClient() as client:
            answer = await client.get(f"http://127.0.0.1:{self.port}/first_byte")
        return float(answer.json()[-1])

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


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


APIS = {
    "Chat Completions": 'provider = "openai"\nbase_url = "{url}"',
    "Responses": 'provider = "openai"\napi = "responses"\nbase_url = "{url}"',
    "Anthropic": 'provider = "anthropic"\nbase_url = "{root}"\napi_key_env = "HOME"',
}
"""Each API a model profile speaks, as its profile's lines (a local server takes any key)."""


async def first_token(client: httpx.AsyncClient, server: Server, i: int) -> float:
    """Seconds from the server writing a 5,000-chunk burst to the client's first `text`."""
    cursor = await _cursor(client)
    await client.post("/turn", json={"prompt": f"burst {i}"})
    seen_first = None
    async for kind, _ in _events(client, cursor):
        if kind == "text" and seen_first is None:
            seen_first = time.monotonic()
        if kind == "turn_ended":
            break
    assert seen_first is not None
    return seen_first - await server.first_byte_at()


async def raw_first_token(server: Server, api: str) -> float:
    """The same gap for the raw SDK of `api`, reading the whole answer."""
    first = None
    prompt = [{"role": "user", "content": "burst raw"}]
    if api == "Anthropic":
        from anthropic import AsyncAnthropic

        claude = AsyncAnthropic(api_key="none", base_url=server.root, max_retries=0)
        events = await claude.messages.create(model="fake", max_tokens=8192, messages=prompt, stream=True)  # type: ignore[arg-type]
        async for event in events:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                first = first or time.monotonic()
        await claude.close()
    else:
        from openai import AsyncOpenAI

        sdk = AsyncOpenAI(api_key="none", base_url=server.url, max_retries=0)
        if api == "Responses":
            answer = await sdk.responses.create(model="fake", input="burst raw", stream=True)
            async for event in answer:
                if event.type == "response.output_text.delta":
                    first = first or time.monotonic()
        else:
            stream = await sdk.chat.completions.create(model="fake", messages=prompt, stream=True)  # type: ignore[arg-type]
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    first = first or time.monotonic()
        await sdk.close()
    assert first is not None
    return first - await server.first_byte_at()


async def first_tokens(socks: dict[str, str], server: Server) -> None:
    """The first-token figure of each API, tui beside its raw SDK, in interleaved rounds."""
    gaps: dict[str, list[float]] = {api: [] for api in socks}
    raws: dict[str, list[float]] = {api: [] for api in socks}
    clients = {
        api: httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=sock), base_url="http://w", timeout=60)
        for api, sock in socks.items()
    }
    for i in range(PAIRS):
        for api, client in clients.items():
            gaps[api].append(await first_token(client, server, i))
            raws[api].append(await raw_first_token(server, api))
    for api, client in clients.items():
        await client.post("/leave", json={})
        await client.aclose()
        ours, raw = statistics.median(gaps[api]), statistics.median(raws[api])
        print(
            f"first token, {TOKENS:,} chunks at once, {api}: server's write to the client's first text "
            f"tui {ms(gaps[api])}; raw SDK {ms(raws[api])}; added {1000 * (ours - raw):.1f} ms, "
            f"ratio {ours / raw:.1f}x"
        )


async def throughput(client: httpx.AsyncClient, server: Server) -> tuple[float, int]:
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
    end = time.monotonic()
    assert first is not None and chars == TOKENS * len("tok ")
    return TOKENS / (end - await server.first_byte_at()), events


async def raw_sdk(server: Server) -> tuple[float, float]:
    """The raw `AsyncOpenAI` client on the same server: (tokens/s, first-token gap in s)."""
    from openai import AsyncOpenAI

    sdk = AsyncOpenAI(api_key="none", base_url=server.url, max_retries=0)
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
    began = await server.first_byte_at()
    return TOKENS / (end - began), first - began


async def model_alone(server: Server, *, ours: bool) -> float:
    """Tokens/s of the answer through a pydantic-ai model's `request_stream` alone: the model tui
    builds for the profile (`ours`) or pydantic-ai's own `OpenAIChatModel`."""
    from openai import AsyncOpenAI
    from pydantic_ai.messages import ModelRequest
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from tui.config import Config
    from tui.worker.agents._provider import build_model

    if ours:
        profile = {"provider": "openai", "model": "fake", "base_url": server.url}
        model = build_model(Config.model_validate({"models": {"local": profile}}).models["local"])
    else:
        sdk = AsyncOpenAI(api_key="none", base_url=server.url, max_retries=0)
        model = OpenAIChatModel("fake", provider=OpenAIProvider(openai_client=sdk))
    prompt = [ModelRequest.user_text_prompt("a long answer please")]
    async with model.request_stream(prompt, None, ModelRequestParameters()) as stream:
        async for _ in stream:
            pass
    end = time.monotonic()
    text = stream.get().parts[0]
    assert getattr(text, "content", "") == "tok " * TOKENS
    return TOKENS / (end - await server.first_byte_at())


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


def send_wait(sid: str, server: Server) -> tuple[float, float]:
    """Seconds of ``tui send ID --wait`` and of the raw SDK script, each printing the answer."""
    began = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "tui", "send", sid, "a long answer please", "--wait"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    ours = time.monotonic() - began
    assert out.count("tok") == TOKENS, out[-300:]
    began = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", RAW_SCRIPT, server.url], capture_output=True, text=True, check=True
    ).stdout
    raw = time.monotonic() - began
    assert out.count("tok") == TOKENS
    return ours, raw


async def interrupt(client: httpx.AsyncClient, runs: int = 5) -> list[float]:
    times = []
    for _ in range(runs):
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


async def run(sock: str, sid: str, server: Server) -> None:
    async with httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(uds=sock), base_url="http://w", timeout=60
    ) as c:
        await c.post("/turn", json={"prompt": "warm up"})
        async for kind, _ in _events(c, 0):
            if kind == "turn_ended":
                break
        print(f"load average {os.getloadavg()[0]:.2f}; {PAIRS} interleaved pairs each")
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
        print(f"interrupt mid-stream to turn_ended at the client: {ms(await interrupt(c))}")
        await c.post("/leave", json={})
    built, plain, raws = [], [], []
    for _ in range(PAIRS):
        built.append(await model_alone(server, ours=True))
        plain.append(await model_alone(server, ours=False))
        raws.append((await raw_sdk(server))[0])
    print(
        f"request_stream alone, in this process: the model tui builds {statistics.median(built):,.0f} "
        f"tokens/s ({statistics.median(a / b for a, b in zip(built, raws, strict=True)):.2f}x); "
        f"pydantic-ai's OpenAIChatModel {statistics.median(plain):,.0f} "
        f"({statistics.median(a / b for a, b in zip(plain, raws, strict=True)):.2f}x); "
        f"raw SDK {statistics.median(raws):,.0f}"
    )


async def warm(sock: str) -> None:
    """One turn, so that the worker has imported its provider's SDK before it is measured."""
    async with httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(uds=sock), base_url="http://w", timeout=60
    ) as c:
        await c.post("/turn", json={"prompt": "warm up"})
        async for kind, _ in _events(c, 0):
            if kind == "turn_ended":
                break


def main() -> None:
    only_first = "--first-token" in sys.argv[1:]
    server = Server()
    with tempfile.TemporaryDirectory(prefix="tui-bench-", dir="/tmp") as d:
        config = Path(d) / "config"
        config.mkdir()
        profiles = [f'[models.local]\nprovider = "openai"\nmodel = "fake"\nbase_url = "{server.url}"\n']
        for i, lines in enumerate(APIS.values()):
            profiles.append(
                f'[models.api{i}]\nmodel = "fake"\n{lines.format(url=server.url, root=server.root)}\n'
            )
        (config / "config.toml").write_text("\n".join(profiles))
        os.environ["TUI_CONFIG_DIR"] = str(config)
        os.environ["TUI_STATE_DIR"] = str(Path(d) / "state")
        state = StatePaths(Path(d) / "state")
        workdir = Path(d) / "work"
        workdir.mkdir()
        try:
            socks = {}
            for i, api in enumerate(APIS):
                session = create_session(state, working_directory=workdir, agent="model", model=f"api{i}")
                socks[api] = start_worker(state, session.id).socket
                asyncio.run(warm(socks[api]))
            print(f"load average {os.getloadavg()[0]:.2f}; {PAIRS} interleaved rounds")
            asyncio.run(first_tokens(socks, server))
            if not only_first:
                sid = create_session(state, working_directory=workdir, agent="model", model="local").id
                car = start_worker(state, sid)
                asyncio.run(run(car.socket, sid, server))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
