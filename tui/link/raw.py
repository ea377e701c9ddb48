"""`UnixHttp`: plain HTTP/1.1 requests to a worker's Unix socket, each connection kept open.

A worker's bridge answers every request with a JSON body (or none), with ``content-length`` or
chunked. For those requests httpx builds a `Request`, a `URL`, runs its pool, h11 and anyio for
each one: most of what a piped turn (one ``POST /turn`` a statement) costs the client. Here a
request is one write of its bytes on a connection kept open, and its answer read with asyncio's
own stream: the status line, the headers, the body. The event stream and streamed text stay
A connection is used by one request at a time; one that the worker closed while it was idle (or
that failed before any byte of the answer came back) is replaced and the request sent once more
on a new one; a request cut off (a timeout, a cancel) closes its connection, whose state is then
unknown. A streamed answer (the event stream, ``GET /events``) has a connection of its own, read
chunk by chunk as the worker writes them (`UnixHttp.stream`), and closed when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote, urlencode

__all__ = ["KEEP", "Streamed", "UnixHttp", "query_string"]

_HEAD_LIMIT = 1 << 16
KEEP = 8
"""Connections kept open at most (more run only while that many requests are under way at once)."""


def query_string(query: Mapping[str, Any]) -> str:
    """`query` as httpx writes a request's params: None as empty, booleans as ``true``/``false``,
    a list as the key repeated."""
    pairs: list[tuple[str, str]] = []
    for key, value in query.items():
        for one in value if isinstance(value, (list, tuple)) else (value,):
            if one is None:
                text = ""
            elif isinstance(one, bool):
                text = "true" if one else "false"
            else:
                text = str(one)
            pairs.append((key, text))
    return urlencode(pairs, quote_via=quote)


class _Failed(Exception):
    """A request failed on a connection; `answered`: whether any of the answer had come."""

    def __init__(self, cause: BaseException, answered: bool) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.answered = answered


class UnixHttp:
    """Requests to the HTTP server on the Unix socket at `path`, on connections kept open."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for _, writer in idle:
            writer.close()

    async def request(
        self,
        method: str,
        target: str,
        query: Mapping[str, Any] | None = None,
        json_body: Any = None,
        content: bytes | None = None,
    ) -> tuple[int, bytes]:
        """One request; its status and body.

        Raises:
            OSError, asyncio.IncompleteReadError, ValueError: the socket could not be reached,
                or the answer was cut short or is not HTTP.
        """
        if query:
            target = f"{target}?{query_string(query)}"
        head = [f"{method} {target} HTTP/1.1", "host: worker", "accept: */*"]
        body = b""
        if json_body is not None:
            body = json.dumps(json_body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
            head.append("content-type: application/json")
        elif content is not None:
            body = content
        if body or method in ("POST", "PUT", "PATCH"):
            head.append(f"content-length: {len(body)}")
        data = ("\r\n".join(head) + "\r\n\r\n").encode() + body
        while True:
            reused = self._take()
            conn = reused or await asyncio.open_unix_connection(self.path, limit=_HEAD_LIMIT)
            try:
                return await self._exchange(conn, data)
            except _Failed as failed:
                # A kept connection the worker let go of while it was idle: once more, on a new one.
                if reused is not None and not failed.answered:
                    continue
                raise failed.cause from None

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        target: str,
        query: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        idle: float = 30.0,
    ) -> AsyncIterator[Streamed]:
        """A request whose answer is read as it comes, on a connection of its own (closed on leaving).

        Raises:
            OSError, asyncio.IncompleteReadError, ValueError: the socket could not be reached,
                or the answer's head was cut short or is not HTTP (`TimeoutError`, an `OSError`:
                no head within `idle` seconds).
        """
        if query:
            target = f"{target}?{query_string(query)}"
        head = [
            f"{method} {target} HTTP/1.1",
            "host: worker",
            *(f"{k}: {v}" for k, v in (headers or {}).items()),
        ]
        reader, writer = await asyncio.open_unix_connection(self.path, limit=_HEAD_LIMIT)
        try:
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
            async with asyncio.timeout(idle):
                status, answer = _head(await reader.readuntil(b"\r\n\r\n"))
            yield Streamed(reader, status, answer, idle)
        finally:
            writer.close()

    def _take(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        while self._idle:
            reader, writer = self._idle.pop()
            if not (reader.at_eof() or writer.is_closing()):
                return reader, writer
            writer.close()
        return None

    async def _exchange(
        self, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter], data: bytes
    ) -> tuple[int, bytes]:
        reader, writer = conn
        answered = False
        try:
            writer.write(data)
            try:
                first = await reader.readuntil(b"\r\n")
            except (OSError, asyncio.IncompleteReadError) as exc:
                raise _Failed(exc, answered=bool(getattr(exc, "partial", b""))) from None
            answered = True
            status, headers = _head(first + await reader.readuntil(b"\r\n\r\n"))
            if headers.get("transfer-encoding", "").lower() == "chunked":
                body = await _chunked(reader)
            elif "content-length" in headers:
                body = await reader.readexactly(int(headers["content-length"]))
            elif status in (204, 304) or 100 <= status < 200:
                body = b""
            else:
                body = await reader.read()
                headers["connection"] = "close"
        except _Failed:
            writer.close()
            raise
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            writer.close()
            raise _Failed(exc, answered) from None
        except BaseException:
            writer.close()  # cut off mid-request: the connection's state is unknown
            raise
        if headers.get("connection", "").lower() == "close" or len(self._idle) >= KEEP:
            writer.close()
        else:
            self._idle.append(conn)
        return status, body


class Streamed:
    """An answer read as it comes (`UnixHttp.stream`): its status, its headers, its body's parts.

    Args:
        idle: seconds of silence after which reading raises `TimeoutError`.
    """

    def __init__(
        self, reader: asyncio.StreamReader, status: int, headers: dict[str, str], idle: float
    ) -> None:
        self._reader = reader
        self.status = status
        self.headers = headers
        self.idle = idle

    async def read(self) -> bytes:
        """The whole body."""
        return b"".join([part async for part in self.parts()])

    async def parts(self) -> AsyncIterator[bytes]:
        """The body as the server writes it (a chunk each, when chunked), until it ends.

        Raises:
            TimeoutError: nothing came for `idle` seconds.
            asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError: the body was cut
                short or is not chunked as HTTP says.
        """
        reader = self._reader
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                async with asyncio.timeout(self.idle):
                    size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0].strip(), 16)
                    if size == 0:
                        while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers, then the blank line
                            pass
                        return
                    data = await reader.readexactly(size)
                    await reader.readexactly(2)
                yield data
        left = int(self.headers["content-length"]) if "content-length" in self.headers else -1
        while left != 0:
            async with asyncio.timeout(self.idle):
                data = await reader.read(65536 if left < 0 else min(left, 65536))
            if not data:
                if left > 0:
                    raise asyncio.IncompleteReadError(b"", left)
                return
            left = left - len(data) if left > 0 else left
            yield data


def _head(raw: bytes) -> tuple[int, dict[str, str]]:
    lines = raw.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    if not version.startswith("HTTP/1."):
        raise ValueError(f"not an HTTP/1.1 answer: {lines[0][:80]!r}")
    status = int(rest.split(" ", 1)[0])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return status, headers


async def _chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0].strip(), 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers, then the blank line
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
