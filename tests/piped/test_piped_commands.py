"""`/note`, `/context` and `/restart` in a piped script: the same commands as the app's, each
saying on stderr what it did; the script goes on in the new worker after `/restart`."""

from __future__ import annotations

from pathlib import Path

from client.helpers import tui


def test_a_script_leaves_a_note_lists_context_and_restarts_its_worker(state_dir: Path) -> None:
    script = "x = 1\n/note from the script\n/context\n/context remove ci\n/restart\nprint('after')\n"
    out = tui("print('first')", input=script)
    assert out.returncode == 1, out.stderr  # the source to remove is not there
    assert "note left; the agent reads it with its next turn" in out.stderr
    assert "context: none; `tui context add " in out.stderr
    assert "no context source 'ci' in this session" in out.stderr
    restarted = tui("attach", _sid(out.stderr), input="/restart\nprint('after')\n")
    assert restarted.returncode == 0, restarted.stderr
    assert "the session runs in a new worker; its programs' variables are gone" in restarted.stderr
    assert restarted.stdout == "after\n"


def _sid(stderr: str) -> str:
    return next(line.split()[3] for line in stderr.splitlines() if line.startswith("tui: new session"))
