"""`RayEngine`: each session's worker run by a detached, named Ray actor (``tui-ID`` in the
namespace ``tui``), placed by Ray's scheduler (spread over the nodes) and made again by it on
another node when its node is lost (``max_restarts``).

The actor, `WorkerHost`, starts the same worker as on one machine (`launch.worker_command`:
``python -I -m tui.commands.worker`` in the session's state folder), as its child that dies with
it (a lost node takes its workers along). The state dir must be storage every node mounts, whose
``flock`` holds across them: the owner lock and ``worker.json`` still say whether a worker holds a
session and where its bridge listens. The worker listens on its node's address over TCP too
(``worker.json``'s ``address``), for that session alone, behind the session's secret
(``bridge.secret``, mode 0600, written here before the actor is made): a TCP port is not a 0600
socket. Ray is imported only here, and only once a worker is started or stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import Any

from tui.errors import NotFound, TuiError, Unreachable, WorkerUnavailable
from tui.link import launch
from tui.link.engine import LocalEngine
from tui.protocol.ids import short_id
from tui.store import Journal, SessionPaths, StatePaths, WorkerSidecar

__all__ = ["LOST", "NAMESPACE", "RayEngine", "WorkerHost", "actor_name"]

NAMESPACE = "tui"
"""The Ray namespace of tui's actors."""

LOST = "the machine running this turn was lost (its Ray node died); the session came back on another node"
"""How a turn that was running when its node died ends (the new worker's ``worker_started``)."""

BRIDGE_HOST = "TUI_BRIDGE_HOST"
PREDECESSOR_LOST = "TUI_PREDECESSOR_LOST"
"""What the actor tells the worker it starts (`tui.worker.process` reads them): the node's
address to listen on over TCP, and, once the actor was made again after its node died, why the
previous worker is gone."""

LOOPBACK = ("127.0.0.1", "::1", "localhost")


def actor_name(session_id: str) -> str:
    """The name of the actor running the session's worker."""
    return f"tui-{session_id}"


def _die_with_parent() -> None:
    """In the worker, before it runs: end it when the actor that started it ends (Linux), as a
    worker on a lost node would be; elsewhere nothing."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _write_secret(path: Path) -> None:
    """Make the session's secret (mode 0600) unless it has one."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    except OSError as exc:
        raise WorkerUnavailable(f"the session's secret {path} cannot be written ({exc.strerror})") from exc
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(secrets.token_urlsafe(32) + "\n")


def _has_fd(stream: object) -> bool:
    try:
        return int(stream.fileno()) >= 0  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return False


@contextlib.contextmanager
def _real_std_streams() -> Iterator[None]:
    """Standard streams with file descriptors while Ray's driver starts (it hands stderr's to
    `faulthandler`): the app's own (Textual's, with none) are replaced by ``/dev/null`` meanwhile,
    so nothing Ray says reaches the screen."""
    saved = sys.stdout, sys.stderr
    if _has_fd(sys.stdout) and _has_fd(sys.stderr):
        yield
        return
    sink = open(os.devnull, "w")  # noqa: SIM115 - kept open: faulthandler writes to it
    sys.stdout = sys.stdout if _has_fd(sys.stdout) else sink
    sys.stderr = sys.stderr if _has_fd(sys.stderr) else sink
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def _forwarded() -> dict[str, str]:
    """This process's ``TUI_*`` variables, for the workers it has started on other nodes."""
    return {
        k: v
        for k, v in os.environ.items()
        if k.startswith("TUI_") and k not in (BRIDGE_HOST, PREDECESSOR_LOST)
    }


