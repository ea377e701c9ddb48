"""`LocalAccess`: the session commands on this machine's state dir, starting workers as needed."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable, Collection
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from tui import __version__, is_older
from tui.access.base import SessionAccess, SessionSummary, restart_loses
from tui.errors import Busy, TuiError, WorkerRunning, WorkerUnavailable
from tui.link.local import LocalLink
from tui.protocol.events import Budget
from tui.protocol.ids import short_id
from tui.protocol.messages import (
    BudgetRequest,
    BudgetView,
    ChildAdopted,
    ChildAdoptRequest,
    ContextAddRequest,
    ContextEntry,
    ContextList,
    ContextPushed,
    ContextPushRequest,
    Noted,
    NoteRequest,
    Recorded,
    RewindDone,
    RewindRequest,
    ShareRecord,
)
from tui.protocol.routes import BRIDGE
from tui.protocol.web import Found, SearchQuery
from tui.store import (
    SessionRecord,
    StatePaths,
    archive_session,
    create_session,
    delete_session,
    get_session,
    list_sessions,
    resolve_id,
    unarchive_session,
)
from tui.store.export import Format, export

if TYPE_CHECKING:
    from tui.link.client import BridgeClient
    from tui.link.engine import WorkerEngine

__all__ = ["LocalAccess"]


def process_parents() -> dict[int, int]:
    """Every process's parent, from ``/proc`` (empty where there is none)."""
    parents: dict[int, int] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                # pid (comm) state ppid …: comm may hold spaces and parentheses.
                with (
                    contextlib.suppress(OSError, ValueError, IndexError),
                    open(f"/proc/{entry.name}/stat", "rb") as f,
                ):
                    parents[int(entry.name)] = int(f.read().rsplit(b")", 1)[1].split()[1])
    return parents


def tree_memory(pid: int, parents: dict[int, int] | None = None, others: Collection[int] = ()) -> int | None:
    """Resident memory (bytes) of process `pid` and its descendants (`parents`: `process_parents`,
    read now when not given), from ``/proc``, leaving out `others` and theirs (the workers of
    other sessions: a child session's worker started by its parent's is the parent's descendant,
    one started by a command is not, and each is counted in its own row either way); None when
    ``/proc`` does not say (another system, or the process is gone)."""
    if parents is None:
        parents = process_parents()
    tree, todo = {pid}, [pid]
    while todo:
        parent = todo.pop()
        for child, its_parent in parents.items():
            if its_parent == parent and child not in tree and child not in others:
                tree.add(child)
                todo.append(child)
    total, found = 0, False
    for member in tree:
        with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{member}/statm", "rb") as f:
            total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            found = True
    return total if found else None


