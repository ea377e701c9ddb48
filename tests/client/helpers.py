"""Running `tui` as a user does: a real subprocess with its own state dir."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tui.link import changes as ch
from tui.link.attachment import Attachment
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


def kill_worker(state_dir: Path, sid: str) -> int:
    pid = worker_pid(state_dir, sid)
    os.kill(pid, signal.SIGKILL)
    return pid


def journal_seqs(state_dir: Path, sid: str) -> list[int]:
    path = StatePaths(state_dir).session(sid).journal
    return [json.loads(line)["seq"] for line in path.read_text().splitlines() if line.strip()]


async def changes_until(attachment: Attachment, found: Any) -> list[ch.Change]:
    """The changes `attachment` hands out up to the first that `found` accepts (the limit only
    guards against a hang)."""
    seen: list[ch.Change] = []
    async with asyncio.timeout(TIMEOUT):
        while True:
            batch = await attachment.next()
            assert batch is not None
            seen.extend(batch)
            if any(found(c) for c in batch):
                return seen


def of(kind: type, changes: list[ch.Change]) -> list[Any]:
    """The changes of type `kind`."""
    return [c for c in changes if isinstance(c, kind)]


def link_became(kind: type) -> Any:
    """Accepts a `LinkChanged` to a state of type `kind` (`Live`, `Reconnecting`, `Gone`)."""
    return lambda c: isinstance(c, ch.LinkChanged) and isinstance(c.state, kind)
