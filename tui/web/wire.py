"""A follower's connection as the fan-out writes to it directly (`tui.web.fanout`).

An event sent to 1,000 followers through the ASGI layers costs each follower its task woken,
Starlette's wrappers of ``send``, h11's framing and a write: some 28 µs a follower an event, and
the last follower hears an event 30 ms of CPU after the first. The connection a follower's stream
is answered on is uvicorn's h11 protocol of `tui.web.limits.GuardedH11`, which puts a `Wire` of
each GET request's cycle in its scope (an ASGI extension: ``scope["extensions"][WIRE]["wire"]``);
the fan-out writes the same framed bytes to every caught-up follower's `Wire` in one pass, and a
follower that cannot be written now (its client reads slowly, it is writing something else, it
went away) goes back to its own task, which sends through ASGI and waits for its client as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import RequestResponseCycle

__all__ = ["WIRE", "Wire", "chunk"]

WIRE = "tui.wire"
"""The ASGI extension (a key of the scope's ``extensions``) whose ``wire`` is the request's `Wire`."""


class Wire:
    """The transport of one request's answer, for bytes written past its ASGI ``send``: only
    once the answer's head is sent, and only while the transport takes more without waiting."""

    __slots__ = ("_chunked", "_cycle", "transport")

    def __init__(self, cycle: RequestResponseCycle) -> None:
        self._cycle = cycle
        self.transport = cycle.transport
        self._chunked: bool | None = None

    @staticmethod
    def of(scope: Mapping[str, Any]) -> Wire | None:
        """The request's `Wire`; None when its server gives none (an app served in a test)."""
        wire = scope.get("extensions", {}).get(WIRE, {}).get("wire")
        return wire if isinstance(wire, Wire) else None

    @property
    def writable(self) -> bool:
        """The body is being sent, the client is there and the transport is not paused (its
        buffer past the high-water mark: the client reads slowly)."""
        cycle = self._cycle
        return (
            cycle.response_started
            and not cycle.response_complete
            and not cycle.disconnected
            and not cycle.flow.write_paused
            and not self.transport.is_closing()
        )

    @property
    def chunked(self) -> bool | None:
        """Whether a piece of the body goes framed as a chunk (an HTTP/1.1 client) or as it is
        (HTTP/1.0, the body ends when the connection closes); None when no body is being sent."""
        if self._chunked is None:
            # h11 frames a piece of a body sent without a length and counts nothing: asking it to
            # frame one byte writes nothing and changes nothing.
            try:
                self._chunked = self._cycle.conn.send(h11.Data(data=b"x")) != b"x"
            except h11.LocalProtocolError:
                return None
        return self._chunked


def chunk(body: bytes) -> bytes:
    """`body` framed as one chunk of a chunked HTTP/1.1 body, as h11 frames it."""
    return b"%x\r\n%b\r\n" % (len(body), body)
