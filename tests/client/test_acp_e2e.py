"""An ACP agent's session as a user drives it: ``tui send --new --agent NAME``, ``--answers``, stop."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from acp_agent import agent_pids, configure
from helpers import wait_until

from client.helpers import sessions, tui


@pytest.fixture(autouse=True)
def tester(acp_tester: Path) -> Path:
    """The test agent configured as ``[agents.tester]`` (`acp_tester`)."""
    return acp_tester


def _new(prompt: str, *args: str) -> tuple[str, str, str, int]:
    out = tui("send", "--new", "--agent", "tester", prompt, "--wait", *args)
    return out.stderr.strip().splitlines()[0], out.stdout, out.stderr, out.returncode


def test_send_new_runs_a_turn_of_the_agent(tester: Path) -> None:
    (tester / "notes.txt").write_text("first\n")
    sid, out, err, code = _new("edit the notes")
    assert code == 0, err
    assert "Working on: edit the notes" in out and "Done." in out
    assert (tester / "notes.txt").read_text() == "hello from the agent\nfirst\n"
    listed = tui("sessions", "--json")
    assert json.loads(listed.stdout)[0]["agent"] == "tester"
    stopped = tui("stop", sid)
    assert stopped.returncode == 0, stopped.stderr
    wait_until(lambda: not agent_pids(sid), "the agent to end with its session")


def test_a_permission_is_answered_from_answers_or_the_run_exits_3(tester: Path, tmp_path: Path) -> None:
    toml = tmp_path / "approve.toml"
    toml.write_text('"Allow Run make test?" = "Allow (2)"\n')
    piped = tui("--agent", "tester", "--answers", str(toml), input="permission to test\n")
    assert piped.returncode == 0, piped.stderr
    assert "permission: allow-always" in piped.stdout
    sid = sessions()[0]["id"]
    answers = tmp_path / "approve.json"
    answers.write_text('["Reject"]')
    again = tui("attach", sid, "--answers", str(answers), input="permission again\n")
    assert again.returncode == 0, again.stderr
    assert "permission: reject" in again.stdout
    unanswered = tui("send", sid, "permission once more", "--wait")
    assert unanswered.returncode == 3, unanswered.stderr
    assert "tui answer" in unanswered.stderr and "Allow (2)" in unanswered.stderr


def test_a_missing_command_is_refused_in_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "config" / "config.toml").write_text('[agents.ghost]\ncommand = ["no-such-acp-agent"]\n')
    for args in (["send", "--new", "--agent", "ghost", "hello"], ["--agent", "ghost", "hello"]):
        out = tui(*args)
        assert out.returncode == 1, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "'no-such-acp-agent'" in lines[0] and "[agents.ghost]" in lines[0]
    assert sessions() == []


def test_an_agent_that_loads_its_session_lets_an_idle_worker_go_one_that_cannot_does_not(
    tester: Path, tmp_path: Path
) -> None:
    config = tmp_path / "config" / "config.toml"
    config.write_text(config.read_text() + '\n[workers]\nidle_timeout = "1h"\n')
    loads, _, err, code = _new("hello")
    assert code == 0, err
    configure(tmp_path / "config", tmp_path / "agent-state", load=False)
    config.write_text(config.read_text() + '\n[workers]\nidle_timeout = "1h"\n')
    cannot, _, err, code = _new("hello")
    assert code == 0, err
    rows = {row["id"]: row for row in sessions()}
    assert rows[loads]["idle_timeout"] == 3600, "session/load: the next worker loads it back"
    assert rows[cannot]["idle_timeout"] is None, "no session/load: its worker is kept"


def test_the_transcript_names_a_tool_call_as_the_agent_last_titled_it(tester: Path) -> None:
    sid, _, err, code = _new("rename the file")
    assert code == 0, err
    text = tui("transcript", sid)
    assert text.returncode == 0, text.stderr
    assert "▸ Write out.txt · completed" in text.stdout and "Preparing" not in text.stdout


def test_a_built_in_agent_runs_with_no_entry_and_tui_agents_says_what_is_installed(
    tester: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `claude-agent-acp` on PATH (the test agent behind it); no [agents.claude] in config.toml
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    adapter = bin_dir / "claude-agent-acp"
    agent = Path(__file__).resolve().parent.parent / "acp_agent.py"
    adapter.write_text(f'#!/bin/sh\nexec {sys.executable} {agent} "$@"\n')
    adapter.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("TEST_AGENT_STATE", str(tmp_path / "agent-state"))
    config = tmp_path / "config" / "config.toml"
    nowhere = tmp_path / "empty"
    nowhere.mkdir()
    # an entry may change a built-in's env only (here: a PATH where its command is not)
    config.write_text(config.read_text() + f'[agents.codex]\nenv = {{ PATH = "{nowhere}" }}\n')
    out = tui("send", "--new", "--agent", "claude", "hello", "--wait")
    assert out.returncode == 0, out.stderr
    assert "Working on: hello" in out.stdout
    listed = tui("agents", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows["claude"]["found"] == str(adapter) and rows["claude"]["builtin"]
    assert rows["codex"]["found"] is None and rows["tester"]["builtin"] is False
    assert set(rows) >= {"claude", "codex", "gemini", "opencode", "tester"}
    lines = tui("agents").stdout.splitlines()
    assert lines[0].split() == ["NAME", "COMMAND", "INSTALLED"]  # every column under a header
    table = {line.split()[0]: line.split(None, 1)[1] for line in lines}
    assert table["claude"].startswith("claude-agent-acp") and table["claude"].endswith(f"found: {adapter}")
    assert table["codex"].endswith("not installed: npm install -g @zed-industries/codex-acp")


def test_a_built_in_agent_not_installed_is_refused_naming_its_install_line(
    tester: Path, tmp_path: Path
) -> None:
    nowhere = tmp_path / "empty"
    nowhere.mkdir()
    config = tmp_path / "config" / "config.toml"
    config.write_text(config.read_text() + f'[agents.gemini]\nenv = {{ PATH = "{nowhere}" }}\n')
    out = tui("--agent", "gemini", "hello")
    assert out.returncode == 1, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "`npm install -g @google/gemini-cli`" in lines[0], lines
    assert "'gemini'" in lines[0]
    assert sessions() == []


def test_an_agent_that_needs_a_login_says_how_in_one_line(tester: Path, tmp_path: Path) -> None:
    config = tmp_path / "config" / "config.toml"
    config.write_text(config.read_text().replace("env = { ", 'env = { TEST_AGENT_LOGIN = "1", '))
    _, _, err, code = _new("hello")
    assert code == 1, err
    said = [line for line in err.splitlines() if "log in" in line]
    assert len(said) == 1, err
    assert (
        "the agent 'tester' needs you to log in: log in as it offers (run `test-agent login`) "
        "in a terminal; then send the prompt again" in said[0]
    )
