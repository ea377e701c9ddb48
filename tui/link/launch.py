"""A session's worker as a client of this machine starts and stops it: `start_worker` starts one,
detached, and waits until its bridge answers; `stop_worker` asks it to leave, then ends it.

The worker writes ``worker.json`` only once its bridge listens, so a launcher waits for a sidecar
naming the process it started (with a short, growing pause between looks), then asks
``GET /info`` once to be sure. A worker that is leaving is waited out first: its lock is released
before it exits, and a new one starts after.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol

from tui.errors import WorkerStarting, WorkerUnavailable, os_error
from tui.link.forking import forked, forker_ready, forker_socket, process_runs
from tui.protocol.ids import short_id
from tui.store import SessionPaths, StatePaths, WorkerSidecar, live_worker, read_sidecar
from tui.store import is_live as _lock_is_live

if TYPE_CHECKING:
    from tui.link.client import BridgeClient

__all__ = [
    "bridge_endpoint",
    "is_live",
    "live_sidecar",
    "start_worker",
    "start_worker_async",
    "stop_worker",
    "wait_for_bridge",
    "wait_for_release",
    "worker_client",
    "worker_command",
]


def _state(state_dir: StatePaths | str | os.PathLike[str]) -> StatePaths:
    return state_dir if isinstance(state_dir, StatePaths) else StatePaths(Path(state_dir))


def is_live(state_dir: StatePaths | str | os.PathLike[str], session_id: str) -> bool:
    """Whether a worker holds the session's lock now."""
    return _lock_is_live(_state(state_dir).session(session_id).lock)


def live_sidecar(state_dir: StatePaths | str | os.PathLike[str], session_id: str) -> WorkerSidecar | None:
    """The sidecar of the session's live worker; None when no worker is live or its bridge is not up yet."""
    return live_worker(_state(state_dir).session(session_id))


def _pauses(first: float = 0.002, factor: float = 1.5, cap: float = 0.05) -> Callable[[], float]:
    delay = first

    def next_pause() -> float:
        nonlocal delay
        current, delay = delay, min(cap, delay * factor)
        return current

    return next_pause


