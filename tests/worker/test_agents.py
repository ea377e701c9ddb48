"""The agent contract: the registry of kinds, `AgentContext`, every `TurnIO` call becoming its
journal event, `/model` decided by the agent, and `/info` saying how to show replies."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from helpers import worker_here

from tui.config import Config, load_config
from tui.errors import InvalidModel, InvalidRequest, TuiError
from tui.protocol import AgentCommand, Diff, ImageRef, PlanEntry, TurnRequest
from tui.store import StatePaths, create_session
from tui.worker.agent import Agent, AgentContext, TurnIO, TurnOutcome
from tui.worker.agents import agent_class, check_agent, kind_of, kinds, register
from tui.worker.agents.python import PythonAgent
from tui.worker.core import SessionWorker
from tui.worker.process import agent_context

TIMEOUT = 20.0


@register("fake")
class FakeAgent(Agent):
    """Runs `script` for each turn: a test's way to call each `TurnIO` method."""

    name: ClassVar[str] = "fake"
    script: ClassVar[Callable[[TurnIO], Any] | None] = None
    models: ClassVar[tuple[str, ...]] = ("small", "big")

    def __init__(self, context: AgentContext) -> None:
        self.context = context
        self.model = "small"
        self.seen_images: list[Path] = []

    @classmethod
    def from_context(cls, context: AgentContext) -> FakeAgent:
        return cls(context)

    async def run_turn(self, turn: TurnIO) -> TurnOutcome:
        self.seen_images = list(turn.images)
        script = type(self).script  # the plain function, not bound to this agent
        if script is not None:
            script(turn)
        return TurnOutcome("completed")

    def set_model(self, model: str) -> None:
        if model not in self.models:
            raise InvalidModel(f"no model {model!r}")
        self.model = model


@pytest.fixture
async def session(state_dir: Path, tmp_path: Path) -> AsyncIterator[SessionWorker]:
    worker = worker_here(state_dir, tmp_path, "fake")
    yield worker
    await worker.leave("test over")


def journal_events(worker: SessionWorker) -> list[dict[str, Any]]:
    return [json.loads(line) for line in worker.writer.paths.journal.read_text().splitlines()]


async def run(worker: SessionWorker, script: Callable[[TurnIO], Any], **request: Any) -> dict[str, Any]:
    """Run one turn of `script` and return its `turn_ended` event as journalled."""
    FakeAgent.script = script
    try:
        accepted = worker.control.submit(TurnRequest(prompt="go", **request))
        turn = worker.control.turn
        task = turn.task if turn is not None else None  # the turn's own task: its end
        assert task is not None
        await asyncio.wait_for(task, TIMEOUT)
    finally:
        FakeAgent.script = None
    return next(
        e for e in journal_events(worker) if e["type"] == "turn_ended" and e["turn_id"] == accepted.turn_id
    )


async def test_each_turn_io_call_becomes_its_event(session: SessionWorker) -> None:
    def script(turn: TurnIO) -> None:
        turn.thinking("hmm")
        turn.plan([PlanEntry(content="look", status="in_progress"), PlanEntry(content="fix")])
        call = turn.tool_started("edit", {"path": "a.py"}, title="Edit a.py", kind="edit", locations=["a.py"])
        turn.tool_output(call, "patched\n", diff=Diff(path="a.py", old="x = 1\n", new="x = 2\n"))
        turn.tool_ended(call, "completed", value="ok")
        turn.usage(input=120, output=30, cached=100)
        turn.context(150, 32768)
        turn.text("done")

    ended = await run(session, script)
    events = journal_events(session)
    by_type = {e["type"]: e for e in events}
    assert by_type["thinking"]["text"] == "hmm"
    assert [e["content"] for e in by_type["plan"]["entries"]] == ["look", "fix"]
    assert by_type["plan"]["entries"][0]["status"] == "in_progress"
    started = by_type["tool_started"]
    assert (started["title"], started["kind"], started["locations"]) == ("Edit a.py", "edit", ["a.py"])
    output = by_type["tool_output"]
    assert output["call_id"] == started["call_id"] and output["text"] == "patched\n"
    assert output["diff"] == {"path": "a.py", "old": "x = 1\n", "new": "x = 2\n"}
    assert ended["usage"] == {"input": 120, "output": 30, "cached": 100}
    assert ended["reply"] == "done"
    statuses = [e for e in events if e["type"] == "status"]
    assert any(s["context_used"] == 150 and s["context_limit"] == 32768 for s in statuses)
    assert any(s["tokens_in"] == 120 and s["tokens_out"] == 30 for s in statuses)
    # The turn's tokens are counted once: while it runs, and then as the session's.
    assert statuses[-1]["tokens_in"] == 120 and session.stats().tokens_in == 120


async def test_a_turn_sees_the_images_sent_with_it(session: SessionWorker) -> None:
    image = session.save_image(b"\x89PNG\r\n\x1a\n" + b"\0" * 32, "shot.png")
    await run(session, lambda turn: None, images=[ImageRef(file=image.file, name="shot.png")])
    agent = session.agent
    assert isinstance(agent, FakeAgent)
    assert agent.seen_images == [session.writer.paths.images / image.file]


