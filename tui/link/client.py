"""`BridgeClient`: the one HTTP client of the bridge protocol (protocol.md).

It talks to a worker over its Unix socket, or to the web bridge with a base URL such as
``https://host/api/sessions/ID`` and a bearer token, so both links share it. Every refusal is
mapped to the `tui.errors` tree in one place (`_raise_for`), and every transport failure becomes
`WorkerUnavailable` (a local worker) or `Unreachable` (another machine), raised from the httpx
or socket error that caused it. A local worker's requests that answer JSON and its event stream
go through `UnixHttp` (`tui/link/raw.py`: a request's bytes written on a Unix-socket connection,
its answer read with asyncio's own stream, not httpx's machinery); its streamed text, remote
sessions and tests' transports through httpx.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from tui.errors import (
    TuiError,
    Unreachable,
    UnreadableEvent,
    WorkerGone,
    WorkerUnavailable,
    error_from_wire,
)
from tui.link.base import Caller, Live, RouteCall
from tui.link.raw import UnixHttp
from tui.link.uds import UnixTransport
from tui.protocol import Event, LeaveRequest, Left, decode_event
from tui.protocol.routes import BRIDGE

__all__ = ["BridgeClient"]

log = logging.getLogger("tui.link.client")


class BridgeClient(Caller):
    """Requests and the event stream of one session's bridge.

    Args:
        socket_path: the worker's Unix socket; None for a base URL reached over TCP.
        base_url: the session's routes (``http://worker`` for a socket; the web bridge's
            ``https://host/api/sessions/ID`` for a remote session).
        token: a bearer token sent with every request (remote sessions).
        label: how messages name the other end, e.g. ``the worker of session 3f2a1b2c``.
        timeout: seconds for a request (not for the event stream, which waits for events).
        stream_idle: seconds of silence (not even a keepalive) after which a stream counts as dropped.
        transport: an httpx transport to use instead (tests).
    """

    def __init__(
        self,
        *,
        socket_path: str | Path | None = None,
        base_url: str = "http://worker",
        token: str | None = None,
        label: str = "the worker",
        timeout: float = 10.0,
        stream_idle: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.socket_path = str(socket_path) if socket_path is not None else None
        self.label = label
        self.remote = socket_path is None
        self.endpoint = self.socket_path or base_url
        """Where the requests go: the socket, or the base URL."""
        self.stream_idle = stream_idle
        self.retry_hint: float | None = None
        """The last ``retry:`` the stream sent, in seconds: a minimum wait before reconnecting."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._raw: UnixHttp | None = None
        """Where a local worker's JSON requests go (not a test's transport, not with a token)."""
        if transport is None and self.socket_path is not None:
            transport = UnixTransport(self.socket_path)
            if not token:
                self._raw = UnixHttp(self.socket_path)
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout),
            transport=transport,
        )

    async def close(self) -> None:
        """Close the connections."""
        if self._raw is not None:
            await self._raw.close()
        await self._http.aclose()

    async def __aenter__(self) -> BridgeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- mapping ---------------------------------------------------------------------------------
    def _transport_error(self, exc: Exception) -> TuiError:
        what = type(exc).__name__
        if self.remote:
            return Unreachable(f"{self.label} could not be reached ({what}: {exc}); check the network")
        return WorkerGone(f"{self.label} is not answering ({what}); it may have stopped")

    def _raise_for(self, status: int, body: bytes) -> None:
        """Raise the `TuiError` a refusal stands for."""
        if status < 400:
            return
        try:
            decoded: Any = json.loads(body) if body else None
        except ValueError:
            decoded = None
        raise error_from_wire(decoded, status, who=self.label)

    async def handle(self, call: RouteCall, seconds: float | None = None) -> Any:
        """One request of a route of the table: its answer decoded into the route's answer type,
        within `seconds` (the client's timeout unless given)."""
        route = call.route
        if self._raw is not None:
            try:
                async with asyncio.timeout(seconds if seconds is not None else self._http.timeout.read):
                    status, body = await self._raw.request(
                        route.method, call.url, call.query, call.json(), call.content
                    )
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:  # TimeoutError is an OSError
                raise self._transport_error(exc) from exc
        else:
            kwargs: dict[str, Any] = {}
            if seconds is not None:
                kwargs["timeout"] = seconds
            try:
                response = await self._http.request(
                    route.method,
                    call.url,
                    json=call.json(),
                    content=call.content,
                    params=call.query,
                    **kwargs,
                )
            except httpx.TransportError as exc:
                raise self._transport_error(exc) from exc
            status, body = response.status_code, response.content
        self._raise_for(status, body)
        try:
            return route.read_answer(json.loads(body) if body else None)
        except ValueError as exc:  # not JSON, or not the route's answer (pydantic's errors are ValueErrors)
            raise TuiError(
                f"{self.label} answered {route.path} with something this version cannot read; "
                "is it the same version of tui?"
            ) from exc

    async def handle_text(self, call: RouteCall) -> AsyncIterator[str]:
        """A request whose answer is streamed text (``turn_output``): its text as it arrives."""
        timeout = httpx.Timeout(self._http.timeout.connect, read=self.stream_idle)
        try:
            async with self._http.stream(
                call.route.method, call.url, params=call.query, timeout=timeout
            ) as response:
                if response.status_code != call.route.status:
                    self._raise_for(response.status_code, await response.aread())
                async for text in response.aiter_text():
                    yield text
        except httpx.TransportError as exc:
            raise self._transport_error(exc) from exc

    async def leave(self, wait: float = 2.0, *, reason: str = "", restart: bool = False) -> bool:
        """``POST /leave``: the worker ends its turn, writes ``worker_leaving`` and exits."""
        asked = LeaveRequest(wait=wait, reason=reason, restart=restart)
        call = RouteCall(BRIDGE["leave"], asked)
        left: Left = await self.handle(call, seconds=wait + 10.0)
        return left.released

    # --- the event stream ------------------------------------------------------------------------
    async def events(
        self, cursor: int, *, client_id: str | None = None, announce_open: bool = False, reads: bool = False
    ) -> AsyncIterator[Event | Live]:
        """``GET /events?cursor=N``: every event after `cursor`, then live ones, until the stream ends.

        With `announce_open`, a `Live` comes first, as soon as the stream is open. With `reads`
        (``presence=later``), opening the stream writes nothing to the session's journal.

        The stream ending (end of body) simply ends the iteration; a transport failure or a
        502/503/504 raises `WorkerUnavailable` (or `Unreachable`), a refusal its own error.

        Raises:
            WorkerUnavailable, Unreachable: the stream could not be opened or dropped.
            Refused, NotFound, InvalidRequest: the server refused it (``bad_cursor`` included).
        """
        params: dict[str, Any] = {"cursor": cursor}
        if client_id:
            params["client_id"] = client_id
        if reads:
            params["presence"] = "later"
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-store"}
        path = BRIDGE["events"].path
        if self._raw is not None:
            # A local worker's stream: read off the socket as the worker writes it, not through httpx.
            try:
                async with self._raw.stream("GET", path, params, headers, self.stream_idle) as answer:
                    opened = (answer.status, answer.headers.get("content-type", ""), answer.read)
                    async for item in self._messages(*opened, answer.parts(), announce_open):
                        yield item
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
                raise self._transport_error(exc) from exc
            return
        timeout = httpx.Timeout(self._http.timeout.connect, read=self.stream_idle)
        try:
            async with self._http.stream(
                "GET", path, params=params, headers=headers, timeout=timeout
            ) as response:
                opened = (response.status_code, response.headers.get("content-type", ""), response.aread)
                async for item in self._messages(*opened, response.aiter_bytes(), announce_open):
                    yield item
        except httpx.TransportError as exc:
            raise self._transport_error(exc) from exc

    async def _messages(
        self,
        status: int,
        kind: str,
        read: Callable[[], Awaitable[bytes]],
        parts: AsyncIterator[bytes],
        announce_open: bool,
    ) -> AsyncIterator[Event | Live]:
        """The events of an answered stream's body (`parts`, of content type `kind`); a refusal
        (`status` not 200, its body `read` whole) raised as its error."""
        if status != 200:
            self._raise_for(status, await read())
            raise TuiError(f"{self.label} answered /events with HTTP {status}")
        if announce_open:
            yield Live()
        if not kind.startswith("text/event-stream"):
            raise WorkerUnavailable(
                f"{self.label} did not answer with an event stream (content type {kind!r})"
            )
        messages = _SseReader()
        async for chunk in parts:
            complete = messages.feed(chunk)
            if messages.retry is not None:
                self.retry_hint = messages.retry / 1000.0
            if messages.disk_full is not None:
                yield Live(disk_full=messages.disk_full)
                messages.disk_full = None
            for data, sse_id in complete:
                try:
                    event = decode_event(data)
                except ValueError as exc:
                    said = sse_id.decode(errors="replace") if sse_id is not None else None
                    raise UnreadableEvent(
                        f"{self.label} sent an event this version cannot read (id {said}): {exc}"
                    ) from exc
                yield event