class WorkerHost:
    """The actor: starts the session's worker on its node when made (again, on another node after
    a loss) and whenever asked; ends itself once its worker left for good (idle, or stopped).

    Args:
        state_root: the state dir (the same path on every node).
        session_id: the session's full id.
        env: the ``TUI_*`` variables of the front door that made it, for the worker (its config
            dir, idle timeout, log level …).
    """

    def __init__(self, state_root: str, session_id: str, env: dict[str, str]) -> None:
        import ray

        context = ray.get_runtime_context()
        self.state = StatePaths(Path(state_root))
        self.paths: SessionPaths = self.state.session(session_id)
        self.session_id = session_id
        self.env = env
        self.host = str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call, unused-ignore]
        self.node = context.get_node_id()
        self._lost = bool(context.was_current_actor_reconstructed)
        self._proc: subprocess.Popen[bytes] | None = None
        self._guard = threading.Lock()
        # Made again after its node died: the session comes back at once, without waiting for
        # a client to ask.
        if self._lost:
            with contextlib.suppress(TuiError):
                self._launch()

    def _launch(self) -> subprocess.Popen[bytes]:
        with self._guard:
            if self._proc is not None and self._proc.poll() is None:
                return self._proc
            env = {**os.environ, **self.env, "TUI_STATE_DIR": str(self.state.root), BRIDGE_HOST: self.host}
            if self._lost:
                env[PREDECESSOR_LOST] = LOST
                self._lost = False
            with open(self.paths.log, "ab") as log:
                proc = subprocess.Popen(
                    launch.worker_command(self.state.root, self.session_id),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    close_fds=True,
                    start_new_session=True,
                    cwd=self.paths.root,
                    env=env,
                    preexec_fn=_die_with_parent,  # one libc call in the child, no lock taken
                )
            self._proc = proc
            threading.Thread(target=self._watch, args=(proc,), name="worker", daemon=True).start()
            return proc

    def _watch(self, proc: subprocess.Popen[bytes]) -> None:
        """Wait for the worker; once it left for good (not to be restarted), end this actor so
        a stopped session costs only storage."""
        proc.wait()
        if proc.returncode != 0 or not self._left_for_good():
            return
        import ray

        with contextlib.suppress(Exception):
            ray.kill(ray.get_runtime_context().current_actor, no_restart=True)

    def _left_for_good(self) -> bool:
        try:
            journal = Journal.open_for_reading(self.paths.journal)
        except TuiError:
            return False
        try:
            last = journal.last_line()
        finally:
            journal.close()
        if last is None or last.type != "worker_leaving":
            return False
        try:
            return not getattr(last.decode(), "restarting", False)
        except ValueError:
            return True

    def start(self, timeout: float) -> str:
        """The live worker's sidecar as JSON, started on this node if none runs."""
        proc = self._launch()
        deadline = time.monotonic() + timeout
        paths = self.paths
        car = launch.wait_for_bridge(paths.sidecar, paths.lock, paths.log, proc, deadline, self.session_id)
        return car.model_dump_json()

    def where(self) -> str:
        """The Ray node this actor runs on."""
        return str(self.node)


