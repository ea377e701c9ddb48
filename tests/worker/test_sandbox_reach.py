"""A session started where tui keeps its files (the home folder holding the default state dir):
its programs cannot read the journal or reach a worker's bridge socket, and the session works on."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from helpers import TIMEOUT, stop_workers

from tui.config import load_config
from tui.link.launch import start_worker
from tui.store import StatePaths, create_session
from tui.worker.agents.python import PythonAgent
from worker.conftest import Worker

HAVE_BWRAP = shutil.which("bwrap") is not None or Path("/usr/bin/bwrap").exists()


@pytest.fixture
async def home_worker(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Worker]:
    """A worker whose state dir lies inside its session's working folder, as ``~/.local/state/tui``."""
    if not HAVE_BWRAP:
        pytest.skip("bubblewrap is not installed: without it such a session refuses to run programs")
    with tempfile.TemporaryDirectory(prefix="tui-home-", dir="/tmp") as root:
        home = Path(root)
        state_root = home / ".local" / "state" / "tui"
        state_root.mkdir(parents=True)
        monkeypatch.setenv("TUI_STATE_DIR", str(state_root))
        state = StatePaths(state_root)
        sid = create_session(state, working_directory=home).id
        worker = Worker(state, sid, start_worker(state, sid, timeout=TIMEOUT))
        try:
            yield worker
        finally:
            await worker.close()
            stop_workers(state_root, sid)


async def test_a_program_cannot_read_the_journal_nor_reach_the_bridge(home_worker: Worker) -> None:
    journal = home_worker.paths.journal
    sock = home_worker.sidecar.socket
    assert Path(sock).is_relative_to(home_worker.state.root)

    read = await home_worker.turn(f"open({str(journal)!r}).read()")
    assert read["outcome"] == "failed"
    assert "FileNotFoundError" in read["reply"]

    connect = await home_worker.turn(
        f"import socket\nsocket.socket(socket.AF_UNIX).connect({sock!r})\nprint('connected')"
    )
    assert connect["outcome"] == "failed"
    assert "connected" not in connect["reply"].replace("connect(", "")
    assert "PermissionError" in connect["reply"]

    listing = await home_worker.turn(f"import os\nos.listdir({str(home_worker.state.root)!r})")
    assert listing["reply"] == "[]\n"

    # the session still works: its own working folder as before, and the owner still answers
    works = await home_worker.turn("open('notes.txt', 'w').write('kept')\n6 * 7")
    assert works["outcome"] == "completed" and works["reply"] == "42\n"
    assert (home_worker.state.root.parents[2] / "notes.txt").read_text() == "kept"


def test_tui_paths_writable_is_said_when_the_worker_starts(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "config.toml").write_text("[sandbox]\ntui_paths_writable = true\nhidden = ['~/.secrets']\n")
    settings = load_config(config).sandbox
    assert settings.tui_paths_writable and settings.hidden == [Path("~/.secrets").expanduser()]
    agent = PythonAgent(tmp_path, settings=settings)
    assert agent.notes and "tui_paths_writable" in agent.notes[0]
    assert not PythonAgent(tmp_path).notes


async def test_the_first_screen_says_when_tuis_installation_is_writable(
    state_dir: Path, new_session: Callable[[], str]
) -> None:
    config = Path(os.environ["TUI_CONFIG_DIR"])
    (config / "config.toml").write_text("[sandbox]\ntui_paths_writable = true\n")
    state = StatePaths(state_dir)
    sid = new_session()
    worker = Worker(state, sid, start_worker(state, sid, timeout=TIMEOUT))
    try:
        follower = worker.follow()
        note = await follower.until(lambda e: e.type == "note")
        assert "tui_paths_writable" in note.data["text"]
        kinds = [e.type for e in follower.events]
        assert kinds.index("worker_started") < kinds.index("note")
    finally:
        await worker.close()