async def test_the_agent_decides_a_model_switch(session: SessionWorker) -> None:
    with pytest.raises(InvalidRequest) as refused:
        session.set_model("huge")
    assert refused.value.code == "invalid_model"
    assert not [e for e in journal_events(session) if e["type"] == "model_changed"]
    session.set_model("big")
    changed = [e for e in journal_events(session) if e["type"] == "model_changed"]
    assert [e["model"] for e in changed] == ["big"]
    assert session.info().model == "big"


async def test_info_says_how_to_show_replies_and_agent_info_follows_commands(session: SessionWorker) -> None:
    info = session.info()
    assert info.reply_format == "markdown" and info.commands == []
    assert not [e for e in journal_events(session) if e["type"] == "agent_info"]
    agent = session.agent
    agent.commands = (AgentCommand(name="review", description="review the diff"),)
    agent.mode = "plan"
    agent.info_changed()
    agent.info_changed()  # nothing changed since: no second event
    infos = [e for e in journal_events(session) if e["type"] == "agent_info"]
    assert len(infos) == 1
    assert (
        infos[0]["commands"] == [{"name": "review", "description": "review the diff"}]
        and infos[0]["mode"] == "plan"
    )
    assert [c.name for c in session.info().commands] == ["review"]


def test_the_python_agent_is_verbatim_and_refuses_models() -> None:
    assert agent_class("python") is PythonAgent and PythonAgent.reply_format == "verbatim"
    with pytest.raises(InvalidRequest) as refused:
        PythonAgent(Path("/tmp")).set_model("gpt-9")
    assert refused.value.code == "invalid_model" and "python" in refused.value.detail


def test_agent_context_gives_paths_config_and_earlier_turns(state_dir: Path, tmp_path: Path) -> None:
    state = StatePaths(state_dir)
    record = create_session(state, working_directory=tmp_path)
    paths = state.session(record.id)
    context = agent_context(paths, record)
    assert context.session_id == record.id and context.working_directory == tmp_path
    assert context.session_folder == paths.root and context.journal == paths.journal
    assert context.earlier_turns() == []
    assert not (paths.root / "agent").exists()
    assert context.agent_folder() == paths.root / "agent" and (paths.root / "agent").is_dir()
    assert context.config == Config()


