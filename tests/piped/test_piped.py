"""The piped surface end to end: `tui` and `tui attach ID` with stdin from a script."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from client.helpers import kill_worker, new_session, sessions, tui

ASK = "x = ask('Proceed?', options=['yes', 'no']); print('got', x)"
SLOW = "import time; print('started', flush=True); time.sleep(60)"


def _popen(*args: str, script: str) -> subprocess.Popen[str]:
    """`tui ARGS` reading `script` from a file, its stdout and stderr piped."""
    with tempfile.TemporaryFile("w+") as stdin:
        stdin.write(script)
        stdin.seek(0)
        return subprocess.Popen(
            [sys.executable, "-m", "tui", *args],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


def test_a_new_session_runs_each_line_with_continuations_and_slash_commands(state_dir: Path) -> None:
    script = "print('a')\nfor i in range(3):\\\n    print(i)\n\n/stats\n/queue\nprint('b', end='')\n"
    out = tui("print('first')", input=script)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "first\na\n0\n1\n2\nb\n"
    assert "new session" in out.stderr
    for n in (1, 2, 3, 4):
        assert f"turn {n} completed" in out.stderr
    assert "stats: " in out.stderr and "queue: 0 waiting" in out.stderr


def test_empty_stdin_makes_no_session(state_dir: Path) -> None:
    for script in ("", "\n  \n"):
        out = tui(input=script)
        assert out.returncode == 0, out.stderr
        assert "stdin was empty, so no session was made" in out.stderr
    assert sessions(all_=True) == []
    blank_first = tui(input="\n\nprint('after blanks')\n")
    assert (blank_first.returncode, blank_first.stdout) == (0, "after blanks\n"), blank_first.stderr


def test_the_first_failed_turn_stops_the_script_unless_keep_going(state_dir: Path) -> None:
    sid = new_session(state_dir)
    stopped = tui("attach", sid[:8], input="1/0\nprint('after')\n")
    assert stopped.returncode == 1
    assert "ZeroDivisionError" in stopped.stdout and "after" not in stopped.stdout
    # Turns are named by their number in the session (its first turn printed 'ready').
    assert "turn 2 failed: ZeroDivisionError: division by zero" in stopped.stderr

    going = tui("attach", sid[:8], "--keep-going", input="1/0\nprint('after')\n/bogus\n")
    assert going.returncode == 1
    assert going.stdout.endswith("after\n")
    # stderr and the traceback name the turn by the same number.
    assert "turn 3 failed: ZeroDivisionError" in going.stderr
    assert 'File "<program 3>", line 1' in going.stdout
    assert "unknown command /bogus" in going.stderr


def test_ten_megabytes_of_output_arrive_byte_for_byte(state_dir: Path) -> None:
    sid = new_session(state_dir)
    program = "print('\\n'.join(f'{i:08d}' + chr(97 + i % 26) * 91 for i in range(100_000)))\n"
    out = subprocess.run(
        [sys.executable, "-m", "tui", "attach", sid],
        input=program.encode(),
        capture_output=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    expected = "\n".join(f"{i:08d}" + chr(97 + i % 26) * 91 for i in range(100_000)) + "\n"
    assert len(out.stdout) == 10_000_000
    assert out.stdout == expected.encode()


def test_jsonl_output_carries_every_event_once(state_dir: Path) -> None:
    sid = new_session(state_dir)
    out = tui("attach", sid, "--output", "jsonl", input="print(1)\nprint(2)\n")
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs)) and seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    ended = [e for e in events if e["type"] == "turn_ended"]
    assert [e["reply"] for e in ended] == ["1\n", "2\n"]
    assert {"turn_started", "text", "status"} <= {e["type"] for e in events}


def test_questions_are_answered_from_a_file_a_default_or_left_with_exit_3(state_dir: Path) -> None:
    sid = new_session(state_dir)
    as_list = state_dir / "answers.json"
    as_list.write_text(json.dumps(["yes"]))
    out = tui("attach", sid, "--answers", str(as_list), input=ASK + "\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "got yes\n"

    as_map = state_dir / "answers.toml"
    as_map.write_text('"Proceed?" = 2\n')
    out = tui("attach", sid, "--answers", str(as_map), input=ASK + "\n")
    assert out.stdout == "got no\n", out.stderr

    out = tui("attach", sid, "--question-timeout", "0.2", "--default-answer", "yes", input=ASK + "\n")
    assert out.stdout == "got yes\n", out.stderr

    left = tui("attach", sid, input=ASK + "\n")
    assert left.returncode == 3
    assert "Proceed?" in left.stderr and f"tui answer {sid[:8]} --option 2" in left.stderr
    dismissed = tui("dismiss", sid[:8])
    assert dismissed.returncode == 0, dismissed.stderr
    after = tui("send", sid, "print('idle again')", "--wait")
    assert after.stdout == "idle again\n", after.stderr

    several = tui("attach", sid, input="y = ask('Which?', options=['a', 'b', 'c'], multiple=True)\n")
    assert several.returncode == 3 and "repeat --option" in several.stderr
    assert tui("answer", sid, "--option", "1", "--option", "3").returncode == 0
    assert tui("send", sid, "print(y)", "--wait").stdout == "['a', 'c']\n"


def test_an_answers_map_without_the_question_says_which_and_how_to_add_it(state_dir: Path) -> None:
    sid = new_session(state_dir)
    other = state_dir / "other.toml"
    other.write_text('"Something else?" = 1\n')
    left = tui("attach", sid[:8], "--answers", str(other), input=ASK + "\n")
    assert left.returncode == 3, left.stderr
    assert f"--answers {other} has no key matching 'Proceed?'" in left.stderr
    assert 'add "Proceed?" with an option\'s number or label' in left.stderr
    assert f"tui answer {sid[:8]} --option 1" in left.stderr
    assert tui("dismiss", sid[:8]).returncode == 0
    short = state_dir / "short.json"
    short.write_text("[]")
    left = tui("attach", sid[:8], "--answers", str(short), input=ASK + "\n")
    assert left.returncode == 3 and "holds 0 answers and this is question 1" in left.stderr
    assert tui("dismiss", sid[:8]).returncode == 0
    glob = state_dir / "glob.toml"
    glob.write_text('"Proceed*" = "no"\n')
    out = tui("attach", sid[:8], "--answers", str(glob), input=ASK + "\n")
    assert (out.returncode, out.stdout) == (0, "got no\n"), out.stderr


def test_timeout_bounds_the_run_and_leaves_the_turn_running(state_dir: Path) -> None:
    sid = new_session(state_dir)
    out = tui("attach", sid, "--timeout", "3", input=SLOW + "\n")
    assert out.returncode == 1
    assert "timed out after 3 s; the running turn was left running" in out.stderr
    assert out.stdout == "started\n"


def test_ctrl_c_interrupts_the_running_turn_and_exits_1(state_dir: Path) -> None:
    sid = new_session(state_dir)
    proc = _popen("attach", sid, script=SLOW + "\nprint('never')\n")
    assert proc.stdout is not None
    assert proc.stdout.readline() == "started\n"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1, err
    assert "turn 2 was interrupted" in err
    assert "never" not in out


def test_a_session_stopped_under_the_script_exits_4_and_says_what_was_cut_and_not_run(
    state_dir: Path,
) -> None:
    """`tui stop ID` while a piped run waits on line 2's turn: the worker went away for good
    (exit 4); line 2 was cut short and is named, and the run is offered again from it."""
    sid = new_session(state_dir)
    proc = _popen("attach", sid[:8], script="print('one')\n" + SLOW + "\nprint('never')\n")
    assert proc.stdout is not None
    assert proc.stdout.readline() == "one\n"
    assert proc.stdout.readline() == "started\n"
    assert tui("stop", sid[:8]).returncode == 0
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 4, err
    assert "the worker stopped" in err
    assert (
        "line 2 of the script was cut short (the worker stopped during its turn); "
        f"line 3 of the script was not run; `tui attach {sid[:8]} --from-line 2 < SCRIPT` runs it again"
    ) in err, err
    assert "never" not in out


def test_send_wait_on_a_session_stopped_under_it_exits_4(state_dir: Path) -> None:
    sid = new_session(state_dir)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui", "send", sid[:8], SLOW, "--wait"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "started\n"
    assert tui("stop", sid[:8]).returncode == 0
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 4, err
    assert f"the worker stopped (stopped on request); `tui attach {sid[:8]}` starts it again" in err


def test_a_worker_killed_mid_turn_loses_and_repeats_nothing(state_dir: Path) -> None:
    sid = new_session(state_dir)
    proc = _popen("attach", sid, "--keep-going", script=SLOW + "\nprint('next')\n")
    assert proc.stdout is not None
    assert proc.stdout.readline() == "started\n"
    kill_worker(state_dir, sid)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "turn 2 failed" in err and "stopped before it ended" in err
    assert "turn 3 completed" in err
    assert out.count("started") == 0 and out.endswith("next\n")


def test_a_closed_stdout_ends_the_run_with_one_line(state_dir: Path) -> None:
    """`tui attach ID < script | head -1`: no traceback, exit 1, the reason on stderr."""
    sid = new_session(state_dir)
    proc = _popen("attach", sid, script="for i in range(200_000): print(i)\nprint('more')\n")
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == "0\n"
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=30) == 1
    assert "stdout was closed" in err and "Traceback" not in err


def test_a_python_file_runs_as_python_reads_it(state_dir: Path) -> None:
    """A compound statement with its indented and blank lines is one turn, as in Python's REPL."""
    script = "total = 0\nfor i in range(3):\n    total += i\n\n    print(i)\nprint('total', total)\n"
    out = tui("--output", "jsonl", input=script)
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    prompts = [e["prompt"] for e in events if e["type"] == "turn_started"]
    assert prompts == [
        "total = 0",
        "for i in range(3):\n    total += i\n\n    print(i)",
        "print('total', total)",
    ]
    replies = [e["reply"] for e in events if e["type"] == "turn_ended"]
    assert replies == ["", "0\n1\n2\n", "total 3\n"]


