"""Workers forked from one process per state dir, so that what every worker imports is in memory
once: the client side (`forked`, `forker_ready`); the forking process is `tui.commands.forker`.

A worker started on its own holds about 31 MiB of PSS, almost all of it the modules it imports
(asyncio, pydantic and the wire models' validators, uvicorn, Starlette, tui's). The forking
process imports them once and forks a worker per session, so those pages are shared (a forked
worker holds about 13 MiB of its own). It is started, detached and isolated like a worker
(``python -I -m tui.commands.forker``, in the state dir, which no program nor agent can see), by
the launcher of the state dir's first worker, which waits for it and has that worker forked too;
it leaves once it has had no worker of its own for `LINGER` seconds, and refuses (and leaves)
when the installed code is not the code it imported (`code_key`). A launcher that cannot use it
starts the worker on its own, as before.

The request is one JSON line on ``forker.sock`` (the session, the launcher's environment, the
code key) with the worker's log as a passed file descriptor; the answer is ``{"pid": N}``, then
``{"exit": CODE}`` on the same connection when that worker ends.
"""

from __future__ import annotations

import array
import contextlib
import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import tui

__all__ = ["LINGER", "Forked", "code_key", "forked", "forker_command", "forker_ready", "forker_socket"]

LINGER = 5.0
"""Seconds the forking process stays with no worker of its own before it leaves."""
ANSWER_WITHIN = 2.0
"""Seconds a launcher waits for the forking process's answer before it starts the worker itself."""
READY_WITHIN = 10.0
"""Seconds a launcher waits for a forking process to listen (it imports what a worker imports:
about as long as a worker takes to start) before it starts the worker itself."""


def forker_socket(state_root: Path) -> Path:
    return state_root / "forker.sock"


def code_key() -> str:
    """What the installed code is: the interpreter, and each of tui's modules' path, size and
    modification time (an edit of an editable install changes it, not only a new version)."""
    root = Path(tui.__file__).parent
    digest = hashlib.sha256(f"{sys.executable}\0{tui.__version__}\0{root}".encode())
    for path in sorted(root.rglob("*.py")):
        with contextlib.suppress(OSError):
            st = path.stat()
            digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return digest.hexdigest()


class Forked:
    """A worker forked by the forking process: what `subprocess.Popen` offers a launcher (its pid,
    `poll`, `wait`, `returncode`), told over the connection of the request."""

    def __init__(self, pid: int, conn: socket.socket) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._conn = conn
        self._buffer = b""

    def _read(self, block: bool) -> None:
        if self.returncode is not None:
            return
        self._conn.setblocking(block)
        try:
            while b"\n" not in self._buffer:
                chunk = self._conn.recv(4096)
                if not chunk:  # the forking process went away: the worker's end is not known
                    if not process_runs(self.pid):
                        self.returncode = -1
                    return
                self._buffer += chunk
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return
        with contextlib.suppress(ValueError):
            self.returncode = int(json.loads(self._buffer.split(b"\n", 1)[0])["exit"])
        self._conn.close()

    def poll(self) -> int | None:
        self._read(block=False)
        return self.returncode

    def wait(self) -> int | None:
        self._read(block=True)
        return self.returncode


def process_runs(pid: int) -> bool:
    """Whether process `pid` exists (a zombie counts: it is reaped by whoever started it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def forked(state_root: Path, session_id: str, env: dict[str, str], log: int) -> Forked | None:
    """Ask the state dir's forking process for a worker of `session_id` (its stderr `log`); None
    when there is none, it does not answer in time, or it runs other code (it then leaves)."""
    path = forker_socket(state_root)
    if not path.exists():
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(ANSWER_WITHIN)
        conn.connect(str(path))
        request = json.dumps({"session_id": session_id, "env": env, "key": code_key()}).encode() + b"\n"
        conn.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [log]))])
        answer = b""
        while b"\n" not in answer:
            chunk = conn.recv(4096)
            if not chunk:
                raise ConnectionError("the forking process closed the connection")
            answer += chunk
        line, rest = answer.split(b"\n", 1)
        pid = int(json.loads(line)["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        conn.close()
        return None
    started = Forked(pid, conn)
    started._buffer = rest
    return started


def forker_command(state_root: Path) -> list[str]:
    """The forking process's command line: isolated as a worker's (`tui.link.launch.worker_command`)."""
    return [sys.executable, "-I", "-m", "tui.commands.forker", "--state-dir", str(state_root)]


def forker_ready(state_root: Path, running: bool, deadline: float) -> bool:
    """Whether the state dir's forking process listens, starting it (detached) when none is
    `running`, and waiting for it until `deadline` (monotonic) at most."""
    path = forker_socket(state_root)
    proc: subprocess.Popen[bytes] | None = None
    if not running:
        try:
            with open(state_root / "forker.log", "ab") as log:
                proc = subprocess.Popen(
                    forker_command(state_root),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    start_new_session=True,
                    close_fds=True,
                    cwd=state_root,
                )
        except OSError:
            return False
        threading.Thread(target=proc.wait, name=f"reap forker {proc.pid}", daemon=True).start()
    deadline = min(deadline, time.monotonic() + READY_WITHIN)
    pause = 0.005
    while not path.exists():
        if time.monotonic() > deadline or (proc is not None and proc.returncode is not None):
            return False
        time.sleep(pause)
        pause = min(0.05, pause * 1.5)
    return True
