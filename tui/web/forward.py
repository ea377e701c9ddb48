"""Forwarding a session's routes to its worker's bridge over the worker's Unix socket (or, for a
worker on a cluster's node, over TCP with the session's secret: an endpoint ``tcp://SECRET@HOST:PORT``,
`tui.link.launch.bridge_endpoint`).

Plain requests are answered with the worker's status and body as they are. The event stream is
passed through chunk by chunk as it arrives (never buffered); the web bridge may end it early
(the token was revoked, the server is stopping, the client went away) and adds an SSE comment
as keepalive when the worker has been quiet for `KEEPALIVE` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field

import httpx
from starlette.responses import Response

from tui.errors import WorkerUnavailable
from tui.link.uds import UnixTransport
from tui.redact import redact_json

__all__ = ["FORWARDED_HEADERS", "KEEPALIVE", "SIGNED_IN", "Forwarder", "OpenStream", "RawStream"]

KEEPALIVE = 15.0
"""Seconds of silence on a remote stream before the web bridge sends ``: ping``."""

REQUEST_CONNECTIONS = 32
"""Plain requests in flight to one worker at once; more wait up to `POOL_WAIT` seconds."""
POOL_WAIT = 10.0
"""Seconds a plain request waits for a connection before it is answered 503."""

SIGNED_IN: ContextVar[str] = ContextVar("tui_signed_in", default="")
"""The page sign-in (its page digest) of the request being served, set by the gate for every
request (empty: a token's), so a stream opened by any route knows the sign-in it belongs to."""

FORWARDED_HEADERS = ("content-type", "last-event-id", "accept")
_PASS_REPLY = ("content-type", "retry-after", "location")


@dataclass(eq=False)
class OpenStream:
    """One event stream the web bridge is forwarding, so it can be ended from outside."""

    token_digest: str
    session_id: str
    participant_id: str | None = None
    signin: str = field(default_factory=lambda: SIGNED_IN.get())
    """The page digest of the page sign-in it was opened with (`tui.web.signin`), so signing out
    ends it: by default the request's (`SIGNED_IN`, set by the gate); empty for a token."""
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    why: str = ""

    def close(self, why: str) -> None:
        """End the stream at its next chance (within a few milliseconds)."""
        self.why = self.why or why
        self.closed.set()


class Forwarder:
    """Two httpx clients per worker socket, reused across requests: one for plain requests (a
    bounded pool) and one for event streams (unbounded: a stream holds its connection for hours),
    so open streams never starve the requests of the same session."""

    def __init__(self) -> None:
        self._clients: dict[str, httpx.AsyncClient] = {}
        self._streams: dict[str, httpx.AsyncClient] = {}

    def _client(self, socket: str, *, stream: bool = False) -> httpx.AsyncClient:
        clients = self._streams if stream else self._clients
        client = clients.get(socket)
        if client is None or client.is_closed:
            limits = (
                httpx.Limits(max_connections=None, max_keepalive_connections=0)
                if stream
                else httpx.Limits(max_connections=REQUEST_CONNECTIONS, max_keepalive_connections=8)
            )
            tcp = _tcp(socket)
            transport: httpx.AsyncBaseTransport
            if tcp is None:
                transport, base, auth = UnixTransport(socket, limits=limits), "http://worker", {}
            else:
                secret, host, port = tcp
                transport = httpx.AsyncHTTPTransport(limits=limits)
                base, auth = f"http://{host}:{port}", {"Authorization": f"Bearer {secret}"}
            client = httpx.AsyncClient(
                transport=transport,
                base_url=base,
                headers=auth,
                timeout=httpx.Timeout(60.0, connect=5.0, pool=POOL_WAIT),
            )
            clients[socket] = client
        return client

    async def forget(self, socket: str) -> None:
        """Drop the request client of a socket whose worker went away.

        The stream client stays: closing it would end every open stream of the session at once,
        and a stream whose worker died ends by itself.
        """
        client = self._clients.pop(socket, None)
        if client is not None:
            await client.aclose()

    async def close(self) -> None:
        """Close every client (on shutdown)."""
        clients = [*self._clients.values(), *self._streams.values()]
        self._clients, self._streams = {}, {}
        for client in clients:
            await client.aclose()

    def _request(
        self,
        socket: str,
        method: str,
        path: str,
        *,
        query: bytes,
        headers: Mapping[str, str],
        body: bytes,
        extra: Mapping[str, str],
        stream: bool = False,
    ) -> tuple[httpx.AsyncClient, httpx.Request]:
        client = self._client(socket, stream=stream)
        sent = {k: v for k, v in headers.items() if k.lower() in FORWARDED_HEADERS}
        sent.update(extra)
        url = httpx.URL(path, query=query)
        return client, client.build_request(method, url, headers=sent, content=body or None)

    async def send(
        self,
        socket: str,
        method: str,
        path: str,
        *,
        query: bytes = b"",
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
        extra: Mapping[str, str] | None = None,
    ) -> Response:
        """Forward one plain request; the worker's answer as a response.

        Raises:
            WorkerUnavailable: the worker could not be reached (``no_worker``).
        """
        client, request = self._request(
            socket, method, path, query=query, headers=headers or {}, body=body, extra=extra or {}
        )
        try:
            reply = await client.send(request)
        except httpx.PoolTimeout as exc:
            # Busy, not gone: the connections in use stay open.
            raise _unavailable(exc) from exc
        except httpx.TransportError as exc:
            await self.forget(socket)
            raise _unavailable(exc) from exc
        kept = {k: v for k, v in reply.headers.items() if k.lower() in _PASS_REPLY}
        # What the worker answers leaves the machine: its secrets are taken out (`tui.redact`).
        return Response(redact_json(reply.content), status_code=reply.status_code, headers=kept)

    async def open_stream(
        self,
        socket: str,
        path: str,
        *,
        query: bytes,
        headers: Mapping[str, str],
        extra: Mapping[str, str] | None = None,
    ) -> RawStream:
        """Open a streamed answer of the worker (its event stream, a turn's output); the caller
        reads its body and closes it.

        Raises:
            WorkerUnavailable: the worker could not be reached (``no_worker``).
        """
        sent = {k: v for k, v in headers.items() if k.lower() in FORWARDED_HEADERS}
        sent.update(extra or {})
        try:
            return await RawStream.open(socket, path, query, sent)
        except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError) as exc:
            raise _unavailable(exc) from exc