_MESSAGE = re.compile(rb"id: ([^\n\0]*)\nevent: [^\n]*\ndata: ([^\n]*)\n\n")
"""One message as the worker writes it: its id, its event name and its one line of data."""
_MESSAGES = re.compile(rb"(?:id: [^\n\0]*\nevent: [^\n]*\ndata: [^\n]*\n\n)+")


class _SseReader:
    """Server-sent events from the bytes of a stream, as the WHATWG rules read them.

    Each message's ``data`` is kept as bytes and handed to the decoder as it is: no text decoding,
    no copy per line. A message as the worker writes it (``id``, ``event``, one ``data`` line) is
    cut out with a few searches; any other is read line by line. Fields other than ``data``,
    ``id`` and ``retry`` (``event``, comments) are ignored: the event's own JSON says its type.
    """

    def __init__(self) -> None:
        self._rest = b""
        self._id: bytes | None = None
        self.retry: int | None = None
        """The last ``retry:`` the stream sent, in milliseconds."""
        self.disk_full: str | None = None
        """The worker's ``: disk_full SENTENCE`` comment ("" after ``: disk_ok``; None: neither yet)."""

    def feed(self, chunk: bytes) -> list[tuple[bytes, bytes | None]]:
        """The messages `chunk` completes: each message's data and its id (as sent)."""
        data = self._rest + chunk
        if b"\r" in data:
            # A CR at the very end may be the first half of a CRLF: keep it for the next chunk.
            keep = data.endswith(b"\r")
            data = data[:-1] if keep else data
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + (b"\r" if keep else b"")
        cut = data.rfind(b"\n\n") + 2
        if cut < 2:
            self._rest = data
            return []
        self._rest = data[cut:]
        whole = data[:cut]
        # The usual case: nothing but the worker's own messages, read by one search over the
        # chunk. The messages found must cover it all, or it is read message by message.
        if whole.startswith(b"id: ") and _MESSAGES.fullmatch(whole):
            found = _MESSAGE.findall(whole)
            self._id = found[-1][0]
            return [(message, sse_id) for sse_id, message in found]
        blocks = whole.split(b"\n\n")
        blocks.pop()
        out: list[tuple[bytes, bytes | None]] = []
        for block in blocks:
            if block.startswith(b"id: ") and block.count(b"\ndata: ") == 1 and b"\nretry:" not in block:
                head = block.find(b"\n")
                at = block.find(b"\ndata: ") + 7
                end = block.find(b"\n", at)
                self._id = block[4:head]
                out.append((block[at:] if end < 0 else block[at:end], self._id))
            elif block.strip(b"\n"):
                self._read_lines(block, out)
        return out

    def _read_lines(self, block: bytes, out: list[tuple[bytes, bytes | None]]) -> None:
        lines: list[bytes] = []
        for line in block.split(b"\n"):
            name, colon, value = line.partition(b":")
            if not name:
                # A comment, or a blank line before the message; the worker's disk notices are comments.
                if value.startswith(b" disk_full"):
                    said = value[len(b" disk_full") :].strip().decode(errors="replace")
                    self.disk_full = said or "disk full"
                elif value.startswith(b" disk_ok"):
                    self.disk_full = ""
                continue
            if colon and value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                lines.append(value)
            elif name == b"id":
                if b"\0" not in value:
                    self._id = value
            elif name == b"retry" and value.isdigit():
                self.retry = int(value)
        if lines:
            out.append((b"\n".join(lines), self._id))
