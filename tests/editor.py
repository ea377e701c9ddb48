"""An editor for the tests: the `acp` package's own client side driving ``tui acp`` as a subprocess.

`editor(*args)` starts ``python -m tui acp ARGS`` with the test's environment and yields an `Editor`:
its connection (``conn.initialize``, ``new_session``, ``prompt`` …) and what the agent told it
(every ``session/update``, permission requests, and each ``$/cancel_request``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import acp
from acp import schema
from acp.connection import StreamDirection, StreamEvent
from helpers import TIMEOUT

WAIT = TIMEOUT * 3
"""The bound on waiting for what the agent says (a guard against a hang: a session's first turn
starts a worker, a sandbox and perhaps an ACP agent, slow on a loaded machine)."""


@dataclass
class Asked:
    """A permission request the editor received, and how the test answers it."""

    session_id: str
    tool_call: schema.ToolCallUpdate
    options: list[schema.PermissionOption]
    answer: asyncio.Future[str | None]
    """Set to an option id (or None: cancelled) to answer; left alone, the request stays open."""


@dataclass
class Editor:
    """What the ACP client saw, and its connection to ``tui acp``."""

    stderr: Path
    conn: Any = None
    updates: list[tuple[str, Any]] = field(default_factory=list)
    wire: list[dict[str, Any]] = field(default_factory=list)
    """Each ``session/update`` message as it came on the wire."""
    asked: list[Asked] = field(default_factory=list)
    forms: list[Asked] = field(default_factory=list)
    """The forms (``elicitation/create``) the editor received: `answer` takes the text."""
    cancelled: list[Any] = field(default_factory=list)
    """The request ids of each ``$/cancel_request`` received."""
    sent: dict[Any, str] = field(default_factory=dict)
    """The method of each request the agent sent, by its JSON-RPC id."""
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    # --- the client side (acp.interfaces.Client) ---------------------------------------------
    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.changed.set()

    async def request_permission(
        self,
        session_id: str,
        tool_call: schema.ToolCallUpdate,
        options: list[schema.PermissionOption],
        **kwargs: Any,
    ) -> schema.RequestPermissionResponse:
        asked = Asked(session_id, tool_call, options, asyncio.get_running_loop().create_future())
        self.asked.append(asked)
        self.changed.set()
        chosen = await asked.answer
        if chosen is None:
            return schema.RequestPermissionResponse(outcome=schema.DeniedOutcome(outcome="cancelled"))
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(option_id=chosen, outcome="selected")
        )

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        asked = Asked(
            mode.session_id,
            schema.ToolCallUpdate(tool_call_id=mode.tool_call_id or "", title=message),
            [],
            asyncio.get_running_loop().create_future(),
        )
        self.forms.append(asked)
        self.changed.set()
        text = await asked.answer
        if text is None:
            return schema.DeclineElicitationResponse(action="decline")
        return schema.AcceptElicitationResponse(action="accept", content={"answer": text})

    def observe(self, event: StreamEvent) -> None:
        message = event.message
        if event.direction is StreamDirection.INCOMING:
            if message.get("method") == "session/update":
                self.wire.append(message)
            elif message.get("method") == "$/cancel_request":
                self.cancelled.append((message.get("params") or {}).get("requestId"))
                self.changed.set()
            elif "method" in message and "id" in message:
                self.sent[message["id"]] = message["method"]

    # --- reading what was said -------------------------------------------------------------------
    def said(self, session_id: str, kind: str = "agent_message_chunk") -> str:
        """The text of every update of `kind` to `session_id`, joined."""
        return "".join(
            u.content.text
            for sid, u in self.updates
            if sid == session_id
            and u.session_update == kind
            and isinstance(u.content, schema.TextContentBlock)
        )

    def of(self, session_id: str, kind: str) -> list[Any]:
        return [u for sid, u in self.updates if sid == session_id and u.session_update == kind]

    async def until(self, holds: Callable[[], object], what: str) -> None:
        """Wait until `holds()` is true, woken by each message from the agent."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(WAIT):
                while not holds():
                    self.changed.clear()
                    await self.changed.wait()
        if not holds():
            raise AssertionError(f"timed out waiting for {what}; stderr: {self.stderr.read_text()}")

    async def new(self, cwd: Path) -> str:
        await self.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        made = await self.conn.new_session(cwd=str(cwd))
        return str(made.session_id)

    async def prompt(self, session_id: str, text: str) -> schema.PromptResponse:
        async with asyncio.timeout(WAIT):
            answer: schema.PromptResponse = await self.conn.prompt(
                session_id=session_id, prompt=[acp.text_block(text)]
            )
            return answer


@contextlib.asynccontextmanager
async def editor(*args: str, cwd: Path | None = None) -> AsyncIterator[Editor]:
    """``tui acp ARGS`` under the package's client side; it ends (stdin closed) after the block."""
    log = Path(os.environ["TUI_STATE_DIR"]) / f"acp-{uuid.uuid4().hex[:8]}.log"
    seen = Editor(stderr=log)
    with log.open("w") as err:
        async with acp.spawn_agent_process(
            lambda _agent: seen,  # type: ignore[arg-type,return-value]
            sys.executable,
            "-m",
            "tui",
            "acp",
            *args,
            env=os.environ.copy(),
            cwd=cwd,
            transport_kwargs={"stderr": err.fileno()},
            use_unstable_protocol=True,
            observers=[seen.observe],
        ) as (conn, process):
            seen.conn = conn
            yield seen
            assert process.stdin is not None
            process.stdin.close()
            async with asyncio.timeout(TIMEOUT):
                code = await process.wait()
            assert code == 0, log.read_text()
