"""The forking process of a state dir's workers: ``python -I -m tui.commands.forker --state-dir
DIR``, as `tui.link.forking.start_forker` starts it (docs/architecture.md, "Workers").

It imports what ``python -m tui.commands.worker`` imports, once, freezes it out of the garbage
collector's walks (so a forked worker does not write to those pages when it collects), and forks
a worker per request on ``forker.sock``: the child starts a new session, moves to the session's
folder, takes the launcher's environment and the log it was handed as stderr, and runs
`tui.worker.process.main` as ``python -I -m tui.commands.worker`` would. One runs per state dir
(``forker.lock``); it leaves once, for `LINGER` seconds, it has had no worker of its own, when its
socket is gone, or when asked by a launcher whose code is not the code it imported.
"""

from __future__ import annotations

import argparse
import array
import atexit
import contextlib
import gc
import json
import os
import select
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from tui.commands.worker import _uvicorn_without_its_command_line, local_access
from tui.errors import TuiError
from tui.link.forking import LINGER, code_key, forker_socket
from tui.store import OwnerLock, StatePaths


def _child(state: StatePaths, session_id: str, env: dict[str, str], log: int, keep: list[int]) -> int:
    """In the forked child: become the session's worker, as a process of its own would."""
    signal.set_wakeup_fd(-1)
    for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)
    for fd in keep:
        with contextlib.suppress(OSError):
            os.close(fd)
    os.setsid()
    paths = state.session(session_id)
    os.chdir(paths.root)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.dup2(log, 2)
    os.close(devnull)
    os.close(log)
    os.environ.clear()
    os.environ.update(env)
    from tui.worker.process import main

    sys.argv = ["tui.commands.worker", "--state-dir", str(state.root), session_id]
    return main(sys.argv[1:], starter=local_access)


def _warm() -> None:
    """Import what a python session's worker imports by the end of its first turn, and build the
    wire models' validators it builds on first use (`defer_build`), so each is in memory once."""
    import importlib

    import tui.worker.indexing
    import tui.worker.process  # noqa: F401

    for name in (
        "tui.codemode",
        "tui.protocol.python",
        "tui.worker.agents._sandbox",
        "concurrent.futures.thread",
        "anyio.lowlevel",
        "anyio.streams.memory",
        "anyio.streams.stapled",
        "anyio.streams.tls",
        "python_multipart",
        "anyio._backends._asyncio",
        "uvicorn.lifespan.off",
        "tui.worker.agents.python",
        "pwd",
        "encodings.unicode_escape",
    ):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    from pydantic import BaseModel

    from tui.protocol.events import _known

    _known()
    models: list[type[BaseModel]] = [BaseModel]
    while models:
        model = models.pop()
        models.extend(model.__subclasses__())
        if model.__module__.startswith("tui."):
            with contextlib.suppress(Exception):  # a model that cannot be built yet is built on first use
                model.model_rebuild()


def serve(state: StatePaths) -> int:
    lock = OwnerLock(state.root / "forker.lock")
    try:
        lock.acquire()
    except TuiError:  # another forking process serves this state dir
        return 3
    _uvicorn_without_its_command_line()
    _warm()
    key = code_key()
    path = forker_socket(state.root)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    os.chmod(path, 0o600)
    listener.listen(64)
    ours = path.stat().st_ino
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}
    quiet_since = time.monotonic()
    gc.collect()
    gc.freeze()
    try:
        while True:
            ready, _, _ = select.select([listener.fileno(), wake_r], [], [], 1.0)
            if wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 512)
            _reap(children)
            if listener.fileno() in ready:
                conn, _ = listener.accept()
                with conn:
                    request, fds = _request(conn)
                    if request is None or len(fds) != 1:
                        for fd in fds:
                            os.close(fd)
                        continue
                    if request.get("key") != key:  # the installed code changed: a new one starts
                        os.close(fds[0])
                        return 0
                    if threading.active_count() > 1:  # never fork a thread's locks: the launcher starts it
                        os.close(fds[0])
                        return 1
                    pid = os.fork()
                    if pid == 0:
                        code = 1
                        try:
                            keep = [listener.fileno(), wake_r, wake_w, conn.fileno()]
                            keep += [c.fileno() for c in children.values()]
                            if lock._fd is not None:  # closed, not unlocked: the lock stays the parent's
                                keep.append(lock._fd)
                            env = request["env"]
                            assert isinstance(env, dict)
                            code = _child(state, str(request["session_id"]), env, fds[0], keep)
                        finally:
                            atexit._run_exitfuncs()
                            os._exit(code)
                    os.close(fds[0])
                    with contextlib.suppress(OSError):
                        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
                        children[pid] = conn.dup()
            if children:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since > LINGER:
                return 0  # no worker of its own: the next launcher starts one again
            try:
                if path.stat().st_ino != ours:
                    return 0
            except FileNotFoundError:
                return 0
    finally:
        with contextlib.suppress(OSError):
            if path.stat().st_ino == ours:
                path.unlink()
        lock.release()


def _request(conn: socket.socket) -> tuple[dict[str, object] | None, list[int]]:
    conn.settimeout(2.0)
    data, fds = b"", array.array("i")
    try:
        while b"\n" not in data:
            chunk, ancillary, _, _ = conn.recvmsg(65536, socket.CMSG_SPACE(fds.itemsize))
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
            if not chunk:
                return None, list(fds)
            data += chunk
        request = json.loads(data.split(b"\n", 1)[0])
    except (OSError, ValueError):
        return None, list(fds)
    return (request if isinstance(request, dict) else None), list(fds)


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
            conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m tui.commands.forker")
    parser.add_argument("--state-dir", metavar="DIR", required=True)
    raise SystemExit(serve(StatePaths(Path(parser.parse_args().state_dir))))
