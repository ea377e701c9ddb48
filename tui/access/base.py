"""`SessionAccess`: the session commands, one interface for this machine and another one.

`tui.access.local.LocalAccess` works on the state dir and starts workers; `tui.access.remote`
(later) makes the same calls through a web bridge and raises the same exceptions, so the command
line cannot tell the difference.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator

from tui.link.base import AttachLink
from tui.protocol.events import Budget
from tui.protocol.messages import (
    BudgetRequest,
    BudgetView,
    ChildAdopted,
    ChildAdoptRequest,
    ContextAddRequest,
    ContextEntry,
    ContextList,
    ContextPushed,
    Noted,
    NoteRequest,
    RewindDone,
    RewindRequest,
)
from tui.protocol.web import Found, SearchQuery, SessionSummary
from tui.protocol.wording import restart_loses
from tui.store.export import Format

__all__ = ["SessionAccess", "SessionSummary", "restart_loses"]


class SessionAccess(ABC):
    """Session commands on one machine."""

    where: str = "local"

    @abstractmethod
    async def list_sessions(self, *, include_archived: bool = False) -> list[SessionSummary]:
        """Every session, newest first."""

    @abstractmethod
    async def resolve(self, prefix: str) -> str:
        """The full id for an id or unique prefix. Raises NotFound, AmbiguousId (listing matches)."""

    @abstractmethod
    async def show(self, session_id: str) -> SessionSummary:
        """One session."""

    @abstractmethod
    async def create(
        self,
        *,
        working_directory: str,
        agent: str | None = None,
        model: str | None = None,
        parent_id: str | None = None,
        budget: Budget | None = None,
    ) -> str:
        """A new session with its worker started; returns its id.

        Args:
            working_directory: the session's folder.
            agent: what it runs; None: the machine's ``default_agent`` (config.toml), else python.
            model: its model, for a model-backed agent.
            parent_id: the session that starts it (its child); NotFound when there is none.
            budget: its limits; None: config.toml's ``[budget]``.

        Raises:
            InvalidRequest: an agent this machine cannot run (nothing is created).
        """

    @abstractmethod
    async def wake(self, session_id: str, *, wait: float = 10.0) -> None:
        """Start the session's worker if none runs, and wait for its bridge."""

    @abstractmethod
    async def stop(self, session_id: str) -> bool:
        """Stop the worker; the session stays. False when none was running."""

    @abstractmethod
    async def restart(self, session_id: str, *, wait: float = 10.0) -> bool:
        """Hand the session over to a new worker running the tui installed: the old one leaves
        (``worker_leaving`` with `restarting`, so followers go on with the new one), a new one
        starts. Whether a worker was running.

        Raises:
            Busy: a turn runs or a question waits.
        """

    @abstractmethod
    async def interrupt(self, session_id: str, *, client_id: str | None = None) -> bool:
        """End the running turn ``interrupted`` (``POST /interrupt``) without starting a worker.

        Returns:
            False when no worker is live or no turn was running.
        """

    @abstractmethod
    async def note(self, session_id: str, request: NoteRequest) -> Noted:
        """Leave a note for the agent's next turn (``POST /notes``), its worker started if none runs."""

    @abstractmethod
    async def rewind(self, session_id: str, request: RewindRequest) -> RewindDone:
        """Put the session's files and conversation back as they were before a turn (``POST
        /rewind``), its worker started if none runs.

        Raises:
            Conflict: paths someone else changed since (named; ``force`` overwrites them).
            InvalidRequest: no checkpoints, or no such turn.
        """

    @abstractmethod
    async def adopt_child(self, parent_id: str, request: ChildAdoptRequest) -> ChildAdopted:
        """Have the parent's worker follow a child made from outside (``POST /children``), its
        worker started if none runs.

        Raises:
            InvalidRequest: the session is not the parent's child.
            WorkerUnavailable: the parent's worker could not be started.
        """

    @abstractmethod
    async def budget(self, session_id: str, request: BudgetRequest | None = None) -> BudgetView:
        """The session's limits and spend (``GET /budget``), or with `request` changed
        (``POST /budget``), its worker started if none runs."""

    @abstractmethod
    async def context_list(self, session_id: str) -> ContextList:
        """The session's context sources and their values (``GET /context``), its worker started."""

    @abstractmethod
    async def context_add(self, session_id: str, request: ContextAddRequest) -> ContextEntry:
        """Add a context source (``POST /context``)."""

    @abstractmethod
    async def context_remove(self, session_id: str, name: str) -> None:
        """Remove a context source (``DELETE /context/{name}``)."""

    @abstractmethod
    async def context_push(self, session_id: str, name: str, value: str) -> ContextPushed:
        """A pushed source's new value (``POST /context/{name}/push``)."""

    @abstractmethod
    async def search(self, query: SearchQuery) -> Found:
        """Find text in the sessions (archived included unless `query.active`), newest first."""

    @abstractmethod
    async def archive(self, session_id: str) -> None:
        """Hide the session from lists."""

    @abstractmethod
    async def unarchive(self, session_id: str) -> None:
        """List an archived session again."""

    @abstractmethod
    async def delete(self, session_id: str, *, force: bool = False) -> None:
        """Remove the session. Raises Conflict when a worker is live and not `force`."""

    @abstractmethod
    def export(self, session_id: str, fmt: Format) -> AsyncIterator[str]:
        """The session's whole transcript from its journal, piece by piece (no worker needed)."""

    @abstractmethod
    async def link(self, session_id: str, *, client_id: str) -> AttachLink:
        """An `AttachLink` to the session (its worker started if none runs), handed this access
        as its `verbs`: an attached client's ``/exit``, ``/archive`` and ``/restart`` are these
        commands, with their conditions."""

    def command(self, *words: str) -> str:
        """A command as the user must type it for this machine."""
        return " ".join(("tui", *words))