class LocalAccess(SessionAccess):
    """The sessions of one state dir.

    Args:
        state: the state dir (`StatePaths.resolve()` for the user's).
        engine: where the sessions' workers run; by default the one ``config.toml``'s
            ``[cluster]`` names (`tui.access.engines.engine_for`), chosen at the first use.
    """

    where = "local"

    def __init__(self, state: StatePaths, *, engine: WorkerEngine | None = None) -> None:
        self.progress: Callable[[int, int], None] | None = None
        """Told (bytes done, bytes to do) while a search catches the index up."""
        self.state = state
        self._engine = engine

    @property
    def engine(self) -> WorkerEngine:
        """Where the sessions' workers run: the one seam that starts, finds and stops them."""
        if self._engine is None:
            from tui.access.engines import engine_for

            self._engine = engine_for(self.state)
        return self._engine

    async def _state_of(
        self, record: SessionRecord, parents: dict[int, int] | None = None, workers: Collection[int] = ()
    ) -> SessionSummary:
        paths = self.state.session(record.id)
        live = self.engine.holds(record.id)
        state: str = "archived" if record.status == "archived" else "stopped"
        memory: int | None = None
        idle: tuple[float | None, float | None] = (None, None)
        quiet: float | None = None
        car = self.engine.locate(record.id) if live else None
        version = car.version if car is not None else None
        node = car.node if car is not None else None
        if car is not None and node is None:
            # A worker on a cluster's node (`node`) is another machine's process: its pid says
            # nothing here, so its memory is not measured.
            memory = await asyncio.to_thread(tree_memory, car.pid, parents, workers)
        if car is not None:
            # httpx is imported only when a live worker is asked, so listing stopped
            # sessions does not pay for it.
            from tui.link.launch import worker_client
            from tui.protocol.routes import BRIDGE

            client = worker_client(car, self.state.session(record.id), timeout=2.0)
            try:
                now = await client.call(BRIDGE["transcript"], query={"limit": 0})
                info = await client.call(BRIDGE["info"])
                idle = (info.idle_seconds, info.idle_timeout)
                quiet = info.quiet_seconds
                if record.status != "archived":
                    state = now.state
            except TuiError:
                pass
            finally:
                await client.close()
        elif live and record.status != "archived":
            state = "idle"
        try:
            updated = datetime.fromtimestamp(paths.journal.stat().st_mtime, UTC)
        except OSError:
            updated = None
        return SessionSummary(
            id=record.id,
            title=record.title,
            state=state,  # type: ignore[arg-type]
            live=live,
            folder=record.working_directory,
            created_at=record.created_at,
            updated_at=updated,
            agent=record.agent,
            model=record.model,
            archived=record.status == "archived",
            parent_id=record.parent_id,
            memory=memory,
            idle_seconds=idle[0],
            quiet_seconds=quiet if quiet is not None else idle[0],
            idle_timeout=idle[1],
            worker_version=version,
            outdated=is_older(version),
            node=node,
        )

    async def list_sessions(
        self, *, include_archived: bool = False, only: Collection[str] | None = None
    ) -> list[SessionSummary]:
        """Every session (`only`: those of these ids), newest first."""
        records = await asyncio.to_thread(
            list_sessions, self.state, include_archived=include_archived, only=only
        )
        # /proc is read once for the whole listing, not once a live worker.
        parents = await asyncio.to_thread(process_parents)
        workers = self._workers(records)
        return list(await asyncio.gather(*(self._state_of(r, parents, workers) for r in records)))

    def _workers(self, records: list[SessionRecord]) -> set[int]:
        """The process ids of the live workers of `records`."""
        cars = (self.engine.locate(r.id) for r in records)
        return {car.pid for car in cars if car is not None}

    async def resolve(self, prefix: str) -> str:
        return resolve_id(self.state, prefix)

    async def search(self, query: SearchQuery) -> Found:
        from tui.store.index import find_in  # SQLite: imported by the first search

        return await asyncio.to_thread(find_in, self.state, query, self.progress)

    async def show(self, session_id: str) -> SessionSummary:
        record = get_session(self.state, session_id)
        return await self._state_of(record, None, await asyncio.to_thread(self._other_workers, record.id))

    def _other_workers(self, session_id: str) -> set[int]:
        """The process ids of the live workers of every session but `session_id`."""
        records = list_sessions(self.state, include_archived=True)
        return self._workers([r for r in records if r.id != session_id])

    async def create(
        self,
        *,
        working_directory: str,
        agent: str | None = None,
        model: str | None = None,
        parent_id: str | None = None,
        budget: Budget | None = None,
        before_start: Callable[[str], None] | None = None,
    ) -> str:
        """`SessionAccess.create`; `before_start` is called with the new id before its worker
        starts (``tui fork`` leaves there what the worker is to start from)."""
        from tui.config import load_config
        from tui.worker.agents import check_agent

        config = load_config()
        agent = agent or ("model" if model is not None else config.default_agent)
        model = check_agent(agent, config, model)
        if parent_id is not None:
            get_session(self.state, parent_id)
        self.engine  # noqa: B018 - chosen (or refused, in one line) before anything is made
        record = create_session(
            self.state,
            working_directory=working_directory,
            agent=agent,
            model=model,
            parent_id=parent_id,
            budget=budget,
        )
        if before_start is not None:
            before_start(record.id)
        await self.wake(record.id)
        return record.id

    async def wake(self, session_id: str, *, wait: float = 10.0) -> None:
        get_session(self.state, session_id)
        await self.engine.start(session_id, timeout=wait)

    async def stop(self, session_id: str) -> bool:
        get_session(self.state, session_id)
        return await self.engine.stop(session_id, again=self.command("stop", short_id(session_id)))

    async def interrupt(self, session_id: str, *, client_id: str | None = None) -> bool:
        get_session(self.state, session_id)
        car = self.engine.locate(session_id)
        if car is None:
            return False
        from tui.link.launch import worker_client  # httpx only when a worker is asked
        from tui.protocol import InterruptRequest
        from tui.protocol.routes import BRIDGE

        client = worker_client(
            car, self.state.session(session_id), label=f"the worker of session {short_id(session_id)}"
        )
        try:
            reply = await client.call(BRIDGE["interrupt"], InterruptRequest(client_id=client_id))
            return bool(reply.interrupted)
        finally:
            await client.close()

    @contextlib.asynccontextmanager
    async def _worker(self, session_id: str) -> AsyncIterator[BridgeClient]:
        """A client of the session's worker, started if none runs."""
        await self.wake(session_id)
        car = self.engine.locate(session_id)
        if car is None:
            raise WorkerUnavailable(
                f"the worker of session {short_id(session_id)} stopped as it was asked; "
                f"`{self.command('attach', short_id(session_id))}` starts it again"
            )
        from tui.link.launch import worker_client  # httpx only when a worker is asked

        client = worker_client(
            car, self.state.session(session_id), label=f"the worker of session {short_id(session_id)}"
        )
        try:
            yield client
        finally:
            await client.close()

    async def note(self, session_id: str, request: NoteRequest) -> Noted:
        async with self._worker(session_id) as client:
            noted: Noted = await client.call(BRIDGE["note"], request)
            return noted

    async def rewind(self, session_id: str, request: RewindRequest) -> RewindDone:
        async with self._worker(session_id) as client:
            done: RewindDone = await client.call(BRIDGE["rewind"], request)
            return done

    async def adopt_child(self, parent_id: str, request: ChildAdoptRequest) -> ChildAdopted:
        async with self._worker(parent_id) as client:
            adopted: ChildAdopted = await client.call(BRIDGE["child_adopt"], request)
            return adopted

    async def record_share(self, session_id: str, record: ShareRecord) -> Recorded:
        """Write a share made or revoked into the session's journal (its worker started if none
        runs), so the journal's chain covers it."""
        async with self._worker(session_id) as client:
            done: Recorded = await client.call(BRIDGE["share_record"], record)
            return done

    async def budget(self, session_id: str, request: BudgetRequest | None = None) -> BudgetView:
        async with self._worker(session_id) as client:
            if request is None:
                view: BudgetView = await client.call(BRIDGE["budget"])
            else:
                view = await client.call(BRIDGE["budget_set"], request)
            return view

    async def context_list(self, session_id: str) -> ContextList:
        async with self._worker(session_id) as client:
            listed: ContextList = await client.call(BRIDGE["context_list"])
            return listed

    async def context_add(self, session_id: str, request: ContextAddRequest) -> ContextEntry:
        async with self._worker(session_id) as client:
            entry: ContextEntry = await client.call(BRIDGE["context_add"], request)
            return entry

    async def context_remove(self, session_id: str, name: str) -> None:
        async with self._worker(session_id) as client:
            await client.call(BRIDGE["context_remove"], name=name)

    async def context_push(self, session_id: str, name: str, value: str) -> ContextPushed:
        async with self._worker(session_id) as client:
            pushed: ContextPushed = await client.call(
                BRIDGE["context_push"], ContextPushRequest(value=value), name=name
            )
            return pushed

    async def archive(self, session_id: str) -> None:
        await asyncio.to_thread(archive_session, self.state, session_id)

    async def unarchive(self, session_id: str) -> None:
        await asyncio.to_thread(unarchive_session, self.state, session_id)

    async def restart(self, session_id: str, *, wait: float = 10.0) -> bool:
        get_session(self.state, session_id)
        had = False
        if self.engine.holds(session_id):
            now = await self.show(session_id)
            if now.state in ("working", "asking"):
                short = short_id(session_id)
                raise Busy(
                    f"session {short} is {now.state}; restart it once it is idle, or end the turn with "
                    f"`{self.command('interrupt', short)}` first"
                )
            had = await self.engine.stop(
                session_id,
                again=self.command("restart", short_id(session_id)),
                reason=f"restarted onto tui {__version__}; {restart_loses(now.agent)} are gone",
                restart=True,
            )
        await self.engine.start(session_id, timeout=wait)
        return had

    async def delete(self, session_id: str, *, force: bool = False) -> None:
        get_session(self.state, session_id)
        if self.engine.holds(session_id):
            if not force:
                raise WorkerRunning(
                    f"session {short_id(session_id)} has a live worker; "
                    f"`{self.command('delete', short_id(session_id), '--force')}` stops it first"
                )
            await self.stop(session_id)
        await asyncio.to_thread(delete_session, self.state, session_id)

    async def export(self, session_id: str, fmt: Format) -> AsyncIterator[str]:
        record = get_session(self.state, session_id)
        for piece in export(self.state.session(session_id).journal, fmt, record):
            yield piece

    async def link(self, session_id: str, *, client_id: str) -> LocalLink:
        await self.wake(session_id)
        link = LocalLink(self.state, session_id, client_id=client_id, engine=self.engine)
        link.verbs = self
        return link
