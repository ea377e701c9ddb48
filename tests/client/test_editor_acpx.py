"""`tui acp` under `acpx` (npm's ACP command line), an ACP client no one here wrote."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import TIMEOUT

from client.helpers import sessions, tui

ACPX = shutil.which("acpx")

pytestmark = pytest.mark.skipif(
    ACPX is None, reason="acpx is not installed: `npm install -g acpx` (.ci/run does, when npm is there)"
)


def _acpx(tmp_path: Path, *args: str, agent: str = "") -> subprocess.CompletedProcess[str]:
    assert ACPX is not None
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    command = f"{sys.executable} -m tui acp {agent}".strip()
    return subprocess.run(
        [ACPX, "--agent", command, "--approve-all", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 3,
        env={**os.environ, "HOME": str(home)},  # acpx keeps its own state under HOME
        cwd=Path.cwd(),
    )


def test_acpx_exec_runs_a_turn_in_a_new_python_session(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    out = _acpx(tmp_path, "exec", "print(6 * 7)")
    assert out.returncode == 0, out.stderr
    assert "42" in out.stdout and "end_turn" in out.stdout
    [row] = sessions()
    assert row["folder"] == str(work) and row["live"]
    assert "42" in tui("transcript", row["id"]).stdout


def test_acpx_exec_answers_an_acp_agents_permission(acp_tester: Path, tmp_path: Path) -> None:
    out = _acpx(tmp_path, "exec", "permission to test", agent="--agent tester")
    assert out.returncode == 0, out.stderr
    assert "permission: allow-once" in out.stdout
