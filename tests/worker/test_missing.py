"""A worker's socket deleted under it, a worker that answers nothing, a read-only or vanished
state dir: each is named as what it is in one line with what to do, never a traceback and never
"still starting" for a worker that runs."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from client.helpers import tui
from helpers import wait_until

from tui.access.local import LocalAccess
from tui.link.forking import process_runs
from tui.store import is_live

from .conftest import Worker


def _one_line(out: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr[-3000:]
    assert "still starting" not in lines[0], lines[0]
    return lines[0]


async def test_a_worker_whose_socket_was_deleted_is_named_and_stop_ends_it(worker: Worker) -> None:
    os.unlink(worker.sidecar.socket)
    out = await asyncio.to_thread(tui, "send", worker.session_id[:8], "print(2)")
    assert out.returncode == 4, out.stderr
    line = _one_line(out)
    assert f"(pid {worker.sidecar.pid}) runs but its socket" in line and "is gone" in line, line
    assert f"tui stop {worker.session_id[:8]}" in line
    stopped = await asyncio.to_thread(tui, "stop", worker.session_id[:8])
    assert stopped.returncode == 0, stopped.stderr
    assert not is_live(worker.paths.lock)
    again = await asyncio.to_thread(tui, "send", "--wait", worker.session_id[:8], "print(3)")
    assert again.returncode == 0 and again.stdout.strip() == "3", again.stderr


async def test_stop_ends_a_worker_it_cannot_ask_to_leave(worker: Worker) -> None:
    """Stopping (`tui stop`, and the app's ``/exit`` through its link's verbs: `LocalAccess.stop`):
    a worker whose socket is gone cannot be asked to leave, so it is sent SIGTERM, not waited on
    and then given up."""
    os.unlink(worker.sidecar.socket)
    assert await LocalAccess(worker.state).stop(worker.session_id) is True
    assert not is_live(worker.paths.lock)


async def test_a_worker_that_answers_nothing_is_named(worker: Worker) -> None:
    os.kill(worker.sidecar.pid, signal.SIGSTOP)
    try:
        out = await asyncio.to_thread(tui, "send", worker.session_id[:8], "print(2)")
    finally:
        os.kill(worker.sidecar.pid, signal.SIGCONT)
    assert out.returncode == 4, out.stderr
    line = _one_line(out)
    assert f"(pid {worker.sidecar.pid}) runs but did not answer" in line, line


@pytest.fixture
def read_only(state_dir: Path) -> Iterator[Callable[[], None]]:
    """Make the state dir a read-only mount (as root; skipped where mounting is not allowed)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a read-only state dir needs root")
    mounted = False

    def make() -> None:
        nonlocal mounted
        for args in (["--bind", str(state_dir), str(state_dir)], ["-o", "remount,bind,ro", str(state_dir)]):
            done = subprocess.run(["mount", *args], capture_output=True, text=True)
            if done.returncode != 0:
                pytest.skip(f"cannot mount here: {done.stderr.strip()}")
            mounted = True

    yield make
    if mounted:
        subprocess.run(["umount", str(state_dir)], check=True)


def test_a_read_only_state_dir_is_one_line(
    state_dir: Path, new_session: Callable[[], str], read_only: Callable[[], None]
) -> None:
    sid = new_session()
    read_only()
    for args in (["send", "--new", "print(1)"], ["send", sid[:8], "print(1)"]):
        out = tui(*args)
        assert out.returncode == 1, out.stderr
        line = _one_line(out)
        assert "read-only" in line and str(state_dir) in line, line


async def test_a_deleted_state_dir_is_named_and_its_worker_leaves(worker: Worker, state_dir: Path) -> None:
    shutil.rmtree(state_dir / "sessions")
    await asyncio.to_thread(
        wait_until, lambda: not process_runs(worker.sidecar.pid), "the orphaned worker to leave"
    )
    out = await asyncio.to_thread(tui, "send", worker.session_id[:8], "print(2)")
    assert out.returncode == 1, out.stderr
    assert "was it deleted?" in _one_line(out)
