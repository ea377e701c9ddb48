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
from fake_model_server import Broken, Call, Drop, Fail, FakeModelServer, Hang, Text
from helpers import TIMEOUT
from pydantic_ai.messages import ModelRequest
from pydantic_ai.models import ModelRequestParameters

from tui.config import Config
from tui.worker.agent import Answer
from tui.worker.agents._provider import build_model
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


def config_for(server: FakeModelServer, provider: str = "openai") -> Config:
    url = server.url if provider == "openai" else server.root
    profile = {"provider": provider, "model": "fake-1", "base_url": url, "api_key_env": "FAKE_KEY"}
    return Config.model_validate({"models": {"local": profile}})


def agent_for(
    server: FakeModelServer, folder: Path, provider: str = "openai", *, sleeps: list[float] | None = None
) -> ModelAgent:

    async def sleep(seconds: float) -> None:
        if sleeps is not None:
            sleeps.append(seconds)

    return ModelAgent(
        config=config_for(server, provider),
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


async def test_chunks_that_arrive_together_reach_pydantic_ai_merged(server: FakeModelServer) -> None:
    """A server faster than the worker: pydantic-ai's per-chunk work is done once for the chunks
    that wait together, not once a token (what keeps the worker near the SDK's own rate)."""
    words = [f"w{i} " for i in range(2000)]
    server.script(Text(words, usage=(30, 2000), burst=True))
    model = build_model(config_for(server).models["local"])
    prompt = [ModelRequest.user_text_prompt("a long answer please")]
    async with model.request_stream(prompt, None, ModelRequestParameters()) as stream:
        events = [event async for event in stream]
    assert [part.content for part in stream.get().parts] == ["".join(words)]  # type: ignore[union-attr]
    assert stream.usage.output_tokens == 2000
    assert len(events) < len(words) // 4


async def test_reasoning_and_text_arriving_together_stay_apart_and_whole(
    server: FakeModelServer, tmp_path: Path
) -> None:
    thinking = [f"r{i} " for i in range(500)]
    words = [f"w{i} " for i in range(500)]
    server.script(Text(words, thinking=thinking, burst=True))
    turn = Turn("hi")
    outcome = await agent_for(server, tmp_path).run_turn(turn)  # type: ignore[arg-type]
    assert outcome.outcome == "completed", outcome.error
    assert "".join(turn.of("thinking")) == "".join(thinking) and turn.reply == "".join(words)
    kinds = [k for k, _ in turn.events if k in ("thinking", "text")]
    assert kinds == ["thinking"] * kinds.count("thinking") + ["text"] * kinds.count("text")


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_long_reply_in_tiny_chunks_around_a_tool_call_arrives_whole_and_in_order(
    server: FakeModelServer, tmp_path: Path, provider: str
) -> None:
    before = [f"a{i} " for i in range(1500)]
    after = [f"b{i} " for i in range(1500)]
    args = {"question": "Deploy?", "options": ["yes", "no"]}
    server.script(Call("ask_user", args, chunks=before, burst=True), Text(after, burst=True))
    turn = Turn("deploy", answer=Answer(selected=["no"]))
    outcome = await agent_for(server, tmp_path, provider).run_turn(turn)  # type: ignore[arg-type]
    assert outcome.outcome == "completed", outcome.error
    kinds = [kind for kind, _ in turn.events]
    asked = kinds.index("tool_started")
    said = ["".join(v for k, v in part if k == "text") for part in (turn.events[:asked], turn.events[asked:])]
    assert said == ["".join(before), "\n\n" + "".join(after)]
    assert turn.events[asked][1] == ("ask_user", {**args, "multiple": False, "freeform": True})
    assert turn.of("ask") == [("Deploy?", ["yes", "no"])]
    assert '"no"' in str(server.requests[-1]["messages"][-1])  # the model read the answer
    assert turn.spent == {"input": 32, "output": 13, "cached": 0}  # both requests counted


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_interrupt_mid_stream_leaves_no_task_running(
    server: FakeModelServer, tmp_path: Path, provider: str
) -> None:
    words = [f"t{i} " for i in range(500)]
    server.script(Hang(words))
    before = asyncio.all_tasks()
    agent = agent_for(server, tmp_path, provider)
    turn = Turn("hi")
    running: asyncio.Task[Any] = asyncio.create_task(agent.run_turn(turn))  # type: ignore[arg-type]
    await asyncio.wait_for(turn.first_text.wait(), TIMEOUT)
    turn.interrupted = True
    agent.interrupt()
    outcome = await asyncio.wait_for(running, TIMEOUT)  # the stream never ends: only a cancel ends it
    assert outcome.outcome == "interrupted"
    assert turn.reply and "".join(words).startswith(turn.reply)
    assert asyncio.all_tasks() - before == set()


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_error_in_the_stream_fails_the_turn_with_its_message(
    server: FakeModelServer, tmp_path: Path, provider: str
) -> None:
    server.script(Broken(["half ", "an answer"], "the server is overloaded"))
    turn = Turn("hi")
    outcome = await agent_for(server, tmp_path, provider).run_turn(turn)  # type: ignore[arg-type]
    assert outcome.outcome == "failed"
    assert "the server is overloaded" in (outcome.error or "") and "\n" not in (outcome.error or "")
    assert turn.reply == "half an answer"


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(("finish", "stop"), [("length", "max_tokens"), ("content_filter", "refusal")])
async def test_a_reply_the_model_cut_short_says_why(
    server: FakeModelServer, tmp_path: Path, provider: str, finish: str, stop: str
) -> None:
    server.script(Text(["The answer ", "is"], finish=finish))
    turn = Turn("hi")
    outcome = await agent_for(server, tmp_path, provider).run_turn(turn)  # type: ignore[arg-type]
    assert (outcome.outcome, outcome.stop_reason) == ("completed", stop), outcome.error
    assert turn.reply == "The answer is"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_reply_cut_before_it_said_anything_is_max_tokens_not_a_failure(
    server: FakeModelServer, tmp_path: Path, provider: str
) -> None:
    server.script(Text([], finish="length"))
    outcome = await agent_for(server, tmp_path, provider).run_turn(Turn("hi"))  # type: ignore[arg-type]
    assert (outcome.outcome, outcome.stop_reason) == ("completed", "max_tokens"), outcome.error


async def test_a_reply_the_model_ended_says_no_stop_reason(server: FakeModelServer, tmp_path: Path) -> None:
    server.script(Text(["Done."]))
    outcome = await agent_for(server, tmp_path).run_turn(Turn("hi"))  # type: ignore[arg-type]
    assert (outcome.outcome, outcome.stop_reason) == ("completed", None)


async def test_a_turn_at_its_limit_of_model_requests_is_max_turn_requests(
    server: FakeModelServer, tmp_path: Path
) -> None:
    # pydantic-ai's default limit: 50 requests in one run; a model that only ever asks reaches it.
    server.script(*[Call("ask_user", {"question": "Again?", "options": ["yes"]})] * 60)
    turn = Turn("loop", answer=Answer(selected=["yes"]))
    outcome = await agent_for(server, tmp_path).run_turn(turn)  # type: ignore[arg-type]
    assert (outcome.outcome, outcome.stop_reason) == ("completed", "max_turn_requests"), outcome.error
    assert len(server.requests) == 50