def _answers_info(sock_path: str, timeout: float) -> bool:
    """Whether the bridge at `sock_path` answers ``GET /info`` with 200."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(max(0.05, timeout))
            s.connect(sock_path)
            s.sendall(b"GET /info HTTP/1.1\r\nhost: worker\r\nconnection: close\r\n\r\n")
            head = s.recv(64)
    except OSError:
        return False
    return head.startswith(b"HTTP/1.1 200")


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def worker_command(state_root: Path, session_id: str) -> list[str]:
    """The command line of a session's worker: ``python -I -m tui.commands.worker``.

    Isolated (``-I``): neither the working folder (which ``-m`` would put first on ``sys.path``) nor
    ``PYTHON*`` variables nor the user's site-packages decide what it imports, so a ``tui`` or
    ``idna`` package, a ``sitecustomize.py`` or a ``.pth`` file a program or an agent wrote in its
    folder never runs on the host. The installation's own site-packages (an editable install's
    ``.pth`` included) are still read. It is started in the session's state folder, which no
    program nor agent can see.
    """
    return [sys.executable, "-I", "-m", "tui.commands.worker", "--state-dir", str(state_root), session_id]


def worker_client(
    car: WorkerSidecar, paths: SessionPaths, *, label: str = "the worker", timeout: float = 10.0
) -> BridgeClient:
    """The client of the worker `car` describes: its Unix socket, or, for a worker on a
    cluster's node (``address`` set), its TCP bridge with the session's secret (``bridge.secret``).

    Raises:
        WorkerUnavailable: the session's secret cannot be read.
    """
    from tui.link.client import BridgeClient  # httpx only when a worker is asked

    if car.address is None:
        return BridgeClient(socket_path=car.socket, label=label, timeout=timeout)
    try:
        token = paths.secret.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkerUnavailable(
            f"{label} listens on {car.address}, but its secret {paths.secret} cannot be read ({exc})"
        ) from exc
    client = BridgeClient(base_url=f"http://{car.address}", token=token, label=label, timeout=timeout)
    client.remote = False  # a worker of this state dir: a transport error means it is gone
    return client


def bridge_endpoint(car: WorkerSidecar, paths: SessionPaths) -> str:
    """Where a forwarder reaches the worker `car` describes: its Unix socket's path, or, for a
    worker on a cluster's node, ``tcp://SECRET@HOST:PORT`` (the session's secret with it).

    Raises:
        WorkerUnavailable: the session's secret cannot be read.
    """
    if car.address is None:
        return car.socket
    try:
        token = paths.secret.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkerUnavailable(
            f"the worker of session {short_id(paths.session_id)} listens on {car.address}, but its "
            f"secret {paths.secret} cannot be read ({exc})"
        ) from exc
    return f"tcp://{token}@{car.address}"


_WORKER_COMMAND = worker_command


def start_worker(
    state_dir: StatePaths | str | os.PathLike[str],
    session_id: str,
    *,
    timeout: float = 10.0,
    on_wait: Callable[[str], None] | None = None,
) -> WorkerSidecar:
    """Make sure the session has a live worker with a listening bridge, starting one if needed.

    Args:
        state_dir: the state dir.
        session_id: the session's full id.
        timeout: seconds to wait for the bridge in all.
        on_wait: called with one line when a leaving worker must be waited out first.

    Returns:
        The live worker's sidecar (its ``socket`` is where the bridge listens).

    Raises:
        WorkerStarting: the worker started but was not ready within `timeout`.
        WorkerUnavailable: no worker came up (the message names worker.log).
    """
    state = _state(state_dir)
    paths = state.session(session_id)
    if not paths.record.exists():
        from tui.errors import NotFound

        raise NotFound(f"no session {session_id!r}; `tui sessions` lists them")
    deadline = time.monotonic() + timeout
    pause = _pauses()

    if _lock_is_live(paths.lock):
        car = read_sidecar(paths.sidecar)
        if car is not None and car.leaving:
            if on_wait is not None:
                on_wait(f"waiting for the previous worker of session {short_id(session_id)} to stop…")
            while _lock_is_live(paths.lock):
                if time.monotonic() > deadline:
                    raise WorkerUnavailable(
                        f"the previous worker of session {short_id(session_id)} (pid {car.pid}) did not stop "
                        f"within {timeout:g} s; try `tui attach {short_id(session_id)}` again"
                    )
                time.sleep(pause())
        else:
            return wait_for_bridge(paths.sidecar, paths.lock, paths.log, None, deadline, session_id)

    try:
        paths.log.parent.mkdir(parents=True, exist_ok=True)
        log = open(paths.log, "ab")  # noqa: SIM115 - closed below, once the worker has it
    except OSError as exc:
        raise os_error(exc, exc.filename or paths.log) from exc
    env = {**os.environ, "TUI_STATE_DIR": str(state.root)}
    with log:
        proc: _Started | None = None
        if worker_command is _WORKER_COMMAND:  # not when a test or a bench changed the command
            proc = forked(state.root, session_id, env, log.fileno())
            # None listens (the state dir's first worker, or the last one left): start it, and
            # fork this worker too. One that listens but did not fork is not waited for again.
            if proc is None and not forker_socket(state.root).exists():
                running = _lock_is_live(state.root / "forker.lock")
                if forker_ready(state.root, running, deadline - 1.0):
                    proc = forked(state.root, session_id, env, log.fileno())
        if proc is None:
            proc = _popen_worker(state, session_id, paths, env, log)
    # Reap it whenever it ends, so no zombie lingers while this process lives on.
    threading.Thread(target=proc.wait, name=f"reap worker {proc.pid}", daemon=True).start()
    if isinstance(proc, subprocess.Popen):
        return wait_for_bridge(paths.sidecar, paths.lock, paths.log, proc, deadline, session_id)
    try:
        return wait_for_bridge(paths.sidecar, paths.lock, paths.log, proc, deadline, session_id)
    except WorkerUnavailable:
        if proc.returncode in (None, 3):
            raise
        # A forked worker that could not start is started on its own, which says why if it fails too.
        with open(paths.log, "ab") as again_log:
            again = _popen_worker(state, session_id, paths, env, again_log)
        threading.Thread(target=again.wait, name=f"reap worker {again.pid}", daemon=True).start()
        return wait_for_bridge(paths.sidecar, paths.lock, paths.log, again, deadline, session_id)


def _popen_worker(
    state: StatePaths, session_id: str, paths: SessionPaths, env: dict[str, str], log: IO[bytes]
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        worker_command(state.root, session_id),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,
        close_fds=True,
        cwd=paths.root,
        env=env,
    )


class _Started(Protocol):
    """A worker this launcher started: on its own (`subprocess.Popen`) or forked (`Forked`)."""

    @property
    def pid(self) -> int: ...
    @property
    def returncode(self) -> int | None: ...
    def poll(self) -> int | None: ...
    def wait(self) -> int | None: ...


def wait_for_bridge(
    sidecar: Path,
    lock: Path,
    log: Path,
    proc: _Started | None,
    deadline: float,
    session_id: str,
) -> WorkerSidecar:
    """Wait until the worker `proc` started (or, when None, the one holding `lock`) writes its
    sidecar and answers ``GET /info`` on its socket, until `deadline` (monotonic); a worker that
    exits 3 lost the lock to another, which is followed instead.

    Raises:
        WorkerStarting: it runs but was not ready in time.
        WorkerUnavailable: it exited, or runs but does not answer.
    """
    pause = _pauses()
    while True:
        car = read_sidecar(sidecar)
        ours = car is not None and not car.leaving and (proc is None or car.pid == proc.pid)
        if ours and car is not None and _answers_info(car.socket, deadline - time.monotonic()):
            return car
        if proc is not None and proc.poll() is not None:
            if proc.returncode == 3:
                # Another launcher's worker won the lock: follow that one instead.
                proc = None
                continue
            raise WorkerUnavailable(
                f"the worker of session {short_id(session_id)} exited at start (code {proc.returncode}); "
                f"{log} says why"
            )
        if proc is None and not _lock_is_live(lock):
            raise WorkerUnavailable(
                f"no worker is running for session {short_id(session_id)}; "
                f"`tui attach {short_id(session_id)}` starts one"
            )
        serving = ours and car is not None and process_runs(car.pid)
        if serving and car is not None and not _is_socket(car.socket):
            # The worker writes its sidecar only once its bridge listens: it runs, and the
            # socket file was deleted under it. Waiting would not bring it back.
            raise WorkerUnavailable(
                f"the worker of session {short_id(session_id)} (pid {car.pid}) runs but its socket "
                f"{car.socket} is gone (deleted?); `tui stop {short_id(session_id)}` ends it, "
                f"then `tui attach {short_id(session_id)}` starts a new one"
            )
        if time.monotonic() > deadline:
            if serving and car is not None:
                sid = short_id(session_id)
                raise WorkerUnavailable(
                    f"the worker of session {sid} (pid {car.pid}) runs but did not answer on {car.socket} "
                    f"within the wait (stopped, or stuck?); `tui stop {sid}` ends it, "
                    f"then `tui attach {sid}` starts a new one"
                )
            if (proc is not None and proc.poll() is None) or (proc is None and _lock_is_live(lock)):
                raise WorkerStarting(
                    f"the worker of session {short_id(session_id)} is still starting; "
                    f"`tui attach {short_id(session_id)}` follows it once it is up (or see {log})"
                )
            raise WorkerUnavailable(
                f"the worker of session {short_id(session_id)} did not answer in time; see {log}"
            )
        time.sleep(pause())


async def start_worker_async(
    state_dir: StatePaths | str | os.PathLike[str],
    session_id: str,
    *,
    timeout: float = 10.0,  # noqa: ASYNC109 - a bound on the wait in a thread
    on_wait: Callable[[str], None] | None = None,
) -> WorkerSidecar:
    """`start_worker` without blocking the event loop."""
    return await asyncio.to_thread(start_worker, state_dir, session_id, timeout=timeout, on_wait=on_wait)


async def wait_for_release(lock: Path, seconds: float) -> bool:
    """Wait until no worker holds `lock`; False when one still does after `seconds`."""
    deadline = time.monotonic() + seconds
    pause = 0.005
    while _lock_is_live(lock):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(pause)
        pause = min(0.1, pause * 1.5)
    return True


async def stop_worker(paths: SessionPaths, *, again: str, reason: str = "", restart: bool = False) -> bool:
    """Ask the session's worker to leave (``POST /leave``) and wait until it let go of the session;
    one that does not go (or cannot be asked) is sent SIGTERM, the way `kill` would end it.

    Args:
        paths: the session's files.
        again: the command that tries again, named when the worker did not stop.
        reason: why, for its `worker_leaving` ("stopped on request" when empty).
        restart: a new worker is started at once; followers wait for it.

    Returns:
        False when no worker was live.

    Raises:
        WorkerUnavailable: the worker still holds the session after SIGTERM.
    """
    if not _lock_is_live(paths.lock):
        return False
    car = read_sidecar(paths.sidecar)
    session_id = paths.root.name
    asked = False
    if car is not None:
        from tui.link.client import BridgeClient  # httpx only when a worker is asked

        label = f"the worker of session {short_id(session_id)}"
        try:
            client = worker_client(car, paths, label=label)
        except WorkerUnavailable:
            client = BridgeClient(socket_path=car.socket, label=label)
        try:
            await client.leave(reason=reason, restart=restart)
            asked = True
        except WorkerUnavailable:
            pass  # its socket is gone or it does not answer: SIGTERM (below) at once
        finally:
            await client.close()
    if (asked or car is None) and await wait_for_release(paths.lock, 10.0):
        return True
    if car is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(car.pid, signal.SIGTERM)
        if await wait_for_release(paths.lock, 5.0):
            return True
    raise WorkerUnavailable(
        f"the worker of session {short_id(session_id)} did not stop; `{again}` tries again"
    )