class TestCheckAgent:
    def test_python_is_a_kind(self) -> None:
        assert "python" in kinds()
        check_agent("python", Config())

    @pytest.mark.parametrize("name", ["acp", "nonsense"])
    def test_what_cannot_run_is_refused_with_a_sentence(self, name: str) -> None:
        config = Config.model_validate({"agents": {"claude": {"command": ["claude-code-acp"]}}})
        with pytest.raises(InvalidRequest) as refused:
            check_agent(name, config)
        detail = refused.value.detail
        assert refused.value.code == "invalid_request"
        assert "python" in detail and "[agents]" in detail
        if name == "model":
            assert "not available in this version yet" in detail
        if name == "nonsense":
            assert "'nonsense'" in detail and "claude" in detail

    def test_an_acp_agent_whose_command_is_missing_is_refused_naming_it(self) -> None:
        config = Config.model_validate({"agents": {"claude": {"command": ["no-such-agent-acp"]}}})
        with pytest.raises(InvalidRequest) as refused:
            check_agent("claude", config)
        assert "'no-such-agent-acp'" in refused.value.detail and "[agents.claude]" in refused.value.detail
        check_agent("claude", config, command=False)

    def test_a_configured_acp_agent_is_accepted(self) -> None:
        import sys

        config = Config.model_validate({"agents": {"tester": {"command": [sys.executable, "agent.py"]}}})
        check_agent("tester", config)
        assert kind_of("tester", config) == "acp" and kind_of("python", config) == "python"

    def test_a_model_session_needs_a_model_that_resolves_and_its_key(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
        config = Config.model_validate(
            {
                "models": {
                    "local": {"provider": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"},
                    "sonnet": {"provider": "anthropic", "model": "claude", "api_key_env": "MY_KEY"},
                }
            }
        )
        assert check_agent("model", config, "local") == "local"
        with pytest.raises(InvalidRequest, match="needs a model: --model NAME"):
            check_agent("model", config)
        with pytest.raises(InvalidRequest, match=r"no model 'nope'.*local, sonnet"):
            check_agent("model", config, "nope")
        with pytest.raises(InvalidRequest, match="set MY_KEY"):
            check_agent("model", config, "sonnet")
        with pytest.raises(InvalidRequest, match="set ANTHROPIC_API_KEY"):
            check_agent("model", config, "anthropic:claude-sonnet-4-5")
        monkeypatch.setenv("MY_KEY", "k")
        assert check_agent("model", config, "sonnet") == "sonnet"
        assert check_agent("model", config.model_copy(update={"default_model": "local"})) == "local"

    def test_it_imports_no_agent(self) -> None:
        import subprocess
        import sys

        code = (
            "import sys; from tui.config import Config; from tui.worker.agents import check_agent; "
            "check_agent('python', Config()); "
            "heavy = ('tui.worker.agents.', 'tui.codemode', 'tui.worker.core'); "
            "print(any(m.startswith(heavy) for m in sys.modules))"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == "False"


class TestConfig:
    def test_a_missing_file_is_an_empty_config(self, tmp_path: Path) -> None:
        assert load_config(tmp_path) == Config()

    def test_profiles_and_agents_are_read(self, tmp_path: Path) -> None:
        (tmp_path / "config.toml").write_text(
            'default_agent = "model"\ndefault_model = "local"\n'
            '[models.local]\nprovider = "openai"\nmodel = "qwen"\nbase_url = "http://127.0.0.1:11434/v1"\n'
            "context_window = 32768\n"
            '[agents.claude]\ncommand = ["claude-code-acp"]\nenv = { A = "1" }\n'
        )
        config = load_config(tmp_path)
        assert config.default_agent == "model" and config.default_model == "local"
        assert config.models["local"].context_window == 32768
        claude = config.agents["claude"]
        assert claude.command == ["claude-code-acp"] and claude.env.get("A") == "1"
        assert config.path == tmp_path / "config.toml"

    def test_the_built_in_agents_are_there_and_a_table_changes_what_it_gives(self, tmp_path: Path) -> None:
        assert Config().agents["claude"].command == ["claude-agent-acp"]
        assert Config().agents["gemini"].command == ["gemini", "--acp"]
        (tmp_path / "config.toml").write_text(
            '[agents.gemini]\nenv = { GEMINI_MODEL = "m" }\n[agents.codex]\ncommand = ["my-codex"]\n'
        )
        config = load_config(tmp_path)
        gemini, codex = config.agents["gemini"], config.agents["codex"]
        assert gemini.command == ["gemini", "--acp"] and gemini.env == {"GEMINI_MODEL": "m"}
        assert gemini.install == "npm install -g @google/gemini-cli" and gemini.builtin
        assert codex.command == ["my-codex"] and codex.install is None
        assert set(config.agents) == {"claude", "codex", "gemini", "opencode"}

    def test_claude_is_told_it_runs_in_a_sandbox_when_tui_runs_as_root(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(os, "geteuid", lambda: 1000)
        assert Config().agents["claude"].env == {}
        monkeypatch.setattr(os, "geteuid", lambda: 0)
        assert Config().agents["claude"].env == {"IS_SANDBOX": "1"}
        assert Config().agents["codex"].env == {}
        (tmp_path / "config.toml").write_text('[agents.claude]\nenv = { ANTHROPIC_MODEL = "m" }\n')
        assert load_config(tmp_path).agents["claude"].env == {"IS_SANDBOX": "1", "ANTHROPIC_MODEL": "m"}
        (tmp_path / "config.toml").write_text('[agents.claude]\nenv = { IS_SANDBOX = "0" }\n')
        assert load_config(tmp_path).agents["claude"].env == {"IS_SANDBOX": "0"}

    def test_the_config_dir_comes_from_the_environment(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("TUI_CONFIG_DIR", str(tmp_path))
        (tmp_path / "config.toml").write_text('default_model = "x"\n')
        assert load_config().default_model == "x"

    @pytest.mark.parametrize(
        ("text", "line", "words"),
        [
            ('default_agent = "python"\n[models.local\n', 2, "not valid TOML"),
            (
                '[models.local]\nprovider = "openai"\nmodel = "m"\ncontext_window = "big"\n',
                4,
                "context_window",
            ),
            ('default_model = "x"\n\n[agents.claude]\ncommand = []\n', 4, "agents.claude.command"),
            ('defualt_agent = "python"\n', 1, "defualt_agent"),
        ],
    )
    def test_a_broken_file_is_an_error_naming_the_file_and_line(
        self, tmp_path: Path, text: str, line: int, words: str
    ) -> None:
        (tmp_path / "config.toml").write_text(text)
        with pytest.raises(TuiError) as broken:
            load_config(tmp_path)
        message = str(broken.value)
        assert str(tmp_path / "config.toml") in message and f"line {line}" in message and words in message


async def test_a_turn_knows_its_number_in_the_session(session: SessionWorker) -> None:
    numbers: list[int] = []
    for _ in range(3):
        await run(session, lambda turn: numbers.append(turn.number))
    assert numbers == [1, 2, 3]


async def test_a_worker_started_on_earlier_turns_says_how_many(session: SessionWorker) -> None:
    from tui.store import Journal
    from tui.worker.agents import make_agent

    assert session.info().resumed_at_turn == 0
    await run(session, lambda turn: turn.text("x"))
    await session.leave("stopped")
    again = SessionWorker(
        session.writer.paths,
        session.control.record,
        Journal.open_for_append(session.writer.paths.journal),
        make_agent(agent_context(session.writer.paths, session.control.record)),
    )
    again.writer.load()
    again.begin()
    try:
        assert again.info().resumed_at_turn == 1
    finally:
        await again.leave("test over")
