"""What the web bridge's HTTP connections may cost before any route runs.

uvicorn reads a request's head with no deadline and takes every connection it is offered; a
client that opens connections and never finishes their heads would hold them (and their file
descriptors) for ever. `GuardedH11` is uvicorn's h11 protocol with three bounds:

- a connection must finish a request's head within `HEAD_TIMEOUT` seconds of its first byte (or
  of connecting), or it is closed;
- past `max_connections` open connections a new one is answered 503 ``server_busy`` at once and
  closed;
- a request h11 cannot parse (a 200 KB URL, a malformed header) gets a JSON 400, not plain text.

It also hands each GET request's app a `tui.web.wire.Wire` of its connection, through which the
fan-out writes an event to many followers in one pass.

Each kind of refusal is logged once a minute with how many there were, never a traceback each.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from typing import Any, ClassVar

from tui.errors import InvalidRequest, RequestTimeout, ServerBusy, TuiError
from tui.serve import JsonH11, raw_refusal
from tui.web.wire import WIRE, Wire

__all__ = ["HEAD_TIMEOUT", "GuardedH11", "connection_limit"]

log = logging.getLogger("tui.web")

HEAD_TIMEOUT = 10.0
"""Seconds a connection has to send a whole request head."""
_LOG_EVERY = 60.0


def connection_limit() -> int:
    """How many connections the web bridge keeps open: a third of the open files it may have
    (each stream holds its client's socket and one to the worker), at most 4096."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(32, min(4096, soft // 3))


class _Tally:
    """One log line per kind of refusal a minute, counting the ones not logged."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}
        self._since: dict[str, int] = {}

    def refused(self, code: str, sentence: str) -> None:
        now = time.monotonic()
        self._since[code] = self._since.get(code, 0) + 1
        if now - self._last.get(code, -_LOG_EVERY) >= _LOG_EVERY:
            log.warning("refused %d connection(s) (%s): %s", self._since[code], code, sentence)
            self._last[code] = now
            self._since[code] = 0


TALLY = _Tally()


def _raw(error: TuiError) -> bytes:
    return raw_refusal(error)


class GuardedH11(JsonH11):
    """uvicorn's h11 protocol with a deadline on request heads and bounds on connections, in all
    and per client address.

    At either bound a new connection first displaces the oldest connection (of that address, or
    of any at the total bound) that has not sent a whole request head yet: such a connection
    costs a file descriptor and serves no one, while the new one may be the owner's. Only when
    every connection has served a request is the new one refused 503 ``server_busy``. So a
    client that opens idle connections as fast as they are cut cannot lock the owner out, even
    from the same address, and one address never holds more than `per_client` connections.
    """

    max_connections = 4096
    """Set by the server (`connection_limit`)."""
    _by_peer: ClassVar[dict[str, set[GuardedH11]]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._peer = ""
        self._served = False
        """A whole request head arrived on this connection (it is someone's, in use)."""
        self._since = 0.0

    @classmethod
    def per_client(cls) -> int:
        """Connections one client address may hold: a quarter of all, at least 16."""
        return max(16, cls.max_connections // 4)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._peer = self.client[0] if self.client else ""
        self._since = time.monotonic()
        mine = self._by_peer.setdefault(self._peer, set())
        mine.add(self)
        if len(mine) > self.per_client() and not self._displace(mine):
            self._refuse(
                ServerBusy(
                    f"this address has {self.per_client()} connections open to this web bridge, "
                    "each in use; close some, or try again in a second"
                )
            )
            return
        if len(self.connections) > self.max_connections and not self._displace(self.connections):
            self._refuse(
                ServerBusy(
                    f"this web bridge has {self.max_connections} connections open; try again in a second"
                )
            )
            return
        self._arm()

    def _displace(self, among: set[Any]) -> bool:
        """Close the oldest of `among` (not this one) that has not sent a whole head; False if none."""
        idle = [
            c
            for c in among
            if c is not self and isinstance(c, GuardedH11) and not c._served and not c.transport.is_closing()
        ]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c._since)
        oldest._refuse(ServerBusy("this connection sent no request and was closed for a new one"))
        oldest._forget()
        return True

    def _refuse(self, error: TuiError) -> None:
        TALLY.refused(error.code, str(error))
        self.transport.write(_raw(error))
        self.transport.close()
        self._forget()

    def _forget(self) -> None:
        mine = self._by_peer.get(self._peer)
        if mine is not None:
            mine.discard(self)
            if not mine:
                del self._by_peer[self._peer]
        self.connections.discard(self)

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._arm()
        super().data_received(data)
        if self.cycle is not None:
            self._served = True

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        cycle = self.cycle
        # A new request's cycle: its task is made but not yet run, so its app finds the wire.
        if cycle is not None and cycle is not before and cycle.scope["method"] == "GET":
            cycle.scope.setdefault("extensions", {})[WIRE] = {"wire": Wire(cycle)}

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        self._forget()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._head_timer = self.loop.call_later(HEAD_TIMEOUT, self._head_late, self.cycle)

    def _head_late(self, before: object) -> None:
        self._head_timer = None
        if self.cycle is not before or self.transport.is_closing():
            return
        error = RequestTimeout(f"the request's head did not arrive within {HEAD_TIMEOUT:g} s")
        TALLY.refused(error.code, str(error))
        self.transport.write(_raw(error))
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        TALLY.refused(InvalidRequest.code, f"not an HTTP request this server can read ({msg.rstrip('.')})")
        super().send_400_response(msg)
