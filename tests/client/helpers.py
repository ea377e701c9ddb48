"""Running `tui` as a user does: a real subprocess with its own state dir."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tui.store import StatePaths, read_sidecar

TIMEOUT = 60


def tui(
    *args: str, input: str | None = None, timeout: float = TIMEOUT, **kw: Any
) -> subprocess.CompletedProcess[str]:
    """``python -m tui ARGS`` with the test's TUI_STATE_DIR (from the environment)."""
    return subprocess.run(
        [sys.executable, "-m", "tui", *args],
        input=input if input is not None else "",
        capture_output=True,
        text=True,
        timeout=timeout,
        env=os.environ.copy(),
        **kw,
    )


def sessions(all_: bool = False) -> list[dict[str, Any]]:
    out = tui("sessions", "--json", *(["--all"] if all_ else []))
    assert out.returncode == 0, out.stderr
    listed: list[dict[str, Any]] = json.loads(out.stdout)
    return listed


def new_session(state_dir: Path, prompt: str = "print('ready')") -> str:
    out = tui("send", "--new", prompt, "--wait")
    assert out.returncode == 0, out.stderr
    sid = out.stderr.strip().splitlines()[0]
    assert len(sid) == 16, out.stderr
    return sid


def worker_pid(state_dir: Path, sid: str) -> int:
    car = read_sidecar(StatePaths(state_dir).session(sid).sidecar)
    assert car is not None, "no live worker"
    return car.pid


def wait_for(predicate: Any, what: str, timeout: float = 20.0) -> None:
    """Poll `predicate` until true (an event we expect), failing after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def kill_worker(state_dir: Path, sid: str) -> int:
    pid = worker_pid(state_dir, sid)
    os.kill(pid, signal.SIGKILL)
    return pid


def journal_seqs(state_dir: Path, sid: str) -> list[int]:
    path = StatePaths(state_dir).session(sid).journal
    return [json.loads(line)["seq"] for line in path.read_text().splitlines() if line.strip()]


def stop_workers(state_dir: Path) -> None:
    """End every worker of the state dir and its sandbox (their process groups), for test teardown."""
    for car_path in StatePaths(state_dir).sessions.glob("*/worker.json"):
        car = read_sidecar(car_path)
        if car is None:
            continue
        try:
            os.killpg(car.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError):
                os.kill(car.pid, signal.SIGKILL)
