"""httpx over a Unix socket (a worker's, or an SSH tunnel's end), for every client of one.

httpx reaches a Unix socket through anyio, whose socket streams wait for a read with
``loop.add_reader(sock, future.set_result, None)``. When the task reading is cancelled (a client
stops following a session that is streaming), the socket can turn readable in the same turn of
the loop, before the reader is taken off: the loop then calls ``set_result`` on the cancelled
future, and asyncio prints "Exception in callback Future.set_result(None) … InvalidStateError" to
stderr, where ``tui send`` writes what a script reads. Nothing is lost (the reader is taken off
right after), so those calls are let go, and every other error of the loop is reported as before.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

__all__ = ["UnixTransport", "tolerate_late_wakeups"]


def _late_wakeup(context: dict[str, Any]) -> bool:
    """Whether the loop's error is a reader or writer waking a future already cancelled."""
    if not isinstance(context.get("exception"), asyncio.InvalidStateError):
        return False
    callback = getattr(context.get("handle"), "_callback", None)
    future = getattr(callback, "__self__", None)
    return (
        isinstance(future, asyncio.Future)
        and getattr(callback, "__name__", "") == "set_result"
        and future.cancelled()
    )


def tolerate_late_wakeups(loop: asyncio.AbstractEventLoop) -> None:
    """Have `loop` let go of late wake-ups (see the module), once; its handler, if any, still
    gets everything else."""
    previous = loop.get_exception_handler()
    if getattr(previous, "tolerates_late_wakeups", False):
        return

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if _late_wakeup(context):
            return
        if previous is None:
            loop.default_exception_handler(context)
        else:
            previous(loop, context)

    handler.tolerates_late_wakeups = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handler)


class UnixTransport(httpx.AsyncHTTPTransport):
    """An httpx transport to the Unix socket at `path` (no TLS, so no CA bundle is loaded: 75 ms
    a client), whose loop lets go of late wake-ups (set up at its first request on a loop)."""

    def __init__(self, path: str, **kwargs: Any) -> None:
        super().__init__(uds=path, verify=False, **kwargs)
        self._loop: asyncio.AbstractEventLoop | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            tolerate_late_wakeups(loop)
            self._loop = loop
        return await super().handle_async_request(request)
