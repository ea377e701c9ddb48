"""Workers forked from the state dir's forking process (`tui.commands.forker`), from the first
on: one process imported what they use, so those pages are in memory once; each forked worker is
the session's worker as one started on its own is (its folder, the launcher's environment, its
own process group, its turns) and imports nothing of its own by the end of its first turn, and a
launcher whose code is not the forking process's starts its worker on its own."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import TIMEOUT, stop_workers, wait_until

from tui.link import forking
from tui.link.forking import forker_socket
from tui.link.launch import start_worker
from tui.store import StatePaths, is_live
from worker.conftest import Worker


def _proc(pid: int, what: str) -> bytes:
    return Path(f"/proc/{pid}/{what}").read_bytes()


def _ppid(pid: int) -> int:
    return int(_proc(pid, "stat").rsplit(b")", 1)[1].split()[1])


async def test_workers_are_forked_from_the_first_and_run_their_sessions_as_their_own(
    state_dir: Path, new_session: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state = StatePaths(state_dir)
    monkeypatch.setenv("TUI_TEST_LAUNCHER", "mine")
    # The forking process (isolated: no PYTHON* variable reaches it) writes every import it makes
    # to its log, and a worker forked from it every import of its own to the worker's log.
    command = forking.forker_command
    monkeypatch.setattr(
        forking, "forker_command", lambda root: [*command(root)[:2], "-X", "importtime", *command(root)[2:]]
    )
    sid, second = new_session(), new_session()
    car = start_worker(state, sid, timeout=TIMEOUT)  # the state dir's first worker
    forker = _ppid(car.pid)
    try:
        assert forker != os.getpid()
        assert b"tui.commands.forker" in _proc(forker, "cmdline")
        assert b"-I" in _proc(forker, "cmdline").split(b"\0")  # isolated, as a worker
        assert _ppid(start_worker(state, second, timeout=TIMEOUT).pid) == forker
        assert os.readlink(f"/proc/{car.pid}/cwd") == str(state.session(sid).root)
        assert b"TUI_TEST_LAUNCHER=mine" in _proc(car.pid, "environ")
        assert os.getpgid(car.pid) == car.pid  # its own process group, as `tui stop` expects
        worker = Worker(state, sid, car)
        try:
            ended = await worker.turn("import os; print(6 * 7)")
            assert (ended["outcome"], ended["reply"]) == ("completed", "42\n")
        finally:
            await worker.close()
        assert "import time:" in (state.root / "forker.log").read_text(), (
            "no import times: the test sees nothing"
        )
        # What a forked worker imports itself is in memory once a session, not once (the forking
        # process imports it for all of them).
        own = [line for line in worker.paths.log.read_text().splitlines() if line.startswith("import time:")]
        assert not own, f"the forked worker imported {own}"

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
