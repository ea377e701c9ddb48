"""The session commands end to end: real `tui` processes, real workers, one state dir a test."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from helpers import wait_until

from client.helpers import kill_worker, new_session, sessions, tui, worker_pid
from tui.store import SessionRecord, StatePaths, read_sidecar, save_session

SLOW = "import time; print('started', flush=True); time.sleep(60)"
ASK = "x = ask('Proceed?', options=['yes', 'no']); print('got', x)"


def test_the_user_story(state_dir: Path) -> None:
    """send --new --wait prints 42; sessions lists it; a question exits 3 with the command; answer;
    stop and resume with a new worker; archive; delete --force."""
    out = tui("send", "--new", "print(6*7)", "--wait")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "42\n"
    sid = out.stderr.strip().splitlines()[0]
    assert re.fullmatch(r"[0-9a-f]{16}", sid)
    short = sid[:8]

    table = tui("sessions")
    assert table.returncode == 0
    assert re.search(rf"{short}\s+print\(6\*7\)\s+idle\s+yes", table.stdout), table.stdout
    (row,) = sessions()
    assert row["id"] == sid and row["state"] == "idle" and row["live"] is True
    assert row["folder"] and row["title"] == "print(6*7)"

    asked = tui("send", short, ASK, "--wait")
    assert asked.returncode == 3, asked.stderr
    assert "Proceed?" in asked.stderr and "1. yes" in asked.stderr and "2. no" in asked.stderr
    assert f"tui answer {short} --option 1" in asked.stderr
    assert f"tui answer {short} --text" in asked.stderr
    assert sessions()[0]["state"] == "asking"
    again = tui("send", short, "print('late')", "--wait")
    assert again.returncode == 3 and "Proceed?" in again.stderr

    several = tui("answer", short, "--option", "1", "--option", "2")  # a mistake: exit 2, how to answer
    assert several.returncode == 2 and "takes one option, not several:" in several.stderr, several.stderr
    assert f"tui answer {short} --option 1" in several.stderr
    answered = tui("answer", sid[:5], "--option", "1")
    assert answered.returncode == 0, answered.stderr
    got = tui("send", short, "print(x)", "--wait")
    assert got.returncode == 0, got.stderr
    assert got.stdout == "yes\n"

    first_pid = worker_pid(state_dir, sid)
    stopped = tui("stop", short)
    assert stopped.returncode == 0 and f"tui attach {short}" in stopped.stderr
    assert sessions()[0]["state"] == "stopped" and sessions()[0]["live"] is False
    resumed = tui("send", short, "print('back')", "--wait")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == "back\n"
    assert worker_pid(state_dir, sid) != first_pid

    assert tui("archive", short).returncode == 0
    assert sessions() == []
    assert sessions(all_=True)[0]["state"] == "archived"
    back = tui("unarchive", short)
    assert back.returncode == 0 and f"tui attach {short}" in back.stderr, back.stderr
    assert [row["id"] for row in sessions()] == [sid]
    assert tui("archive", short).returncode == 0

    refused = tui("delete", short)
    assert refused.returncode == 1
    assert f"tui delete {short} --force" in refused.stderr
    deleted = tui("delete", short, "--force")
    assert deleted.returncode == 0, deleted.stderr
    assert sessions(all_=True) == []


def test_exit_codes(state_dir: Path) -> None:
    """2 usage, 1 failed turn, 1 unknown id, 1 ambiguous id (listing matches), 1 timeout."""
    assert tui("send").returncode == 2
    assert tui("answer", "abc", "--option", "x").returncode == 2

    failed = tui("send", "--new", "1/0", "--wait")
    assert failed.returncode == 1
    assert "ZeroDivisionError" in failed.stdout
    assert "the turn failed: ZeroDivisionError: division by zero" in failed.stderr
    sid = failed.stderr.splitlines()[0]

    missing = tui("stop", "ffffffff")
    assert missing.returncode == 1 and "tui sessions" in missing.stderr

    state = StatePaths(state_dir)
    for twin in ("abcd000000000001", "abcd000000000002"):
        (state.sessions / twin).mkdir(parents=True)
        save_session(state, SessionRecord(id=twin, created_at="2026-01-01T00:00:00Z", working_directory="/"))
    ambiguous = tui("stop", "abcd")
    assert ambiguous.returncode == 1
    assert "abcd0000" in ambiguous.stderr and "type more of the id" in ambiguous.stderr

    slow = tui("send", sid[:8], "import time; time.sleep(30)", "--wait", "--timeout", "3")
    assert slow.returncode == 1
    assert "timed out after 3 s; the turn keeps running" in slow.stderr
    queued = tui("send", sid[:8], "print('queued')", "--queue")
    assert queued.returncode == 0 and f"queued for session {sid[:8]}" in queued.stderr
    assert tui("stop", sid[:8]).returncode == 0

    no_question = tui("answer", sid[:8], "--option", "1")
    assert no_question.returncode == 1 and "no live worker" in no_question.stderr


def test_a_worker_gone_for_good_exits_4(state_dir: Path) -> None:
    """The session deleted under a waiting `send`: the worker does not come back, exit 4."""
    sid = new_session(state_dir)
    waiting = subprocess.Popen(
        [sys.executable, "-m", "tui", "send", sid, SLOW, "--wait"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert waiting.stdout is not None
    assert waiting.stdout.readline() == "started\n"
    StatePaths(state_dir).session(sid).record.unlink()
    kill_worker(state_dir, sid)
    _, err = waiting.communicate(timeout=30)
    assert waiting.returncode == 4, err
    assert "deleted" in err


def test_a_killed_worker_is_restarted_and_the_turn_reported_failed(state_dir: Path) -> None:
    """SIGKILL mid-turn: `send --wait` reconnects to a new worker and reports the failed turn."""
    sid = new_session(state_dir)
    waiting = subprocess.Popen(
        [sys.executable, "-m", "tui", "send", sid, SLOW, "--wait"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert waiting.stdout is not None
    assert waiting.stdout.readline() == "started\n"
    old = kill_worker(state_dir, sid)
    out, err = waiting.communicate(timeout=30)
    assert waiting.returncode == 1, err
    assert out == "\n" or out == ""
    assert "the turn failed" in err and "stopped before it ended" in err
    wait_until(lambda: sessions()[0]["live"], "a new worker")
    assert worker_pid(state_dir, sid) != old
    after = tui("send", sid, "print('still here')", "--wait")
    assert after.stdout == "still here\n"


def test_an_agent_this_machine_cannot_run_is_refused_in_one_line_and_leaves_nothing(state_dir: Path) -> None:
    for args in (["send", "--new", "--agent", "nonsense", "print(1)"], ["--agent", "nonsense", "print(1)"]):
        out = tui(*args)
        assert out.returncode == 1, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "no agent 'nonsense'" in lines[0] and "python" in lines[0], out.stderr
        assert "Traceback" not in out.stderr
    assert sessions() == []


def test_send_wait_of_a_prompt_that_is_not_python_fails_and_sends_nothing(state_dir: Path) -> None:
    sid = new_session(state_dir)
    out = tui("send", sid[:8], "please list the files", "--wait")
    assert out.returncode == 1, out.stderr
    assert "the prompt is not valid Python" in out.stderr and "it was not sent" in out.stderr
    journal = (state_dir / "sessions" / sid / "journal.jsonl").read_text()
    assert "please list the files" not in journal
    sent = tui("send", sid[:8], "please list the files")
    assert sent.returncode == 0, "without --wait it is sent, and the session answers it in words"


def test_help_groups_the_commands_with_examples_and_exit_codes() -> None:
    out = subprocess.run([sys.executable, "-m", "tui", "--help"], capture_output=True, text=True, check=True)
    assert "Sessions (here, or on another machine with --remote NAME):" in out.stdout
    assert "  transcript ID [--format F]" in out.stdout and "Examples:" in out.stdout
    assert "3 a question is waiting" in out.stdout and "docs/cli.md" in out.stdout


def test_stop_all_stops_every_live_session_and_keeps_them(state_dir: Path) -> None:
    a, b = new_session(state_dir), new_session(state_dir)
    assert {row["id"] for row in sessions() if row["live"]} == {a, b}
    out = tui("stop", "--all")
    assert out.returncode == 0, out.stderr
    assert "2 sessions stopped" in out.stderr
    assert [row["live"] for row in sessions()] == [False, False]
    assert tui("stop").returncode == 2


def test_stop_all_stops_an_archived_sessions_live_worker(state_dir: Path) -> None:
    sid = new_session(state_dir)
    assert tui("archive", sid[:8]).returncode == 0
    assert [row["live"] for row in sessions(all_=True)] == [True]
    out = tui("stop", "--all")
    assert out.returncode == 0, out.stderr
    assert f"stopped session {sid[:8]}" in out.stderr and "1 session stopped" in out.stderr
    assert [row["live"] for row in sessions(all_=True)] == [False]


def test_a_misspelt_command_is_refused_and_starts_nothing(state_dir: Path) -> None:
    """`tui sesions`, `tui attahc ID`: exit 2 naming the command meant; no session, no worker."""
    for argv, meant in (
        (["sesions"], "tui sessions"),
        (["attahc", "3f2a"], "tui attach 3f2a"),
        (["intrerupt", "3f2a"], "tui interrupt 3f2a"),
        (["stpo", "--all"], "tui stop --all"),
    ):
        out = tui(*argv)
        assert out.returncode == 2, (argv, out.stderr)
        assert f"did you mean `{meant}`?" in out.stderr, out.stderr
        assert f"`tui -- {argv[0]}` sends it as a prompt" in out.stderr
        assert "Traceback" not in out.stderr
    assert sessions(all_=True) == []
    assert not StatePaths(state_dir).sessions.exists() or not any(StatePaths(state_dir).sessions.iterdir())


def test_words_typed_from_habit_name_the_command_and_start_nothing(state_dir: Path) -> None:
    """`tui ls`, `list`, `ps`, `kill`, `rm` are refused in one line naming the command meant;
    `tui help` is the help; a duration without its unit is refused. None starts a session."""
    for word, meant in (
        ("ls", "tui sessions"),
        ("list", "tui sessions"),
        ("ps", "tui sessions"),
        ("kill", "tui stop ID"),
        ("rm", "tui delete ID"),
    ):
        out = tui(word)
        assert out.returncode == 2, (word, out.stderr)
        assert out.stderr.startswith(f"tui: {word!r} is not a command; `{meant}` "), out.stderr
        assert f"`tui -- {word}` sends it as a prompt" in out.stderr and len(out.stderr.splitlines()) == 1
    helped = tui("help")
    assert helped.returncode == 0 and "Sessions (here" in helped.stdout
    assert "usage: tui stop" in tui("help", "stop").stdout
    unitless = tui("stop", "--idle", "2")
    assert unitless.returncode == 2 and "'2' has no unit; write e.g. 2s, 2m or 2h" in unitless.stderr
    assert "s m h d w" in tui("stop", "--help").stdout
    assert sessions(all_=True) == []
    assert not StatePaths(state_dir).sessions.exists() or not any(StatePaths(state_dir).sessions.iterdir())


def test_an_agent_not_installed_is_said_before_an_empty_stdin(state_dir: Path) -> None:
    if shutil.which("claude-agent-acp") is not None:
        pytest.skip("the claude ACP agent is installed here")
    out = tui("--agent", "claude", input="")
    assert out.returncode == 1 and "the agent 'claude' is not installed" in out.stderr, out.stderr
    assert "stdin was empty" not in out.stderr
    assert sessions(all_=True) == []


def test_the_markdown_transcript_says_which_session_and_what_was_asked(
    state_dir: Path, tmp_path: Path
) -> None:
    sent = tui("send", "--new", "--dir", str(tmp_path), "x = ask('Go on?', options=['yes', 'no']); print(x)")
    sid = sent.stderr.strip().splitlines()[0]
    wait_until(lambda: sessions()[0]["state"] == "asking", "the question")
    assert tui("answer", sid[:8], "--option", "1").returncode == 0
    wait_until(lambda: sessions()[0]["state"] == "idle", "the turn's end")
    out = tui("transcript", sid[:8], "--format", "markdown").stdout
    head = out.split("## Turn 1")[0]
    assert head.startswith(f"# Session {sid[:8]}") and f"- id: `{sid}`" in head, head
    assert f"- folder: `{tmp_path}`" in head and "- agent: python" in head
    assert "- `ask: Go on?` · completed" in out and re.search(r"- answered by \S+: yes", out)
    assert "▸ ask: Go on? · completed" in tui("transcript", sid[:8]).stdout


def test_a_word_that_is_no_commands_misspelling_is_still_a_prompt() -> None:
    from tui.cli import misspelt, parse

    assert misspelt("sesions") == "sessions" and misspelt("trancsript") == "transcript"
    assert misspelt("x") is None and misspelt("help") is None and misspelt("print(6*7)") is None
    assert parse(["--", "sesions"]).prompt == "sesions"
    assert parse(["x"]).prompt == "x"


def test_interrupt_ends_the_running_turn_and_starts_no_worker(state_dir: Path) -> None:
    sid = new_session(state_dir)
    waiting = subprocess.Popen(
        [sys.executable, "-m", "tui", "send", sid, SLOW, "--wait"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert waiting.stdout is not None
    assert waiting.stdout.readline() == "started\n"
    out = tui("interrupt", sid[:8])
    assert out.returncode == 0, out.stderr
    assert f"interrupted the running turn of session {sid[:8]}" in out.stderr
    _, err = waiting.communicate(timeout=30)
    assert waiting.returncode == 1 and "interrupted" in err, err
    again = tui("interrupt", sid[:8])
    assert again.returncode == 0 and "has no running turn" in again.stderr
    assert tui("stop", sid[:8]).returncode == 0
    stopped = tui("interrupt", sid[:8])
    assert stopped.returncode == 0 and "no live worker" in stopped.stderr
    assert [row["live"] for row in sessions()] == [False]


def test_stop_idle_stops_the_workers_idle_that_long_and_sessions_shows_what_they_cost(
    state_dir: Path,
) -> None:
    idle, busy = new_session(state_dir), new_session(state_dir)
    none = tui("stop", "--idle", "1h")
    assert none.returncode == 0 and "no worker has been idle 1h or more; nothing was stopped" in none.stderr
    wait_until(lambda: all(row["idle_seconds"] >= 1 for row in sessions()), "both workers idle for 1 s")
    assert tui("send", busy[:8], SLOW).returncode == 0
    wait_until(lambda: next(r for r in sessions() if r["id"] == busy)["state"] == "working", "the slow turn")
    table = tui("sessions").stdout.splitlines()
    assert table[0].split() == ["ID", "TITLE", "STATE", "LIVE", "MEMORY", "IDLE", "AGE", "FOLDER"]
    row = next(line.split() for line in table if line.startswith(idle[:8]))
    assert re.fullmatch(r"\d+M", row[4]) and re.fullmatch(r"\d+[smh]", row[5]), row
    out = tui("stop", "--idle", "1s")
    assert out.returncode == 0, out.stderr
    assert re.search(rf"stopped session {idle[:8]} \(idle \d+s, \d+M freed\)", out.stderr), out.stderr
    assert "1 session stopped" in out.stderr and busy[:8] not in out.stderr
    assert {row["id"]: row["live"] for row in sessions()} == {idle: False, busy: True}
    bad = tui("stop", "--idle", "soon")
    assert bad.returncode == 2 and "'soon' is not a duration; write e.g. 30m" in bad.stderr


def test_sessions_shows_an_attached_session_idle_since_its_last_event(state_dir: Path) -> None:
    """An attached client's open stream keeps the worker (its idle time stays 0), but IDLE says
    how long since the session last did something, without the worker's limit."""
    sid = new_session(state_dir)
    car = read_sidecar(StatePaths(state_dir).session(sid).sidecar)
    assert car is not None
    with (
        httpx.Client(transport=httpx.HTTPTransport(uds=car.socket), base_url="http://worker") as client,
        client.stream("GET", "/events", params={"client_id": "tui:test:1"}, timeout=None) as stream,
    ):
        assert stream.status_code == 200
        row = lambda: next(r for r in sessions() if r["id"] == sid)  # noqa: E731
        wait_until(lambda: row()["quiet_seconds"] >= 2, "2 s with nothing done while attached")
        assert row()["idle_seconds"] == 0  # the worker's own rule: someone is attached
        line = next(line.split() for line in tui("sessions").stdout.splitlines() if line.startswith(sid[:8]))
        assert re.fullmatch(r"[1-9]\d*[smh]", line[5]), line


def test_a_listing_read_only_in_part_ends_quietly(state_dir: Path) -> None:
    """`tui sessions | head -1`: no BrokenPipeError traceback, exit 0."""
    state = StatePaths(state_dir)
    for n in range(1500):
        sid = f"{n:016x}"
        (state.sessions / sid).mkdir(parents=True)
        save_session(state, SessionRecord(id=sid, created_at="2026-01-01T00:00:00Z", working_directory="/"))
    for args in (["sessions"], ["sessions", "--json"]):
        proc = subprocess.Popen(
            [sys.executable, "-m", "tui", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline()
        proc.stdout.close()
        err = proc.stderr.read()
        assert proc.wait(timeout=60) == 0, err
        assert "Traceback" not in err and "BrokenPipeError" not in err, err
