"""Where a session's worker runs: `WorkerEngine`, the one seam through which tui starts, finds and
stops a session's worker, and `LocalEngine`, its implementation on this machine.

Every caller (`LocalLink`, `LocalAccess`, the web bridge's wake and stop, a worker's children
through `LocalAccess`) asks an engine, never the owner lock, the sidecar or the process itself;
another engine (a cluster's: Ray, Kubernetes, docs/scale.md) is one more implementation, and
nothing else in tui knows which one runs a session's worker.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Protocol, runtime_checkable

from tui.link import launch
from tui.store import StatePaths, WorkerSidecar

__all__ = ["LocalEngine", "WorkerEngine"]


@runtime_checkable
class WorkerEngine(Protocol):
    """Starts, finds and stops the workers of one state dir's sessions."""

    name: str
    """What the engine is called in words and in ``config.toml`` (``local``)."""
    patience: float
    """Seconds a client waits for a session's worker to come back (restarted by itself or by
    the engine) before it gives up: a cluster's engine brings one back on another node."""

    def holds(self, session_id: str) -> bool:
        """Whether a worker holds the session now: starting, serving or leaving."""
        ...

    def locate(self, session_id: str) -> WorkerSidecar | None:
        """What the worker holding the session says of itself (where its bridge listens, epoch,
        version, whether it is leaving); None when no worker holds it or its bridge is not up yet."""
        ...

    def mark(self, session_id: str) -> Hashable | None:
        """A cheap token that changes whenever the worker may have moved: while it is the same,
        the last `locate` still holds. None when there is none (then ask `locate`)."""
        ...

    async def start(
        self,
        session_id: str,
        *,
        timeout: float = 10.0,  # noqa: ASYNC109 - a bound on the wait for the worker's bridge
        on_wait: Callable[[str], None] | None = None,
    ) -> WorkerSidecar:
        """Make sure the session has a worker whose bridge answers, starting one if needed, and
        return its sidecar.

        Raises:
            NotFound: there is no such session.
            WorkerStarting: the worker started but was not ready within `timeout`.
            WorkerUnavailable: no worker came up (the message says where to look).
        """
        ...

    async def stop(self, session_id: str, *, again: str, reason: str = "", restart: bool = False) -> bool:
        """Ask the session's worker to leave, then end it if it does not; False when none was live.

        Args:
            again: the command that tries again, named when the worker did not stop.
            reason: why, for its `worker_leaving` ("stopped on request" when empty).
            restart: a new worker is started at once; followers wait for it.

        Raises:
            WorkerUnavailable: the worker still holds the session.
        """
        ...


class LocalEngine:
    """Workers as processes of this machine (`tui.link.launch`): ``python -I -m
    tui.commands.worker`` started detached in the session's state folder; the owner lock says
    whether one holds the session, ``worker.json`` where its bridge listens.

    Args:
        state: the state dir.
    """

    name = "local"
    patience = 10.0

    def __init__(self, state: StatePaths) -> None:
        self.state = state

    def holds(self, session_id: str) -> bool:
        return launch.is_live(self.state, session_id)

    def locate(self, session_id: str) -> WorkerSidecar | None:
        return launch.live_sidecar(self.state, session_id)

    def mark(self, session_id: str) -> Hashable | None:
        try:
            st = self.state.session(session_id).sidecar.stat()
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    async def start(
        self,
        session_id: str,
        *,
        timeout: float = 10.0,  # noqa: ASYNC109 - a bound on the wait for the worker's bridge
        on_wait: Callable[[str], None] | None = None,
    ) -> WorkerSidecar:
        # `launch.start_worker_async` is looked up when called: tests replace it.
        return await launch.start_worker_async(self.state, session_id, timeout=timeout, on_wait=on_wait)

    async def stop(self, session_id: str, *, again: str, reason: str = "", restart: bool = False) -> bool:
        return await launch.stop_worker(
            self.state.session(session_id), again=again, reason=reason, restart=restart
        )
