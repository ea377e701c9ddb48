"""The session commands the web bridge serves on this machine: list, show, create, wake, stop, …

They are `LocalAccess`'s, so that ``tui --remote NAME sessions`` shows exactly what ``tui
sessions`` shows on that machine; what only the web bridge needs (where a worker's socket is,
asked of the access's `WorkerEngine`; whether a worker stopped on purpose, read from its journal)
is here.
"""

from __future__ import annotations

import os

from tui.access.local import LocalAccess
from tui.errors import InvalidRequest, NotFound, TuiError, WorkerStarting, WorkerUnavailable
from tui.link.launch import bridge_endpoint
from tui.protocol.events import Budget
from tui.protocol.ids import short_id
from tui.protocol.web import SessionSummary, WorkerView
from tui.store import Journal, StatePaths, get_session, resolve_id

__all__ = ["LocalSessions"]

RESTARTING = "\0restarting"
"""What `_left` says of a worker that left for a new one (``tui restart``): not a reason."""


class LocalSessions:
    """This machine's sessions, as the web bridge's routes need them."""

    def __init__(self, state: StatePaths) -> None:
        self.state = state
        self.access = LocalAccess(state)

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

    async def summaries(self, *, include_archived: bool = False) -> list[SessionSummary]:
        """Every session as `tui sessions` lists it, newest first."""
        return await self.access.list_sessions(include_archived=include_archived)

    async def show(self, session_id: str) -> SessionSummary:
        """One session's summary (NotFound when there is none)."""
        return await self.access.show(session_id)

    def worker(self, session_id: str) -> WorkerView:
        """The session's worker now: live, leaving, epoch, version, features.

        With no live worker, ``left`` says whether the last one stopped on purpose (its last
        event is ``worker_leaving``, with its ``reason``): a client then stops following rather
        than wake it.
        """
        get_session(self.state, session_id)
        paths = self.state.session(session_id)
        held = self.access.engine.holds(session_id)
        car = self.access.engine.locate(session_id) if held else None
        if held and car is None:
            return WorkerView(live=False, starting=True)
        if car is None:
            left, reason = _left(Journal.open_for_reading(paths.journal))
            if left and reason == RESTARTING:
                return WorkerView(live=False, starting=True)
            return WorkerView(live=False, left=left, reason=reason)
        return WorkerView(
            live=True,
            leaving=car.leaving,
            epoch=car.epoch,
            version=car.version,
            features=car.features,
            pid=car.pid,
            started_at=car.started_at,
        )

    def socket(self, session_id: str) -> str:
        """The live worker's bridge socket.

        Raises:
            NotFound: no such session.
            WorkerUnavailable: it has no live worker (``no_worker``).
        """
        get_session(self.state, session_id)
        car = self.access.engine.locate(session_id)
        if car is None:
            raise WorkerUnavailable(
                f"session {short_id(session_id)} has no live worker; wake it (POST …/wake) "
                f"or `tui attach {short_id(session_id)}`"
            )
        return bridge_endpoint(car, self.state.session(session_id))

    # --- changing --------------------------------------------------------------------------
    async def create(
        self,
        *,
        working_directory: str,
        agent: str | None,
        model: str | None,
        wait: float,
        parent_id: str | None = None,
        budget: Budget | None = None,
    ) -> str:
        """A new session with its worker started; its id."""
        _check_folder(working_directory)
        new_id = await self.access.create(
            working_directory=working_directory, agent=agent, model=model, parent_id=parent_id, budget=budget
        )
        return new_id

    async def wake(self, session_id: str, *, wait: float) -> WorkerView:
        """Start the session's worker when none runs, and wait for its bridge up to `wait` s."""
        now = self.worker(session_id)
        if now.live and not now.leaving:
            return now
        try:
            await self.access.wake(session_id, wait=max(0.5, wait))
        except WorkerStarting:
            return WorkerView(live=False, starting=True)
        except TuiError:
            raise
        except Exception as exc:
            raise WorkerUnavailable(
                f"the worker of session {short_id(session_id)} did not start: {exc}"
            ) from exc
        return self.worker(session_id)

    async def stop(self, session_id: str) -> bool:
        """Ask the worker to leave and wait for it to let go; False when none was running."""
        return await self.access.stop(session_id)

    async def restart(self, session_id: str, *, wait: float) -> WorkerView:
        """Hand the session over to a new worker (`LocalAccess.restart`); start one if none runs."""
        await self.access.restart(session_id, wait=max(0.5, wait))
        return self.worker(session_id)

    async def archive(self, session_id: str) -> None:
        """Hide the session from lists."""
        await self.access.archive(session_id)

    async def unarchive(self, session_id: str) -> None:
        """List the session again."""
        await self.access.unarchive(session_id)

    async def delete(self, session_id: str, *, force: bool) -> bool:
        """Remove the session; `force` stops a live worker first. Whether one was stopped."""
        live = self.access.engine.holds(session_id)
        await self.access.delete(session_id, force=force)
        return live


def _left(journal: Journal) -> tuple[bool, str]:
    with journal:
        last = journal.last_line()
        if last is None or last.type != "worker_leaving":
            return False, ""
        try:
            said = last.decode()
            if getattr(said, "restarting", False):
                return True, RESTARTING
            return True, str(getattr(said, "reason", "") or "")
        except ValueError:
            return True, ""


def _check_folder(folder: str) -> None:
    if not os.path.isdir(folder):
        raise InvalidRequest(
            f"working_directory {folder!r} is not a folder on this machine", field="working_directory"
        )
