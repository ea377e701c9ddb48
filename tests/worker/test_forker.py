"""Workers forked from the state dir's forking process (`tui.commands.forker`): once `FORK_FROM`
workers run, the next are forked from one process that imported what they use, so those pages
are in memory once; each forked worker is the session's worker as one started on its own is
(its folder, the launcher's environment, its own process group, its turns), and a launcher whose
code is not the forking process's starts its worker on its own."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import TIMEOUT, stop_workers, wait_until

from tui.link import forking
from tui.link.forking import FORK_FROM, forker_socket
from tui.link.launch import start_worker
from tui.store import StatePaths, is_live
from worker.conftest import Worker


def _proc(pid: int, what: str) -> bytes:
    return Path(f"/proc/{pid}/{what}").read_bytes()


def _ppid(pid: int) -> int:
    return int(_proc(pid, "stat").rsplit(b")", 1)[1].split()[1])


async def test_workers_past_the_first_are_forked_and_run_their_sessions_as_their_own(
    state_dir: Path, new_session: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state = StatePaths(state_dir)
    monkeypatch.setenv("TUI_TEST_LAUNCHER", "mine")
    alone = [start_worker(state, new_session(), timeout=TIMEOUT) for _ in range(FORK_FROM + 1)]
    assert all(_ppid(car.pid) == os.getpid() for car in alone)  # started on their own
    # the last of them found FORK_FROM others running and started the forking process
    wait_until(forker_socket(state.root).exists, "the forking process's socket")
    sid = new_session()
    car = start_worker(state, sid, timeout=TIMEOUT)
    forker = _ppid(car.pid)
    try:
        assert forker != os.getpid()
        assert b"tui.commands.forker" in _proc(forker, "cmdline")
        assert b"-I" in _proc(forker, "cmdline").split(b"\0")  # isolated, as a worker
        assert os.readlink(f"/proc/{car.pid}/cwd") == str(state.session(sid).root)
        assert b"TUI_TEST_LAUNCHER=mine" in _proc(car.pid, "environ")
        assert os.getpgid(car.pid) == car.pid  # its own process group, as `tui stop` expects
        worker = Worker(state, sid, car)
        try:
            ended = await worker.turn("import os; print(6 * 7)")
            assert (ended["outcome"], ended["reply"]) == ("completed", "42\n")
        finally:
            await worker.close()

        # A launcher whose code is not the forking process's: it starts its worker on its own,
        # and that forking process leaves (the launcher starts one of its own code in its place).
        monkeypatch.setattr(forking, "code_key", lambda: "other code")
        other = new_session()
        car = start_worker(state, other, timeout=TIMEOUT)
        assert _ppid(car.pid) == os.getpid()
        wait_until(lambda: not Path(f"/proc/{forker}").exists(), "the forking process to leave")
    finally:
        stop_workers(state_dir)
    # With no worker left, a forking process leaves (LINGER), its socket with it.
    wait_until(lambda: not is_live(state.root / "forker.lock"), "the forking process to leave")
    assert not forker_socket(state.root).exists()
