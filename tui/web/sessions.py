"""The session commands the web bridge serves on this machine: list, show, create, wake, stop, …

They work on the state dir and start workers the way the command line does here, so a remote
`tui --remote NAME sessions` shows what `tui sessions` shows on that machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path
from typing import Any

import httpx

from tui.access.base import SessionSummary
from tui.errors import Conflict, InvalidRequest, NotFound, TuiError, WorkerUnavailable
from tui.store import (
    Journal,
    StatePaths,
    archive_session,
    create_session,
    delete_session,
    get_session,
    is_live,
    list_sessions,
    read_sidecar,
    resolve_id,
)

__all__ = ["LocalSessions", "WorkerState"]

_TAIL = 400
"""How many of the journal's last events are searched for the session's state."""


def _last_state(journal_path: Path) -> str:
    """The state of the journal's last ``status`` event (idle when there is none)."""
    with Journal.open_for_reading(journal_path) as journal:
        lines = journal.read_after(max(0, journal.last_seq - _TAIL), _TAIL)
    for line in reversed(lines):
        if line.type == "status":
            event = line.decode()
            return str(getattr(event, "state", "idle"))
    return "idle"


WorkerState = dict[str, Any]


class LocalSessions:
    """This machine's sessions, as the web bridge's routes need them."""

    def __init__(self, state: StatePaths) -> None:
        self.state = state

    # --- reading ---------------------------------------------------------------------------
    def resolve(self, prefix: str) -> str:
        """The full id of an id or unique prefix (NotFound, AmbiguousId)."""
        return resolve_id(self.state, prefix)

    def exists(self, session_id: str) -> bool:
        """Whether a session of this exact id exists."""
        try:
            get_session(self.state, session_id)
        except NotFound:
            return False
        return True

    def summaries(self, *, include_archived: bool = False) -> list[dict[str, Any]]:
        """Every session as `tui sessions` lists it, newest first."""
        return [self._summary(r.id) for r in list_sessions(self.state, include_archived=include_archived)]

    def show(self, session_id: str) -> dict[str, Any]:
        """One session's summary (NotFound when there is none)."""
        return self._summary(session_id)

    def _summary(self, session_id: str) -> dict[str, Any]:
        record = get_session(self.state, session_id)
        paths = self.state.session(session_id)
        live = is_live(paths.lock)
        state = "archived" if record.status == "archived" else "stopped"
        if live:
            state = _last_state(paths.journal)
        summary = SessionSummary(
            id=record.id,
            title=record.title,
            state=state,  # type: ignore[arg-type]
            live=live,
            folder=record.working_directory,
            created_at=record.created_at,
            agent=record.agent,
            model=record.model,
            archived=record.status == "archived",
        )
        data: dict[str, Any] = summary.model_dump(mode="json")
        return data

    def worker(self, session_id: str) -> WorkerState:
        """The session's worker now: live, leaving, epoch, version, features, socket."""
        get_session(self.state, session_id)
        paths = self.state.session(session_id)
        live = is_live(paths.lock)
        sidecar = read_sidecar(paths.sidecar) if live else None
        if sidecar is None:
            return {"live": False, "leaving": False, "epoch": None, "version": None, "features": []}
        return {
            "live": True,
            "leaving": sidecar.leaving,
            "epoch": sidecar.epoch,
            "version": sidecar.version,
            "features": sidecar.features,
            "pid": sidecar.pid,
            "started_at": sidecar.started_at.isoformat(),
        }

    def socket(self, session_id: str) -> str:
        """The live worker's bridge socket.

        Raises:
            NotFound: no such session.
            WorkerUnavailable: it has no live worker (``no_worker``).
        """
        get_session(self.state, session_id)
        paths = self.state.session(session_id)
        sidecar = read_sidecar(paths.sidecar)
        if sidecar is None or not is_live(paths.lock):
            raise WorkerUnavailable(
                f"session {session_id[:8]} has no live worker; wake it (POST …/wake) "
                f"or `tui attach {session_id[:8]}`",
                code="no_worker",
            )
        return sidecar.socket

    # --- changing --------------------------------------------------------------------------
    async def create(self, *, working_directory: str, agent: str, model: str | None, wait: float) -> str:
        """A new session with its worker started; its id."""
        _check_folder(working_directory)
        record = create_session(self.state, working_directory=working_directory, agent=agent, model=model)
        await self.wake(record.id, wait=wait)
        return record.id

    async def wake(self, session_id: str, *, wait: float) -> WorkerState:
        """Start the session's worker when none runs, and wait for its bridge up to `wait` s."""
        record = get_session(self.state, session_id)
        now = self.worker(session_id)
        if now["live"] and not now["leaving"]:
            return now
        try:
            from tui.worker.launch import start_worker  # type: ignore[import-not-found,unused-ignore]

            await asyncio.to_thread(start_worker, self.state, record.id, timeout=max(0.5, wait))
        except TuiError:
            raise
        except Exception as exc:
            raise WorkerUnavailable(
                f"the worker of session {session_id[:8]} did not start: {exc}", code="no_worker"
            ) from exc
        return self.worker(session_id)

    async def stop(self, session_id: str, *, wait: float = 5.0) -> bool:
        """Ask the worker to leave and wait for it to let go; False when none was running."""
        get_session(self.state, session_id)
        paths = self.state.session(session_id)
        sidecar = read_sidecar(paths.sidecar)
        if sidecar is None or not is_live(paths.lock):
            return False
        with contextlib.suppress(httpx.HTTPError):
            async with httpx.AsyncClient(
                transport=httpx.AsyncHTTPTransport(uds=sidecar.socket), base_url="http://worker"
            ) as client:
                await client.post("/leave", json={"wait": wait}, timeout=wait + 5.0)
        deadline = time.monotonic() + wait + 5.0
        while is_live(paths.lock):
            if time.monotonic() > deadline:
                raise Conflict(
                    f"the worker of session {session_id[:8]} did not stop in time; try again",
                    code="worker_running",
                )
            await asyncio.sleep(0.05)
        return True

    async def restart(self, session_id: str, *, wait: float) -> WorkerState:
        """Stop the worker (if any) and start a new one."""
        await self.stop(session_id)
        return await self.wake(session_id, wait=wait)

    def archive(self, session_id: str) -> None:
        """Hide the session from lists."""
        archive_session(self.state, session_id)

    async def delete(self, session_id: str, *, force: bool) -> bool:
        """Remove the session; `force` stops a live worker first. Whether one was stopped."""
        stopped = False
        if force:
            stopped = await self.stop(session_id)
        delete_session(self.state, session_id)
        return stopped


def _check_folder(folder: str) -> None:
    if not os.path.isdir(folder):
        raise InvalidRequest(
            f"working_directory {folder!r} is not a folder on this machine", field="working_directory"
        )
