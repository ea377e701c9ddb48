"""The model agent's HTTP path: the providers' real SDKs (through pydantic-ai) against a loopback
server of ours speaking OpenAI Chat Completions and Anthropic Messages SSE."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis.internal.observability  # noqa: F401
import pytest
from fake_model_server import Call, Drop, Fail, FakeModelServer, Hang, Text
from helpers import TIMEOUT

from tui.config import Config
from tui.worker.agent import Answer
from tui.worker.agents.model import ModelAgent

from .test_model_agent import Turn

# (hypothesis is imported above, before the SDKs run: its pytest plugin imports it at the end of a
# run otherwise, and CPython 3.11's AST validator then failed with "recursion depth mismatch"
# after the Anthropic streams of this module, though every test had passed.)

KEY = "sk-test-secret-123"


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as running:
        yield running


def agent_for(
    server: FakeModelServer, folder: Path, provider: str = "openai", *, sleeps: list[float] | None = None
) -> ModelAgent:
    url = server.url if provider == "openai" else server.root
    profile = {"provider": provider, "model": "fake-1", "base_url": url, "api_key_env": "FAKE_KEY"}

    async def sleep(seconds: float) -> None:
        if sleeps is not None:
            sleeps.append(seconds)

    return ModelAgent(
        config=Config.model_validate({"models": {"local": profile}}),
        model="local",
        workdir=folder,
        messages=folder / "messages.jsonl",
        sleep=sleep,
    )


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KEY", KEY)


PROVIDERS = ["openai", "anthropic"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_text_streams_with_usage_and_the_key_stays_out_of_the_conversation(
    server: FakeModelServer, tmp_path: Path, provider: str
) -> None:
    server.script(Text(["Hel", "lo ", "there."], usage=(30, 7)))
    turn = Turn("hi")
    outcome = await agent_for(server, tmp_path, provider).run_turn(turn)  # type: ignore[arg-type]
    assert outcome.outcome == "completed", outcome.error
    assert turn.reply == "Hello there."
    assert turn.spent["input"] == 30 and turn.spent["output"] == 7
    sent = server.headers[0]
    assert KEY in (sent.get("authorization", "") + sent.get("x-api-key", ""))
    assert KEY not in (tmp_path / "messages.jsonl").read_text()


async def test_anthropic_thinking_streams_as_thinking(server: FakeModelServer, tmp_path: Path) -> None:
    server.script(Text(["Yes."], thinking=["consider ", "it"]))
    turn = Turn("hi")
    await agent_for(server, tmp_path, "anthropic").run_turn(turn)  # type: ignore[arg-type]
    assert "".join(turn.of("thinking")) == "consider it" and turn.reply == "Yes."


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_tool_call_streamed_in_deltas_runs_and_the_model_reads_the_result(
    server: FakeModelServer, tmp_path: Path, provider: str
) -> None:
    server.script(Call("ask_user", {"question": "Deploy?", "options": ["yes", "no"]}, text="Let me ask.\n"))
    turn = Turn("deploy", answer=Answer(selected=["no"]))
    outcome = await agent_for(server, tmp_path, provider).run_turn(turn)  # type: ignore[arg-type]
    assert outcome.outcome == "completed", outcome.error
    assert turn.of("ask") == [("Deploy?", ["yes", "no"])]
    assert turn.reply.startswith("Let me ask.\n") and '"no"' in turn.reply  # the default reply quotes it
    assert '"no"' in str(server.requests[-1]["messages"][-1])


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_429_is_retried_after_retry_after(
    server: FakeModelServer, tmp_path: Path, provider: str
) -> None:
    server.script(Fail(429, "slow down", headers={"retry-after": "3"}, kind="rate_limit_error"), Text(["ok"]))
    sleeps: list[float] = []
    turn = Turn("hi")
    outcome = await agent_for(server, tmp_path, provider, sleeps=sleeps).run_turn(turn)  # type: ignore[arg-type]
    assert outcome.outcome == "completed" and turn.reply == "ok"
    assert sleeps == [3.0] and len(server.requests) == 2
    assert turn.of("activity")[0].startswith("retrying in 3 s")


async def test_a_500_three_times_fails_with_one_line(server: FakeModelServer, tmp_path: Path) -> None:
    server.script(*[Fail(500, "boom")] * 3)
    sleeps: list[float] = []
    outcome = await agent_for(server, tmp_path, sleeps=sleeps).run_turn(Turn("hi"))  # type: ignore[arg-type]
    assert outcome.outcome == "failed" and "failed 3 times (HTTP 500)" in (outcome.error or "")
    assert len(server.requests) == 3 and len(sleeps) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_401_names_the_variable(server: FakeModelServer, tmp_path: Path, provider: str) -> None:
    server.script(Fail(401, "invalid key", kind="authentication_error"))
    outcome = await agent_for(server, tmp_path, provider).run_turn(Turn("hi"))  # type: ignore[arg-type]
    assert outcome.outcome == "failed" and "FAKE_KEY" in (outcome.error or "")
    assert KEY not in (outcome.error or "")
    assert len(server.requests) == 1


async def test_a_dropped_connection_fails_and_keeps_the_partial_text(
    server: FakeModelServer, tmp_path: Path
) -> None:
    server.script(Drop(["half ", "an answer"]))
    turn = Turn("hi")
    outcome = await agent_for(server, tmp_path).run_turn(turn)  # type: ignore[arg-type]
    assert outcome.outcome == "failed" and "\n" not in (outcome.error or "")
    assert turn.reply == "half an answer"


async def test_an_unreachable_server_is_named(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = FakeModelServer()
    server.port = port  # nothing listens there
    outcome = await agent_for(server, tmp_path).run_turn(Turn("hi"))  # type: ignore[arg-type]
    assert outcome.outcome == "failed"
    assert f"cannot reach http://127.0.0.1:{port}/v1" in (outcome.error or "")


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_interrupt_cancels_the_http_stream(
    server: FakeModelServer, tmp_path: Path, provider: str
) -> None:
    server.script(Hang(["thinking about it "]))
    agent = agent_for(server, tmp_path, provider)
    turn = Turn("hi")
    running: asyncio.Task[Any] = asyncio.create_task(agent.run_turn(turn))  # type: ignore[arg-type]
    await asyncio.wait_for(turn.first_text.wait(), TIMEOUT)
    turn.interrupted = True
    agent.interrupt()
    outcome = await asyncio.wait_for(running, TIMEOUT)  # the stream never ends: only a cancel ends it
    assert outcome.outcome == "interrupted" and turn.reply == "thinking about it "
