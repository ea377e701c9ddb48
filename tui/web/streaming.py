"""What a follower's stream of `tui web` is, whatever it carries: the page's ``…/changes`` and
the fan-out's ``…/events`` (`tui.web.changes`, `tui.web.fanout`).

Each is one task group: its pump, which sends what it follows; its presence stream, read until
the worker ends it (the worker is leaving: the pump's last writes may still come, for
`LEAVING` seconds); a keepalive when quiet; its end from outside (revoked token, server
stopping) or from the client going away. Each stream says only what it pumps, what it does with
its presence stream and what it lets go of when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from tui.web.forward import KEEPALIVE, OpenStream, RawStream
from tui.web.wire import Wire

__all__ = ["LEAVING", "Emit", "FollowerStream"]

LEAVING = 5.0
"""Seconds a stream whose presence stream ended waits for its pump to end too (the worker is
leaving: its last events still come on what the pump follows)."""

Emit = Callable[[bytes], Awaitable[None]]


class FollowerStream(Response):
    """A follower's event stream; a kind of it gives `_pump`, `_listen` and `_leave`."""

    def __init__(
        self,
        presence: RawStream,
        handle: OpenStream,
        *,
        keepalive: float = KEEPALIVE,
        on_end: Callable[[OpenStream], None] | None = None,
    ) -> None:
        self.presence = presence
        self.handle = handle
        self.keepalive = keepalive
        self.on_end = on_end
        self.sending = asyncio.Lock()
        """Held while `emit` sends: nothing else may write to the client meanwhile."""
        self.wire: Wire | None = None
        """The client's connection, to write to past ASGI (`tui.web.wire`); None when the server
        gives none."""
        self.status_code = 200
        self.background = None
        self.init_headers(
            {"content-type": "text/event-stream", "cache-control": "no-cache", "x-accel-buffering": "no"}
        )

    async def _pump(self, emit: Emit) -> None:
        """Send what this stream follows until it ends."""
        raise NotImplementedError

    async def _listen(self, emit: Emit) -> None:
        """Read the presence stream until the worker ends it."""
        raise NotImplementedError

    async def _leave(self) -> None:
        """Let go of what this stream follows (shielded, after its presence stream is closed)."""

    def _wrote(self) -> float:
        """When something was last written to the client past `emit` (monotonic seconds)."""
        return 0.0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        lock = self.sending
        last = time.monotonic()
        drained = asyncio.Event()
        self.wire = Wire.of(scope)

        async def emit(chunk: bytes) -> None:
            nonlocal last
            async with lock:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            last = time.monotonic()

        async def pump(tg: anyio.abc.TaskGroup) -> None:
            try:
                await self._pump(emit)
            finally:
                drained.set()
            tg.cancel_scope.cancel()

        async def presence(tg: anyio.abc.TaskGroup) -> None:
            await self._listen(emit)
            with anyio.move_on_after(LEAVING):
                await drained.wait()
            tg.cancel_scope.cancel()

        async def ping(tg: anyio.abc.TaskGroup) -> None:
            while True:
                quiet = max(last, self._wrote())
                await anyio.sleep(max(0.05, quiet + self.keepalive - time.monotonic()))
                if time.monotonic() - max(last, self._wrote()) >= self.keepalive:
                    await emit(b": ping\n\n")

        async def ended(tg: anyio.abc.TaskGroup) -> None:
            await self.handle.closed.wait()
            tg.cancel_scope.cancel()

        async def gone(tg: anyio.abc.TaskGroup) -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    self.handle.close("client went away")
                    tg.cancel_scope.cancel()
                    return

        try:
            await send(
                {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
            )
            async with anyio.create_task_group() as tg:
                for task in (pump, presence, ping, ended, gone):
                    tg.start_soon(task, tg)
        finally:
            if self.on_end is not None:
                self.on_end(self.handle)
            with anyio.CancelScope(shield=True):
                await self.presence.aclose()
                await self._leave()
        if self.handle.why != "client went away":
            with contextlib.suppress(OSError, anyio.ClosedResourceError):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
