"""The first text of a reply leaves the model agent before the burst that arrived with it is read,
for each API a model profile speaks (Chat Completions, Responses, Anthropic Messages).

The loopback server sends the first text and 250 more chunks in one write and holds the stream's
end. A task beside the agent (as the worker's event stream is, the way to every follower) waits
for the first text and interrupts the turn as a person would: the agent gave the loop a turn right
after the first text, so the reply is that text alone. An agent that read what had arrived before
giving the loop a turn had the whole burst in the reply by then."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import hypothesis.internal.observability  # noqa: F401  (see test_model_http.py)
import pytest
from fake_model_server import FakeModelServer, Text
from helpers import TIMEOUT

from tui.config import Config
from tui.worker.agents.model import ModelAgent

from .test_model_agent import Turn

APIS = {
    "chat": {"provider": "openai"},
    "responses": {"provider": "openai", "api": "responses"},
    "anthropic": {"provider": "anthropic"},
}


@pytest.mark.parametrize("api", list(APIS))
async def test_the_first_text_reaches_a_follower_before_the_burst_behind_it_is_read(
    tmp_path: Path, api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", "sk-test")
    seen = threading.Event()
    with FakeModelServer() as server:
        server.script(Text(["first "] + ["tok "] * 250, until=seen))
        url = server.root if api == "anthropic" else server.url
        profile = {**APIS[api], "model": "fake-1", "base_url": url, "api_key_env": "FAKE_KEY"}
        agent = ModelAgent(
            config=Config.model_validate({"models": {"local": profile}}),
            model="local",
            workdir=tmp_path,
            messages=tmp_path / "messages.jsonl",
        )
        turn = Turn("hi")

        async def follower() -> None:
            await turn.first_text.wait()
            turn.interrupted = True
            agent.interrupt()

        following = asyncio.create_task(follower())
        try:
            outcome = await asyncio.wait_for(agent.run_turn(turn), TIMEOUT)  # type: ignore[arg-type]
        finally:
            seen.set()  # the server's stream may end now
        await following
        assert outcome.outcome == "interrupted", outcome.error
        assert turn.reply == "first "  # before the fix: "first " and 250 "tok "
        # the agent waited for the followers' streams right after the first text, before reading on
        assert turn.delivered_after[:1] == ["first "]
