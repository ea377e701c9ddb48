"""The model agent's logic with pydantic-ai's `FunctionModel`: streaming, tools in the real sandbox,
questions, the conversation kept across workers, interrupts, retries and failures (no network)."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import TIMEOUT
from pydantic_ai.exceptions import ModelAuthenticationError, ModelRateLimitError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaThinkingPart, DeltaToolCall, FunctionModel

from tui.codemode.sandbox import landlock_abi
from tui.config import Config, ModelProfile
from tui.worker.agent import Answer, QuestionDismissed
from tui.worker.agents._history import INTERRUPTED_CALL, MessageLog, fit_context, repair
from tui.worker.agents.model import ModelAgent

CONFIG = Config.model_validate(
    {"models": {"local": {"provider": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}}}
)


class Turn:
    """A turn as the agent sees it, recording every call as an event."""

    def __init__(self, prompt: str, answer: Answer | Exception | None = None) -> None:
        self.prompt = prompt
        self.turn_id = "t1"
        self.number = 1
        self.images: list[Path] = []
        self.interrupted = False
        self.events: list[tuple[str, Any]] = []
        self.answer = answer
        self.spent: dict[str, int] = {}
        self.first_text = asyncio.Event()
        self.delivered_after: list[str] = []
        """The reply so far each time the agent waited for the followers (`TurnIO.delivered`)."""

    @property
    def reply(self) -> str:
        return "".join(v for k, v in self.events if k == "text")

    def of(self, kind: str) -> list[Any]:
        return [v for k, v in self.events if k == kind]

    def text(self, text: str) -> None:
        self.events.append(("text", text))
        self.first_text.set()

    def thinking(self, text: str) -> None:
        self.events.append(("thinking", text))

    async def delivered(self) -> None:
        self.delivered_after.append(self.reply)

    def plan(self, entries: Any) -> None:
        self.events.append(("plan", entries))

    def tool_started(self, name: str, args: dict[str, Any], **_: Any) -> str:
        self.events.append(("tool_started", (name, args)))
        return f"c{len(self.of('tool_started'))}"

    def tool_output(self, call_id: str, text: str, diff: Any = None) -> None:
        self.events.append(("tool_output", (call_id, text)))

    def tool_ended(self, call_id: str, status: str, value: Any = None, error: str | None = None) -> None:
        self.events.append(("tool_ended", (call_id, status, error)))

    def usage(self, *, input: int = 0, output: int = 0, cached: int = 0) -> None:
        self.spent = {"input": input, "output": output, "cached": cached}

    def spend(self, cost: float | None = None, *, tokens: int | None = None) -> bool:
        return False

    def context(self, used: int, limit: int) -> None:
        self.events.append(("context", (used, limit)))

    def activity(self, text: str) -> None:
        self.events.append(("activity", text))

    def note(self, text: str) -> None:
        self.events.append(("note", text))

    async def ask(self, text: str, options: list[Any], *, multiple: bool, freeform: bool) -> Answer:
        self.events.append(("ask", (text, [o.label for o in options])))
        if isinstance(self.answer, Exception):
            raise self.answer
        assert self.answer is not None, "no question was expected"
        return self.answer


def _parts(messages: list[ModelMessage], kind: type) -> list[Any]:
    return [p for m in messages for p in m.parts if isinstance(p, kind)]


def agent_with(
    stream: Any, folder: Path, *, workdir: Path | None = None, sleeps: list[float] | None = None
) -> ModelAgent:
    async def sleep(seconds: float) -> None:
        if sleeps is not None:
            sleeps.append(seconds)

    return ModelAgent(
        config=CONFIG,
        model="local",
        workdir=workdir or folder,
        messages=folder / "messages.jsonl",
        make_model=lambda profile: FunctionModel(stream_function=stream),
        sleep=sleep,
    )


@pytest.fixture
def sandbox_dir() -> Iterator[Path]:
    if shutil.which("bwrap") is None and landlock_abi() < 1:
        pytest.skip("neither bubblewrap nor Landlock is available (apt install bubblewrap)")
    with tempfile.TemporaryDirectory(prefix="tui-ma-", dir="/tmp") as root:
        yield Path(root)


class TestStreaming:
    async def test_text_and_thinking_stream_and_the_turn_is_kept(self, tmp_path: Path) -> None:
        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
            yield {0: DeltaThinkingPart(content="let me think")}
            yield "Hello, "
            yield "**world**."

        agent = agent_with(stream, tmp_path)
        turn = Turn("hi")
        outcome = await agent.run_turn(turn)  # type: ignore[arg-type]
        assert outcome.outcome == "completed"
        assert turn.reply == "Hello, **world**."
        assert turn.of("thinking") == ["let me think"]
        assert turn.spent["input"] > 0 and turn.spent["output"] > 0
        used, window = turn.of("context")[-1]
        assert used > 0 and window == 32_768
        kept = MessageLog(tmp_path / "messages.jsonl").load()
        assert [type(m) for m in kept] == [ModelRequest, ModelResponse]
        assert "hi" in json.dumps([p.content for p in _parts(kept, UserPromptPart)])

    async def test_many_chunks_go_out_in_few_events_in_order_before_a_tool_call(self, tmp_path: Path) -> None:
        chunks = [f"w{i} " for i in range(300)]

        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
            if _parts(messages[-1:], ToolReturnPart):
                yield "done"
                return
            yield {0: DeltaThinkingPart(content="hm")}
            for chunk in chunks:
                yield chunk
            yield {1: DeltaToolCall(name="ask_user", json_args=json.dumps({"question": "Go?"}))}

        turn = Turn("talk", answer=Answer(selected=[], freeform="yes"))
        assert (await agent_with(stream, tmp_path).run_turn(turn)).outcome == "completed"  # type: ignore[arg-type]
        said = [(kind, v) for kind, v in turn.events if kind in ("thinking", "text", "tool_started")]
        asked = [kind for kind, _ in said].index("tool_started")
        assert said[0] == ("thinking", "hm") and {kind for kind, _ in said[1:asked]} == {"text"}
        assert "".join(v for _, v in said[1:asked]) == "".join(chunks)  # all sent before the call
        assert asked - 1 < len(chunks) // 2  # batched: far fewer events than chunks
        assert turn.reply == "".join(chunks) + "\n\ndone"

    async def test_an_empty_reply_completes_empty(self, tmp_path: Path) -> None:
        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
            yield ""

        turn = Turn("say nothing")
        outcome = await agent_with(stream, tmp_path).run_turn(turn)  # type: ignore[arg-type]
        assert outcome.outcome == "completed" and turn.reply == ""

    async def test_a_new_worker_continues_the_conversation_and_is_told_the_interpreter_is_new(
        self, tmp_path: Path
    ) -> None:
        seen: list[list[ModelMessage]] = []

        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
            seen.append(messages)
            yield f"answer {len(seen)}"

        await agent_with(stream, tmp_path).run_turn(Turn("first"))  # type: ignore[arg-type]
        await agent_with(stream, tmp_path).run_turn(Turn("second"))  # type: ignore[arg-type]
        prompts = [p.content for p in _parts(seen[-1], UserPromptPart)]
        assert prompts[0] == "first" and prompts[-1].endswith("second")
        assert "started afresh" in prompts[-1]
        assert [p.content for p in _parts(seen[-1], TextPart)] == ["answer 1"]


class TestTools:
    async def test_run_python_runs_in_the_sandbox_and_the_model_reads_its_output(
        self, tmp_path: Path, sandbox_dir: Path
    ) -> None:
        results: list[str] = []

        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
            returned = _parts(messages[-1:], ToolReturnPart)
            if returned:
                results.append(str(returned[0].content))
                yield "It is 42."
                return
            yield {
                0: DeltaToolCall(
                    name="run_python", json_args=json.dumps({"code": "x = 6 * 7\nprint('x is', x)\nx"})
                )
            }

        agent = agent_with(stream, tmp_path, workdir=sandbox_dir)
        try:
            turn = Turn("what is 6*7?")
            assert (await agent.run_turn(turn)).outcome == "completed"  # type: ignore[arg-type]
            assert turn.reply == "It is 42."
            assert turn.of("tool_started")[0] == ("run_python", {"code": "x = 6 * 7\nprint('x is', x)\nx"})
            assert "".join(t for _, t in turn.of("tool_output")) == "x is 42\n"
            assert turn.of("tool_ended")[0][1] == "completed"
            assert results == ["x is 42\n42"]
            # the person's `!` line runs in the same namespace, and the model reads it next turn
            bang = Turn("!print(x + 1)")
            assert (await agent.run_turn(bang)).outcome == "completed"  # type: ignore[arg-type]
            assert bang.reply == "```\n43\n```\n"
            quiet = Turn("!y = 1")
            assert (await agent.run_turn(quiet)).outcome == "completed"  # type: ignore[arg-type]
            assert quiet.reply == "*(no output)*\n"  # not an empty reply (a piped run's exit 5)
            results.clear()
            later = Turn("and now?")
            await agent.run_turn(later)  # type: ignore[arg-type]
            kept = MessageLog(tmp_path / "messages.jsonl").load()
            last_prompt = [p.content for p in _parts(kept, UserPromptPart)]
            assert any("print(x + 1)" in str(p) and "43" in str(p) for p in last_prompt)
        finally:
            await agent.close()

    async def test_a_long_program_answers_still_working_then_wait_python(
        self, tmp_path: Path, sandbox_dir: Path
    ) -> None:
        results: list[str] = []
        program = "import time\nprint('a', flush=True)\ntime.sleep(0.6)\nprint('b')"

        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
            returned = _parts(messages[-1:], ToolReturnPart)
            if not returned:
                yield {0: DeltaToolCall(name="run_python", json_args=json.dumps({"code": program}))}
                return
            results.append(str(returned[0].content))
            if "still_working" in results[-1]:
                yield {0: DeltaToolCall(name="wait_python", json_args="{}")}
                return
            yield "done"

        agent = agent_with(stream, tmp_path, workdir=sandbox_dir)
        agent.run_budget = 0.2
        try:
            turn = Turn("run it")
            assert (await agent.run_turn(turn)).outcome == "completed"  # type: ignore[arg-type]
            assert "still_working" in results[0] and results[0].startswith("a\n")
            assert results[-1].startswith("b")
            ended = [e[1] for e in turn.of("tool_ended")]
            assert ended[-1] == "completed" and set(ended[:-1]) == {"still_working"}
        finally:
            await agent.close()

    @pytest.mark.parametrize(
        ("answer", "told"),
        [(Answer(selected=["yes"]), '"yes"'), (QuestionDismissed("dismissed"), "declined")],
    )
    async def test_ask_user_is_a_question(self, tmp_path: Path, answer: Any, told: str) -> None:
        results: list[str] = []

        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
            returned = _parts(messages[-1:], ToolReturnPart)
            if returned:
                results.append(str(returned[0].content))
                yield "ok"
                return
            args = {"question": "Deploy?", "options": ["yes", "no"]}
            yield {0: DeltaToolCall(name="ask_user", json_args=json.dumps(args))}

        turn = Turn("deploy it", answer=answer)
        assert (await agent_with(stream, tmp_path).run_turn(turn)).outcome == "completed"  # type: ignore[arg-type]
        assert turn.of("ask") == [("Deploy?", ["yes", "no"])]
        assert told in results[0]


class TestInterrupt:
    async def test_an_interrupt_ends_the_stream_at_once_and_keeps_the_partial_reply(
        self, tmp_path: Path
    ) -> None:
        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
            yield "partial "
            await asyncio.sleep(60)
            yield "never"

        agent = agent_with(stream, tmp_path)
        turn = Turn("go on")
        running = asyncio.create_task(agent.run_turn(turn))  # type: ignore[arg-type]
        await asyncio.wait_for(turn.first_text.wait(), TIMEOUT)
        turn.interrupted = True
        agent.interrupt()
        outcome = await asyncio.wait_for(running, TIMEOUT)  # the stream sleeps 60 s: only a cancel ends it
        assert outcome.outcome == "interrupted" and turn.reply == "partial "
        kept = MessageLog(tmp_path / "messages.jsonl").load()
        assert [p.content for p in _parts(kept, TextPart)] == ["partial "]

    def test_a_dangling_tool_call_gets_a_result_saying_it_was_interrupted(self) -> None:
        call = ToolCallPart(tool_name="run_python", args={"code": "1"}, tool_call_id="c1")
        messages: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart("hi")]),
            ModelResponse(parts=[call]),
            ModelRequest(parts=[]),
            ModelRequest(parts=[UserPromptPart("next")]),
        ]
        fixed = repair(messages)
        assert [type(m) for m in fixed] == [ModelRequest, ModelResponse, ModelRequest]
        returned = _parts(fixed, ToolReturnPart)
        assert returned[0].tool_call_id == "c1" and returned[0].content == INTERRUPTED_CALL
        assert [p.content for p in _parts(fixed[2:], UserPromptPart)] == ["next"]
        # a conversation that ends on the call is answered too
        assert _parts(repair(messages[:2]), ToolReturnPart)[0].tool_call_id == "c1"

    def test_a_torn_last_line_is_skipped(self, tmp_path: Path) -> None:
        log = MessageLog(tmp_path / "messages.jsonl")
        log.append([ModelRequest(parts=[UserPromptPart("hi")]), ModelResponse(parts=[TextPart("yo")])])
        with (tmp_path / "messages.jsonl").open("ab") as f:
            f.write(b'[{"parts": [')
        assert len(log.load()) == 2


class TestFailures:
    async def test_a_rate_limit_is_retried_after_the_time_asked_and_said_in_the_status_row(
        self, tmp_path: Path
    ) -> None:
        tries: list[int] = []

        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
            tries.append(1)
            if len(tries) < 3:
                raise ModelRateLimitError("m", "slow down", retry_after=2.0)
            yield "finally"

        sleeps: list[float] = []
        turn = Turn("hi")
        outcome = await agent_with(stream, tmp_path, sleeps=sleeps).run_turn(turn)  # type: ignore[arg-type]
        assert outcome.outcome == "completed" and turn.reply == "finally"
        assert sleeps == [2.0, 2.0]
        assert "retrying in 2 s (rate-limited)" in turn.of("activity")

    async def test_three_failures_fail_the_turn_with_one_line(self, tmp_path: Path) -> None:
        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
            raise ModelRateLimitError("m", "slow down")
            yield ""

        sleeps: list[float] = []
        outcome = await agent_with(stream, tmp_path, sleeps=sleeps).run_turn(Turn("hi"))  # type: ignore[arg-type]
        assert outcome.outcome == "failed" and outcome.error is not None
        assert "failed 3 times (rate-limited)" in outcome.error and "\n" not in outcome.error
        assert sleeps == [1.0, 4.0]

    async def test_a_refused_key_names_the_variable(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
            raise ModelAuthenticationError("m", "bad key")
            yield ""

        monkeypatch.setenv("MY_KEY", "k")
        agent = agent_with(stream, tmp_path)
        agent.config = Config.model_validate(
            {"models": {"local": {"provider": "anthropic", "model": "c", "api_key_env": "MY_KEY"}}}
        )
        outcome = await agent.run_turn(Turn("hi"))  # type: ignore[arg-type]
        assert outcome.error is not None and "MY_KEY" in outcome.error and "refused the key" in outcome.error

    async def test_a_missing_key_fails_before_any_request(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
        agent = agent_with(None, tmp_path)
        agent.model = "anthropic:claude-sonnet-4-5"
        outcome = await agent.run_turn(Turn("hi"))  # type: ignore[arg-type]
        assert outcome.outcome == "failed" and "set ANTHROPIC_API_KEY" in (outcome.error or "")


class TestContextRule:
    def test_the_oldest_turns_are_dropped_when_the_window_nears(self) -> None:
        messages: list[ModelMessage] = []
        for i in range(10):
            messages += [
                ModelRequest(parts=[UserPromptPart(f"q{i} " + "x" * 400)]),
                ModelResponse(parts=[TextPart("a")]),
            ]
        kept, dropped = fit_context(messages, window=100_000)
        assert dropped == 0 and kept == messages
        total = sum(len(json.dumps(str(m))) for m in messages) // 4
        kept, dropped = fit_context(messages, window=total)
        assert dropped > 0 and kept == messages[2 * dropped :]
        assert isinstance(kept[0], ModelRequest)

    async def test_the_transcript_says_so(self, tmp_path: Path) -> None:
        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
            yield "y" * 2000

        agent = agent_with(stream, tmp_path)
        agent.config = Config.model_validate(
            {
                "models": {
                    "local": {
                        "provider": "openai",
                        "model": "m",
                        "base_url": "http://x/v1",
                        "context_window": 1000,
                    }
                }
            }
        )
        await agent.run_turn(Turn("one"))  # type: ignore[arg-type]
        turn = Turn("two")
        await agent.run_turn(turn)  # type: ignore[arg-type]
        assert any("oldest 1 turn are left out" in n for n in turn.of("note"))


def test_profiles_resolve_provider_model_names() -> None:
    assert Config().model_profile("openai:gpt-5") == ModelProfile(provider="openai", model="gpt-5")
