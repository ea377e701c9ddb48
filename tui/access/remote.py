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

from tui.access.base import SessionAccess, SessionSummary
from tui.errors import WorkerUnavailable
from tui.link.remote import RemoteLink, WebClient
from tui.store import StatePaths
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
        self.web = web or WebClient(remote.name, remote.url, read_token_file(remote.token_file))

    def command(self, *words: str) -> str:
        return " ".join(("tui", "--remote", self.remote.name, *words))

    def _path(self, session_id: str) -> str:
        return f"/api/sessions/{session_id}"

    async def list_sessions(self, *, include_archived: bool = False) -> list[SessionSummary]:
        params = {"archived": 1} if include_archived else None
        rows = await self.web.request("GET", "/api/sessions", params=params)
        return [SessionSummary.model_validate(row) for row in rows]

    async def resolve(self, prefix: str) -> str:
        reply = await self.web.request("GET", "/api/sessions/resolve", params={"id": prefix})
        return str(reply["id"])

    async def show(self, session_id: str) -> SessionSummary:
        return SessionSummary.model_validate(await self.web.request("GET", self._path(session_id)))

    async def create(self, *, working_directory: str, agent: str = "python", model: str | None = None) -> str:
        body: dict[str, object] = {"agent": agent, "model": model, "idle": True, "wait": WAIT_SLICE}
        # This machine's current folder means nothing there: leave the choice to the remote
        # (the folder its `tui web` was started in) unless a folder was asked for.
        if _asked_for(working_directory):
            body["working_directory"] = working_directory
        reply = await self.web.request("POST", "/api/sessions", json=body, seconds=WAIT_SLICE + 10)
        return str(reply["id"])

    async def wake(self, session_id: str, *, wait: float = 10.0) -> None:
        deadline = time.monotonic() + wait
        while True:
            left = max(0.5, min(WAIT_SLICE, deadline - time.monotonic()))
            try:
                await self.web.request(
                    "POST", f"{self._path(session_id)}/wake", json={"wait": left}, seconds=left + 10
                )
                return
            except WorkerUnavailable:
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(0.2)

    async def stop(self, session_id: str) -> bool:
        reply = await self.web.request("POST", f"{self._path(session_id)}/stop", json={}, seconds=40.0)
        return bool(reply.get("stopped"))

    async def archive(self, session_id: str) -> None:
        await self.web.request("POST", f"{self._path(session_id)}/archive", json={})

    async def delete(self, session_id: str, *, force: bool = False) -> None:
        params = {"force": 1} if force else None
        await self.web.request("DELETE", self._path(session_id), params=params, seconds=40.0)

    async def link(self, session_id: str, *, client_id: str) -> RemoteLink:
        await self.wake(session_id, wait=WAIT_SLICE)
        return RemoteLink(self.web, session_id, client_id=client_id)


def _asked_for(folder: str) -> bool:
    """Whether `folder` was chosen (``--dir``) rather than this process's current folder."""
    return os.path.abspath(folder) != os.getcwd()