class RayEngine:
    """Workers placed by a Ray cluster; this process is a Ray driver, on a node of the cluster.

    Args:
        state: the state dir (on storage every node mounts).
        address: the Ray cluster's address (``HOST:PORT``, what ``ray start --head`` printed).
        resources: what each session's actor asks for (only nodes that have it run sessions).
    """

    name = "ray"
    patience = 60.0
    """Ray notices a lost node, makes its actors again elsewhere (a new Ray worker process),
    whose workers read their journals: seconds on a loaded cluster, not the 10 of one machine."""

    def __init__(self, state: StatePaths, address: str, resources: dict[str, float] | None = None) -> None:
        self.state = state
        self.address = address
        self.resources = dict(resources or {})
        self._files = LocalEngine(state)

    def _ray(self) -> Any:
        host = self.address.rpartition(":")[0].strip("[]")
        if host in LOOPBACK:
            # A cluster bound to this machine's loopback (one machine, tests): Ray would rewrite
            # 127.0.0.1 to the machine's own address, where such a cluster does not listen.
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        import ray  # only here, once a worker is started or stopped

        if not ray.is_initialized():
            # What Ray's driver says of itself (joined from a thread, not the main one) is not
            # what a user of `tui send` reads on stderr.
            logging.getLogger("ray").setLevel(logging.ERROR)
            try:
                with _real_std_streams():
                    ray.init(
                        address=self.address,
                        namespace=NAMESPACE,
                        log_to_driver=False,
                        logging_level=logging.ERROR,
                        configure_logging=False,
                    )
            except Exception as exc:
                raise Unreachable(
                    f"the Ray cluster at {self.address} ([cluster] address in config.toml) could not "
                    f"be joined: {exc}"
                ) from exc
        return ray

    def holds(self, session_id: str) -> bool:
        return self._files.holds(session_id)

    def locate(self, session_id: str) -> WorkerSidecar | None:
        return self._files.locate(session_id)

    def mark(self, session_id: str) -> Hashable | None:
        return self._files.mark(session_id)

    async def start(
        self,
        session_id: str,
        *,
        timeout: float = 10.0,  # noqa: ASYNC109 - a bound on the wait for the worker's bridge
        on_wait: Callable[[str], None] | None = None,
    ) -> WorkerSidecar:
        paths = self.state.session(session_id)
        if not paths.record.exists():
            raise NotFound(f"no session {session_id!r}; `tui sessions` lists them")
        car = self._files.locate(session_id)
        if car is not None and not car.leaving and car.address is not None:
            return car
        return await asyncio.to_thread(self._start, paths, timeout)

    def _start(self, paths: SessionPaths, timeout: float) -> WorkerSidecar:
        _write_secret(paths.secret)
        ray = self._ray()
        host = ray.remote(WorkerHost).options(
            name=actor_name(paths.session_id),
            namespace=NAMESPACE,
            lifetime="detached",
            get_if_exists=True,
            max_restarts=-1,
            max_task_retries=2,
            num_cpus=0,
            resources=self.resources,
            scheduling_strategy="SPREAD",
        )
        # Ray's first start of a worker process on a node is slow; the bridge's wait is on top.
        bound = timeout + 60.0
        last: Exception | None = None
        for _ in range(3):
            actor = host.remote(str(self.state.root), paths.session_id, _forwarded())
            try:
                made = ray.get(actor.start.remote(timeout), timeout=bound)
            except ray.exceptions.ActorDiedError as exc:
                last = exc  # an actor ending as this one was asked (its worker left): a new one
                continue
            except ray.exceptions.RayTaskError as exc:
                cause = exc.as_instanceof_cause()
                raise cause if isinstance(cause, TuiError) else WorkerUnavailable(str(exc)) from exc
            except Exception as exc:
                raise WorkerUnavailable(
                    f"the Ray actor of session {short_id(paths.session_id)} did not start its worker: {exc}"
                ) from exc
            return WorkerSidecar.model_validate_json(made)
        raise WorkerUnavailable(
            f"the Ray actor of session {short_id(paths.session_id)} kept ending: {last}; see {paths.log}"
        )

    async def stop(self, session_id: str, *, again: str, reason: str = "", restart: bool = False) -> bool:
        paths = self.state.session(session_id)
        had = self._files.holds(session_id)
        if had:
            car = self._files.locate(session_id)
            asked = False
            if car is not None:
                client = launch.worker_client(
                    car, paths, label=f"the worker of session {short_id(session_id)}"
                )
                try:
                    await client.leave(reason=reason, restart=restart)
                    asked = True
                except WorkerUnavailable:
                    pass
                finally:
                    await client.close()
            if not ((asked or car is None) and await launch.wait_for_release(paths.lock, 10.0)):
                # It does not go: its actor is ended, and the worker with it (wherever it runs).
                await asyncio.to_thread(self._end_actor, session_id)
                if not await launch.wait_for_release(paths.lock, 10.0):
                    raise WorkerUnavailable(
                        f"the worker of session {short_id(session_id)} did not stop; `{again}` tries again"
                    )
        if not restart:
            await asyncio.to_thread(self._end_actor, session_id)
        return had

    def _end_actor(self, session_id: str) -> None:
        ray = self._ray()
        try:
            actor = ray.get_actor(actor_name(session_id), namespace=NAMESPACE)
        except ValueError:
            return
        ray.kill(actor, no_restart=True)

    def node_of(self, session_id: str) -> str | None:
        """The Ray node running the session's actor; None when it has none."""
        ray = self._ray()
        try:
            actor = ray.get_actor(actor_name(session_id), namespace=NAMESPACE)
        except ValueError:
            return None
        return str(ray.get(actor.where.remote(), timeout=30.0))
