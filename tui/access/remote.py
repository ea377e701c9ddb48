"""`RemoteAccess`: the session commands on another machine, through its web bridge.

Its methods are `LocalAccess`'s, each one request to the route of the same name, so the command
line cannot tell the difference: a refusal raises the exception the local command would raise,
with the same sentence (its suggested commands spelled ``tui --remote NAME …``). Waits are asked
for in slices of at most `WAIT_SLICE` seconds, so no request outlives a proxy's patience.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from pydantic import BaseModel

from tui.access.base import SessionAccess
from tui.errors import WorkerUnavailable
from tui.link.remote import RemoteLink, WebClient
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
    Interrupted,
    InterruptRequest,
    Noted,
    NoteRequest,
    RewindDone,
    RewindRequest,
)
from tui.protocol.routes import BRIDGE, SESSION_PREFIX, WEB
from tui.protocol.web import (
    AuditReport,
    Created,
    CreateRequest,
    Found,
    Resolved,
    SearchQuery,
    SessionSummary,
    Stopped,
    Verified,
    WakeRequest,
    WorkerView,
)
from tui.store import StatePaths
from tui.store.export import Format
from tui.store.remotes import Remote, get_remote, read_token_file

__all__ = ["WAIT_SLICE", "RemoteAccess", "open_access"]

WAIT_SLICE = 30.0
"""The longest one request waits on the server (a wake); a longer wait asks again."""


def open_access(name: str, state_dir: str | None = None) -> RemoteAccess:
    """The sessions of remote `name` (from ``remotes.toml``).

    Raises:
        NotFound: no remote of that name.
        UsageError: its token file cannot be read.
    """
    return RemoteAccess(get_remote(StatePaths.resolve(state_dir), name))


class RemoteAccess(SessionAccess):
    """The sessions of one remote's ``tui web``.

    Args:
        remote: its entry in ``remotes.toml``.
        web: the client to use (made from `remote` by default).
    """

    def __init__(self, remote: Remote, *, web: WebClient | None = None) -> None:
        self.remote = remote
        self.where = f"remote {remote.name}"
        self.web = web or _client_of(remote)

    def command(self, *words: str) -> str:
        return " ".join(("tui", "--remote", self.remote.name, *words))

    async def list_sessions(self, *, include_archived: bool = False) -> list[SessionSummary]:
        rows: list[SessionSummary] = await self.web.call(
            WEB["sessions"], query={"archived": 1} if include_archived else None
        )
        return rows

    async def resolve(self, prefix: str) -> str:
        resolved: Resolved = await self.web.call(WEB["resolve"], query={"id": prefix})
        return resolved.id

    async def search(self, query: SearchQuery) -> Found:
        found: Found = await self.web.call(WEB["search_all"], query=search_params(query))
        return found

    async def show(self, session_id: str) -> SessionSummary:
        summary: SessionSummary = await self.web.call(WEB["show"], id=session_id)
        return summary

    async def create(
        self,
        *,
        working_directory: str,
        agent: str | None = None,
        model: str | None = None,
        parent_id: str | None = None,
        budget: Budget | None = None,
    ) -> str:
        # This machine's current folder means nothing there: leave the choice to the remote
        # (the folder its `tui web` was started in) unless a folder was asked for.
        body = CreateRequest(
            agent=agent,
            model=model,
            parent_id=parent_id,
            budget=budget,
            idle=True,
            wait=WAIT_SLICE,
            working_directory=working_directory if _asked_for(working_directory) else None,
        )
        created: Created = await self.web.call(WEB["create"], body, seconds=WAIT_SLICE + 10)
        return created.id

    async def wake(self, session_id: str, *, wait: float = 10.0) -> None:
        deadline = time.monotonic() + wait
        while True:
            left = max(0.5, min(WAIT_SLICE, deadline - time.monotonic()))
            try:
                worker: WorkerView = await self.web.call(
                    WEB["wake"], WakeRequest(wait=left), seconds=left + 10, id=session_id
                )
                if worker.live:
                    return
            except WorkerUnavailable:
                if time.monotonic() >= deadline:
                    raise
            else:
                if time.monotonic() >= deadline:
                    raise WorkerUnavailable(
                        f"the worker of session {short_id(session_id)} on {self.remote.name} is still "
                        f"starting; `{self.command('attach', short_id(session_id))}` follows it once it is up"
                    )
            await asyncio.sleep(0.2)

    async def stop(self, session_id: str) -> bool:
        stopped: Stopped = await self.web.call(WEB["stop"], seconds=40.0, id=session_id)
        return stopped.stopped

    async def restart(self, session_id: str, *, wait: float = 10.0) -> bool:
        had = (await self.show(session_id)).live
        await self.web.call(
            WEB["restart"], WakeRequest(wait=min(wait, WAIT_SLICE)), seconds=WAIT_SLICE + 40, id=session_id
        )
        return had

    async def interrupt(self, session_id: str, *, client_id: str | None = None) -> bool:
        if not (await self.show(session_id)).live:
            return False
        route = BRIDGE["interrupt"]
        forwarded = replace(route, path=SESSION_PREFIX + route.path)
        body = InterruptRequest(client_id=client_id)
        done: Interrupted = await self.web.call(forwarded, body, id=session_id)
        return done.interrupted

    async def _worker(
        self, session_id: str, route_name: str, body: BaseModel | None = None, source: str | None = None
    ) -> Any:
        """One of the session's worker routes, through the web bridge (its worker woken first);
        `source` fills a context source's ``{name}``."""
        await self.wake(session_id, wait=WAIT_SLICE)
        route = BRIDGE[route_name]
        forwarded = replace(route, path=SESSION_PREFIX + route.path)
        if source is not None:
            return await self.web.call(forwarded, body, id=session_id, name=source)
        return await self.web.call(forwarded, body, id=session_id)

    async def note(self, session_id: str, request: NoteRequest) -> Noted:
        noted: Noted = await self._worker(session_id, "note", request)
        return noted

    async def rewind(self, session_id: str, request: RewindRequest) -> RewindDone:
        done: RewindDone = await self._worker(session_id, "rewind", request)
        return done

    async def adopt_child(self, parent_id: str, request: ChildAdoptRequest) -> ChildAdopted:
        adopted: ChildAdopted = await self._worker(parent_id, "child_adopt", request)
        return adopted

    async def budget(self, session_id: str, request: BudgetRequest | None = None) -> BudgetView:
        if request is None:
            view: BudgetView = await self._worker(session_id, "budget")
        else:
            view = await self._worker(session_id, "budget_set", request)
        return view

    async def context_list(self, session_id: str) -> ContextList:
        listed: ContextList = await self._worker(session_id, "context_list")
        return listed

    async def context_add(self, session_id: str, request: ContextAddRequest) -> ContextEntry:
        entry: ContextEntry = await self._worker(session_id, "context_add", request)
        return entry

    async def context_remove(self, session_id: str, name: str) -> None:
        await self._worker(session_id, "context_remove", source=name)

    async def context_push(self, session_id: str, name: str, value: str) -> ContextPushed:
        pushed: ContextPushed = await self._worker(
            session_id, "context_push", ContextPushRequest(value=value), source=name
        )
        return pushed

    async def archive(self, session_id: str) -> None:
        await self.web.call(WEB["archive"], id=session_id)

    async def unarchive(self, session_id: str) -> None:
        await self.web.call(WEB["unarchive"], id=session_id)

    async def delete(self, session_id: str, *, force: bool = False) -> None:
        await self.web.call(WEB["delete"], query={"force": 1} if force else None, seconds=40.0, id=session_id)

    async def export(self, session_id: str, fmt: Format) -> AsyncIterator[str]:
        async for piece in self.web.stream_text(WEB["export"], query={"format": fmt}, id=session_id):
            yield piece

    async def verify(self, session_id: str, head: str | None = None) -> Verified:
        """The session's journal checked on that machine (`tui verify`): its chain recomputed
        there, and whether `head` (``SEQ:HASH``, kept elsewhere) is still one of its links."""
        said: Verified = await self.web.call(
            WEB["verify"], query={"head": head} if head else None, seconds=120.0, id=session_id
        )
        return said

    async def audit(self, session_id: str) -> AuditReport:
        """Who did what in the session, read from its journal on that machine (`tui audit`)."""
        report: AuditReport = await self.web.call(WEB["audit"], seconds=120.0, id=session_id)
        return report

    async def link(self, session_id: str, *, client_id: str) -> RemoteLink:
        await self.wake(session_id, wait=WAIT_SLICE)
        link = RemoteLink(self.web, session_id, client_id=client_id)
        link.verbs = self
        return link


def search_params(query: SearchQuery) -> dict[str, Any]:
    """`query` as ``GET /api/search``'s query string."""
    params: dict[str, Any] = {"q": query.q, "limit": query.limit}
    if query.where:
        params["in"] = ",".join(query.where)
    if query.folder:
        params["working_directory"] = query.folder
    if query.agent:
        params["agent"] = query.agent
    if query.since is not None:
        params["since"] = query.since.isoformat()
    if query.active:
        params["active"] = 1
    if query.before is not None:
        params["before"] = query.before
    return params


def _client_of(remote: Remote) -> WebClient:
    if remote.kind == "ssh":
        from tui.link.ssh import ssh_web_client

        return ssh_web_client(remote.name, remote.url, remote.tui)
    return WebClient(remote.name, remote.url, read_token_file(remote.token_file))


def _asked_for(folder: str) -> bool:
    """Whether `folder` was chosen (``--dir``) rather than this process's current folder."""
    return os.path.abspath(folder) != os.getcwd()