class RawStream:
    """A streamed answer read straight off the worker's socket, as HTTP/1.0 (no chunked framing:
    the body is the bytes until the worker closes), with no HTTP client in between.

    A stream's every chunk is passed on to a client at once; with hundreds of followers the cost
    per chunk is what bounds how fast each event reaches them, so it is kept to one read here.
    """

    CONNECT = 5.0
    """Seconds to connect and read the head of the answer."""
    CHUNK = 1 << 16

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, status: int, headers: dict[str, str]
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.status_code = status
        self.headers = headers

    @classmethod
    async def open(cls, socket: str, path: str, query: bytes, headers: Mapping[str, str]) -> RawStream:
        target = path + ("?" + query.decode("ascii") if query else "")
        lines = [f"GET {target} HTTP/1.0", "Host: worker", *(f"{k}: {v}" for k, v in headers.items())]
        tcp = _tcp(socket)
        if tcp is not None:
            lines.append(f"Authorization: Bearer {tcp[0]}")
        async with asyncio.timeout(cls.CONNECT):
            if tcp is None:
                reader, writer = await asyncio.open_unix_connection(socket, limit=1 << 20)
            else:
                reader, writer = await asyncio.open_connection(tcp[1], tcp[2], limit=1 << 20)
            try:
                writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
                head = await reader.readuntil(b"\r\n\r\n")
            except BaseException:
                writer.close()
                raise
        first, *rest = head.decode("latin-1").split("\r\n")
        status = int(first.split()[1])
        parsed = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in rest if ln)}
        return cls(reader, writer, status, parsed)

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive, until the worker ends it."""
        while chunk := await self._reader.read(self.CHUNK):
            yield chunk

    async def aread(self) -> bytes:
        """The whole body (a refusal's JSON)."""
        return await self._reader.read()

    async def aclose(self) -> None:
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()


def _tcp(endpoint: str) -> tuple[str, str, int] | None:
    """The secret, host and port of a ``tcp://SECRET@HOST:PORT`` endpoint; None for a socket path."""
    if not endpoint.startswith("tcp://"):
        return None
    secret, _, where = endpoint.removeprefix("tcp://").rpartition("@")
    host, _, port = where.rpartition(":")
    return secret, host.strip("[]"), int(port)


def _unavailable(exc: Exception) -> WorkerUnavailable:
    return WorkerUnavailable(
        f"the session's worker did not answer ({type(exc).__name__}); it may be starting or gone: "
        "POST …/wake starts it"
    )