def test_a_script_line_that_is_not_python_fails_and_says_what_was_not_run(state_dir: Path) -> None:
    sid = new_session(state_dir)
    script = "print('one')\nplease print two\nprint('three')\nprint('four')\n"
    out = tui("attach", sid[:8], input=script)
    assert out.returncode == 1, out.stderr
    assert out.stdout == "one\n"
    assert "line 2 of the script is not valid Python" in out.stderr
    assert (
        f"lines 3-4 of the script (2) were not run; `tui attach {sid[:8]} --from-line 3 < SCRIPT`"
        in out.stderr
    )
    resumed = tui("attach", sid[:8], "--from-line", "3", input=script)
    assert (resumed.returncode, resumed.stdout) == (0, "three\nfour\n"), resumed.stderr
    past = tui("attach", sid[:8], "--from-line", "9", input=script)  # a line the script does not have
    assert (past.returncode, past.stdout) == (2, ""), past.stderr
    assert past.stderr == "tui: --from-line 9 is past the script's end (it has 4 lines); nothing was run\n"


def test_a_question_in_a_script_says_what_was_left_and_the_rest_resumes(state_dir: Path) -> None:
    sid = new_session(state_dir)
    script = f"print('before')\n{ASK}\nprint('after', x)\n"
    asked = tui("attach", sid[:8], input=script)
    assert asked.returncode == 3, asked.stderr
    assert "Proceed?" in asked.stderr
    assert (
        f"line 3 of the script was not run; `tui attach {sid[:8]} --from-line 3 < SCRIPT` runs the rest"
        in asked.stderr
    )
    assert tui("answer", sid[:8], "--option", "1").returncode == 0
    resumed = tui("attach", sid[:8], "--from-line", "3", input=script)
    assert (resumed.returncode, resumed.stdout) == (0, "after yes\n"), resumed.stderr


def test_whole_sends_the_script_as_one_program(state_dir: Path) -> None:
    script = "def f():\n    return 41\n\nx = f()\nprint(x + 1)\n"
    out = tui("--whole", "--output", "jsonl", input=script)
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert [e["prompt"] for e in events if e["type"] == "turn_started"] == [script.rstrip("\n")]
    assert [e["reply"] for e in events if e["type"] == "turn_ended"] == ["42\n"]
