"""The worker sidecar (``worker.json``): how clients find a live worker's bridge."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ValidationError

from tui.store._atomic import write_atomic
from tui.store.lock import is_live
from tui.store.paths import SessionPaths

__all__ = ["WorkerSidecar", "live_worker", "read_sidecar", "write_sidecar"]


class WorkerSidecar(BaseModel):
    """What a worker writes once its bridge listens."""

    pid: int
    epoch: int
    socket: str
    """The real path of the bridge socket (it may live outside the session's folder)."""
    address: str | None = None
    """``HOST:PORT`` where the bridge also listens on TCP, behind the session's secret
    (``bridge.secret``), when the worker runs on a cluster's node; None: its Unix socket only."""
    started_at: datetime
    version: str
    features: list[str] = []
    leaving: bool = False
    """True once the worker is stopping on purpose: a launcher waits for its lock instead."""

    @property
    def node(self) -> str | None:
        """The host of `address`: the cluster's node the worker runs on (``10.0.0.5``); None
        for a worker of this machine."""
        return self.address.rpartition(":")[0].strip("[]") if self.address else None


def read_sidecar(path: Path) -> WorkerSidecar | None:
    """The sidecar at `path`, or None when there is none or it cannot be read."""
    try:
        return WorkerSidecar.model_validate_json(path.read_bytes())
    except (OSError, ValidationError):
        return None


def write_sidecar(path: Path, sidecar: WorkerSidecar) -> None:
    """Write the sidecar atomically (mode 0600)."""
    write_atomic(path, sidecar.model_dump_json(indent=2) + "\n")


def live_worker(paths: SessionPaths) -> WorkerSidecar | None:
    """Where the session's worker is: the sidecar of the worker holding its lock now; None when
    no worker is live or its bridge is not up yet (it writes ``worker.json`` once it listens)."""
    if not is_live(paths.lock):
        return None
    return read_sidecar(paths.sidecar)
