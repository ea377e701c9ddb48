"""An ACP agent's session as a user drives it: ``tui send --new --agent NAME``, ``--answers``, stop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from acp_agent import agent_pids, configure
from helpers import stop_workers, wait_until

from client.helpers import sessions, tui


@pytest.fixture(autouse=True)
def tester(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, state_dir: Path) -> Path:
    """The test agent configured as ``[agents.tester]``; the working directory is `tmp_path`/work."""
    config = tmp_path / "config"
    config.mkdir()
    configure(config, tmp_path / "agent-state")
    monkeypatch.setenv("TUI_CONFIG_DIR", str(config))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    yield work  # type: ignore[misc]
    live = [s["id"] for s in sessions()]
    stop_workers(state_dir)
    wait_until(lambda: not any(agent_pids(sid) for sid in live), "the agents to end")


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


def test_the_transcript_names_a_tool_call_as_the_agent_last_titled_it(tester: Path) -> None:
    sid, _, err, code = _new("rename the file")
    assert code == 0, err
    text = tui("transcript", sid)
    assert text.returncode == 0, text.stderr
    assert "▸ Write out.txt · completed" in text.stdout and "Preparing" not in text.stdout
