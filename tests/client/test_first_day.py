"""What a new user types wrong on a first day, tried as a new user would: each mistake is one
line on stderr naming the command and what to type, with the exit code of docs/cli.md, and
nothing is started. Real `tui` processes; no worker (each is refused before one is needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from client.helpers import tui
from tui.store import SessionRecord, StatePaths, save_session

SID = "f1a2b3c4d5e6f708"


@pytest.fixture
def made(state_dir: Path) -> str:
    """A session with no worker (a command that is refused must not start one)."""
    state = StatePaths(state_dir)
    (state.sessions / SID).mkdir(parents=True)
    save_session(state, SessionRecord(id=SID, created_at="2026-01-01T00:00:00Z", working_directory="/"))
    return SID[:8]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        # argparse's own refusals: one line naming the command typed and its --help
        (["sessions", "--bogus"], "tui sessions: unrecognized arguments: --bogus; `tui sessions --help`"),
        (["transcript"], "tui transcript: the following arguments are required: id; `tui transcript --help`"),
        (["transcript", "ID", "--format", "xml"], "invalid choice: 'xml'"),
        (["context", "list", "ID", "extra"], "tui context list: unrecognized arguments: extra"),
        (["send", "ID", "print(1)", "--wait", "--timeout", "-1"], "'-1' is not a number of seconds above 0"),
        # the commands' own
        (["rewind", "ID", "--to", "0"], "--to 0: turns count from 1; `tui rewind"),
        (["budget", "ID", "--time", "2"], "'2' has no unit; write e.g. 2s, 2m or 2h"),
        (["share", "ID", "--name", "ana", "--kind", "viewer", "--ttl", "0s"], "--ttl '0s' must be longer"),
        (["search", "line", "--since", "2"], "--since 2 has no unit; write e.g. 2h, 2d or 2w"),
        (["attach", "ID", "--from-line", "0"], "'0' is not a line of the script; its first is 1"),
        (
            ["share", "ID", "--name", "bo", "--kind", "collaborator", "--turns", "-2"],
            "--turns takes 0 or more",
        ),
        (["stop"], "say what to stop, one of: `tui stop ID` (one session), `tui stop --all`"),
    ],
)
def test_a_mistake_is_one_line_saying_what_to_type_and_exits_2(
    state_dir: Path, made: str, argv: list[str], said: str
) -> None:
    out = tui(*(made if word == "ID" else word for word in argv))
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.splitlines()) == 1 and said in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and "usage:" not in out.stderr
    assert not (state_dir / "sessions" / SID / "worker.log").exists()  # no worker was started


def test_help_lists_every_exit_code_and_keeps_its_columns() -> None:
    out = subprocess.run([sys.executable, "-m", "tui", "--help"], capture_output=True, text=True, check=True)
    assert "7 stopped at the session's budget" in out.stdout
    listed = out.stdout.split("Sessions (here")[1].split("Examples:")[0]
    rows = [line for line in listed.splitlines() if line.startswith("  ")]
    assert rows and {len(line) - len(line[30:].lstrip()) for line in rows} == {31}, rows


def test_send_new_of_a_prompt_that_is_not_python_makes_no_session(state_dir: Path) -> None:
    out = tui("send", "--new", "print(1", "--wait")
    assert out.returncode == 1
    assert (
        out.stderr
        == "tui: the prompt is not valid Python: line 1: '(' was never closed; no session was made\n"
    )
    assert not (state_dir / "sessions").exists() or not any((state_dir / "sessions").iterdir())


def test_stop_all_with_no_live_worker_says_nothing_was_stopped(state_dir: Path) -> None:
    out = tui("stop", "--all")
    assert (out.returncode, out.stderr) == (0, "tui: no session has a live worker; nothing was stopped\n")


def test_the_value_of_an_option_before_the_prompt_is_never_read_as_a_command() -> None:
    """`tui --model smart` (a profile's name, two edits from `share`) was refused as a misspelt
    command; so was `tui --default-answer yes` (`web`)."""
    from tui.cli import parse

    assert parse(["--model", "smart"]).model == "smart"
    assert parse(["--default-answer", "yes", "--time", "2h"]).default_answer == "yes"
    out = tui("--model", "smart")
    assert out.returncode == 1 and "there is no model 'smart'" in out.stderr, out.stderr
