"""`LocalLink`: a session on this machine, reached through the state dir and its worker's socket.

It finds the worker through its `WorkerEngine` (on this machine `LocalEngine`: ``worker.json``
holds the real socket path, the owner lock says whether a worker lives), and reads the journal's
last event to tell a worker that stopped on purpose (``worker_leaving``: gone) from one that died
(restarted through the engine, at most 3 times in 60 s).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Collection, Generator, Hashable, Sequence
from typing import TYPE_CHECKING

from tui.errors import TuiError, WorkerStarting
from tui.link.base import Backoff, Located
from tui.link.bridged import BridgedLink, RestartBudget
from tui.link.engine import LocalEngine, WorkerEngine
from tui.protocol import (
    WorkerLeaving,
)
from tui.protocol.ids import Surface, make_client_id, short_id
from tui.store import Journal, JournalLine, StatePaths, read_span

if TYPE_CHECKING:
    from tui.link.client import BridgeClient

__all__ = ["LocalLink", "local_client_id"]


def local_client_id(surface: Surface = "tui") -> str:
    """This client process: ``tui:<host>:<pid>`` for the app, ``send:<host>:<pid>`` for ``tui send`` …"""
    return make_client_id(surface, socket.gethostname(), os.getpid())


class LocalLink(BridgedLink):
    """One session of this machine's state dir.

    Args:
        state: the state dir.
        session_id: the session's full id.
        client_id: this client (``tui:<host>:<pid>`` by default).
        engine: where the session's worker runs (`LocalEngine` on `state` by default).
    """

    where = "local"
    backoff = Backoff(first=0.1, factor=1.6, jitter=0.2, cap=30.0)
    paths_complete = True
    no_worker_timeout = 10.0

    def __init__(
        self,
        state: StatePaths,
        session_id: str,
        *,
        client_id: str | None = None,
        engine: WorkerEngine | None = None,
    ) -> None:
        self.state = state
        self.engine: WorkerEngine = engine if engine is not None else LocalEngine(state)
        self.no_worker_timeout = self.engine.patience
        self.session_id = session_id
        self.client_id = client_id or local_client_id()
        self.paths = state.session(session_id)
        self._client: BridgeClient | None = None
        self._sidecar_seen: Hashable | None = None
        self._node: str | None = None
        """The cluster's node the worker was last found on (None: this machine, or not found)."""
        self._old_clients: list[BridgeClient] = []
        self._journal: Journal | None = None
        self._restarts = RestartBudget()
        self._starting: asyncio.Task[object] | None = None

    @property
    def short(self) -> str:
        return short_id(self.session_id)

    @property
    def place(self) -> str:
        """``local`` for a worker of this machine; on a cluster, the engine and the node the
        worker was last found on (``ray node 10.0.0.5``, ``ray`` before it is found)."""
        if self.engine.name == LocalEngine.name:
            return self.where
        return f"{self.engine.name} node {self._node}" if self._node else self.engine.name

    @property
    def retry_hint(self) -> float | None:  # type: ignore[override]
        return self._client.retry_hint if self._client is not None else None

    # --- finding the worker --------------------------------------------------------------------
    def bridge_client(self) -> BridgeClient:
        """The client for the live worker's socket (a new one when the socket moved)."""
        seen = self.engine.mark(self.session_id)
        if seen is not None and seen == self._sidecar_seen and self._client is not None:
            # The worker has not moved since last time: the same socket (a request a turn asks once).
            return self._client
        car = self.engine.locate(self.session_id)
        self._sidecar_seen = seen if car is not None else None
        if car is not None:
            self._node = car.node
        # httpx is imported only once a worker is asked something, not by every command.
        from tui.link.client import BridgeClient
        from tui.link.launch import worker_client

        label = f"the worker of session {self.short}"
        if car is not None and car.address is not None:
            endpoint = f"http://{car.address}"
        else:
            endpoint = car.socket if car is not None else str(self.paths.socket)
        if self._client is None or self._client.endpoint != endpoint:
            if self._client is not None:
                self._old_clients.append(self._client)
            if car is not None:
                self._client = worker_client(car, self.paths, label=label)
            else:
                self._client = BridgeClient(socket_path=endpoint, label=label)
        return self._client

    def _last_event_is_leaving(self) -> WorkerLeaving | None:
        try:
            if self._journal is None:
                self._journal = Journal.open_for_reading(self.paths.journal)
            else:
                self._journal.refresh()
        except TuiError:
            # A new worker cut a torn line: read the journal afresh.
            self._journal = Journal.open_for_reading(self.paths.journal)
        last = self._journal.last_line()
        if last is None or last.type != "worker_leaving":
            return None
        try:
            event = last.decode()
        except ValueError:
            return WorkerLeaving()
        return event if isinstance(event, WorkerLeaving) else None

    def stored(
        self, after: int, until: int, types: Collection[str] | None = None
    ) -> Generator[tuple[int, Sequence[JournalLine]]]:
        """Read from the session's journal file in the state dir (which every node of a cluster
        mounts), straight through (`read_span`)."""
        return read_span(self.paths.journal, after, until, types)

    async def locate(self) -> Located:
        """Live, starting (a worker is being restarted or is leaving), or gone for good."""
        if not self.paths.record.exists():
            return Located("gone", f"session {self.short} was deleted")
        if self._starting is not None:
            if not self._starting.done():
                return Located("starting", "a new worker is starting")
            task, self._starting = self._starting, None
            exc = task.exception()
            if isinstance(exc, WorkerStarting):
                # A slow start (a long journal to read) is not a dead session: its lock says
                # whether it still runs, and the next ask finds it live.
                return Located("starting", str(exc))
            if exc is not None:
                self.failure = str(exc)
                return Located("gone", f"the worker could not be restarted: {exc}")
        if self.engine.holds(self.session_id):
            car = self.engine.locate(self.session_id)
            if car is None:
                return Located("starting", "the worker is starting")
            if car.leaving:
                return Located("starting", "the worker is stopping")
            return Located("live", version=car.version, epoch=car.epoch)
        leaving = self._last_event_is_leaving()
        if leaving is not None and leaving.restarting:
            return Located("starting", "the worker is restarting")
        if leaving is not None:
            why = f" ({leaving.reason})" if leaving.reason else ""
            return Located(
                "gone", f"the worker stopped{why}; `{self.command('attach', self.short)}` starts it again"
            )
        if not self._restarts.spend():
            return Located(
                "gone",
                f"the worker of session {self.short} died {self._restarts}; "
                f"see {self.paths.log}, then `{self.command('attach', self.short)}`",
            )

        self._starting = asyncio.create_task(self.engine.start(self.session_id, timeout=self.engine.patience))
        return Located("starting", "the worker stopped unexpectedly; starting a new one")

    async def close(self) -> None:
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()
        for client in [*self._old_clients, *([self._client] if self._client else [])]:
            await client.close()
        self._old_clients.clear()
        self._client = None
        if self._journal is not None:
            self._journal.close()
            self._journal = None
