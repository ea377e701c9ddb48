"""An ACP agent's process: started in a process group of its own (`spawn_agent`), its stderr's
last lines kept, stopped with its whole group (`AgentProcess`), and told from a reused pid by the
session it carries (`group_of_session`)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import acp
from acp import schema

__all__ = ["LINE_LIMIT", "AgentProcess", "group_of_session", "spawn_agent"]

log = logging.getLogger("tui.worker.acp")

LINE_LIMIT = 64 * 1024 * 1024
"""The longest line read from the agent (a whole file's diff is one line)."""

STOP_GRACE = 0.4
"""Seconds the agent's process group gets after SIGTERM before SIGKILL."""

STDERR_LINES = 20
"""How many of the agent's last stderr lines a failed turn quotes."""


async def spawn_agent(
    command: Sequence[str], cwd: Path, env: Mapping[str, str]
) -> asyncio.subprocess.Process:
    """Start an ACP agent: `command` in `cwd` with exactly `env`, in a process group of its own.

    Its stdin and stdout are the protocol's pipes (lines up to `LINE_LIMIT`), its stderr a pipe
    the caller copies to ``worker.log``. This is the one place an agent process is made, so
    confining it (tui's own paths kept from it) is done here.

    Raises:
        OSError: the command cannot be run (not found, not executable).
    """
    return await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
        env=dict(env),
        start_new_session=True,
        limit=LINE_LIMIT,
    )


def group_of_session(pgid: int, session_id: str) -> bool:
    """Whether a live process of process group `pgid` carries this session's ``TUI_SESSION`` (its
    leader, bubblewrap, may be gone while the agent's own processes live on)."""
    marker = f"TUI_SESSION={session_id}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            if (
                int(fields[2]) == pgid
                and fields[0] != "Z"
                and marker in (proc / "environ").read_bytes().split(b"\0")
            ):
                return True
        except (OSError, ValueError, IndexError):
            continue
    return False


class AgentProcess:
    """One running agent: its process, the connection to it, its stderr's last lines."""

    def __init__(self, process: asyncio.subprocess.Process, name: str) -> None:
        self.process = process
        self.name = name
        self.stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self.conn: acp.ClientSideConnection | None = None
        self.session_id = ""
        self.capabilities = schema.AgentCapabilities()
        self.auth_methods: list[Any] = []
        """How the agent says one logs in to it (``initialize``'s auth methods)."""
        self.copying = asyncio.create_task(self._copy_stderr(), name=f"acp {name} stderr")
        self.exited = asyncio.create_task(process.wait(), name=f"acp {name} exit")

    async def _copy_stderr(self) -> None:
        assert self.process.stderr is not None
        while line := await self.process.stderr.readline():
            text = line.decode(errors="replace").rstrip("\n")
            self.stderr.append(text)
            log.info("agent %s: %s", self.name, text)

    def why_gone(self) -> str:
        code = self.process.returncode
        how = "stopped answering" if code is None else f"exited with code {code}"
        if code is not None and code < 0:
            with contextlib.suppress(ValueError):
                how = f"was killed by {signal.Signals(-code).name}"
        last = "\n".join(self.stderr)
        return f"the agent {self.name!r} {how}" + (f"; its last lines:\n{last}" if last else "")

    async def stop(self) -> None:
        """SIGTERM to the agent's process group, SIGKILL after a short grace; nothing is left.

        The group is signalled, not the process: a node launcher's binary and the tools it runs
        outlive it otherwise. SIGKILL is sent even when this is cancelled midway.
        """
        pgid = self.process.pid
        try:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.exited), STOP_GRACE)
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            self.copying.cancel()
        if self.conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.conn.close(), STOP_GRACE)
