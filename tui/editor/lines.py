"""The editor's lines: JSON-RPC messages read from stdin one line at a time, in bounded memory.

`tui acp` speaks newline-delimited JSON-RPC with whatever editor started it. A line that is not
a message must not end the conversation, nor fill the memory: each is answered with a JSON-RPC
error, and the next line is read.

- a line that is not JSON, or JSON nested too deep for the parser: ``-32700`` (parse error);
- JSON that is not one request, notification or response (an array, a number, an object with
  neither ``method`` nor ``id``, an ``id`` that is an object), nested deeper than `MAX_DEPTH`,
  or a line longer than `LINE_LIMIT` (read and dropped as it comes, never held whole):
  ``-32600`` (invalid request).

The error's ``id`` is the message's own when it has a usable one, else null. `EditorLines` is a
message-level transport of the ``acp`` package's `Connection` (``send``, ``receive``, ``close``);
it imports nothing of that package.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

__all__ = ["INVALID_REQUEST", "LINE_LIMIT", "MAX_DEPTH", "PARSE_ERROR", "EditorLines", "parse_message"]

LINE_LIMIT = 64 * 1024 * 1024
"""The longest line taken, in bytes (a prompt with images, a big file embedded as context)."""
MAX_DEPTH = 64
"""The deepest nesting of arrays and objects a message may have (ACP's are a few levels deep)."""
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
_READ = 1 << 16
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode
"""A message as one line of JSON (what ``json.dumps(message, separators=(",", ":"))`` gives)."""


class BadLine(Exception):
    """A line that is not a message: its JSON-RPC error's code and message, and the id to answer."""

    def __init__(self, code: int, message: str, request_id: int | str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id

    def answer(self) -> dict[str, Any]:
        """The JSON-RPC error answering it."""
        return {
            "jsonrpc": "2.0",
            "id": self.request_id,
            "error": {"code": self.code, "message": self.message},
        }


def _depth(value: Any) -> int:
    """How deeply arrays and objects nest in `value` (0 for a scalar), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _usable_id(value: Any) -> bool:
    return value is None or (isinstance(value, int | str) and not isinstance(value, bool))


def parse_message(line: bytes) -> dict[str, Any]:
    """One line as a JSON-RPC message.

    Raises:
        BadLine: the line is not one (see the module).
    """
    try:
        message = json.loads(line)
    except RecursionError:
        raise BadLine(PARSE_ERROR, f"Parse error: JSON nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise BadLine(PARSE_ERROR, f"Parse error: {exc}") from None
    if not isinstance(message, dict):
        kind = "an array (batches are not taken)" if isinstance(message, list) else type(message).__name__
        raise BadLine(INVALID_REQUEST, f"Invalid Request: a message is one JSON object, not {kind}")
    request_id = message.get("id")
    if not _usable_id(request_id):
        raise BadLine(INVALID_REQUEST, "Invalid Request: an id is a string, a number or null")
    if _depth(message) > MAX_DEPTH:
        raise BadLine(INVALID_REQUEST, f"Invalid Request: nested deeper than {MAX_DEPTH} levels", request_id)
    method = message.get("method")
    if method is None and "id" not in message:
        raise BadLine(INVALID_REQUEST, "Invalid Request: neither a method nor an id", None)
    if method is not None and not isinstance(method, str):
        raise BadLine(INVALID_REQUEST, "Invalid Request: a method is a string", request_id)
    return message


class EditorLines:
    """Newline-delimited JSON-RPC over the editor's stdin and stdout.

    Args:
        reader: stdin.
        writer: stdout.
        limit: the longest line taken, in bytes.
    """

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, limit: int = LINE_LIMIT
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._limit = limit
        self._buffer = bytearray()
        self._scanned = 0
        self._dropping = False
        """A line past the limit is being read and dropped up to its newline."""
        self._lock = asyncio.Lock()

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_many([message])

    async def send_many(self, messages: list[dict[str, Any]]) -> None:
        """Send `messages` in order as one write (one drain): a load's replayed updates."""
        if not messages:
            return
        data = "".join([_ENCODE(m) + "\n" for m in messages]).encode("utf-8")
        async with self._lock:
            self._writer.write(data)
            await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        """The next message; None at the end of stdin. Bad lines are answered on the way."""
        while True:
            line = await self._line()
            if line is None:
                return None
            try:
                if isinstance(line, _Dropped):
                    raise BadLine(
                        INVALID_REQUEST,
                        f"Invalid Request: a line longer than {self._limit:,} bytes was dropped",
                    )
                if not line.strip():
                    continue
                return parse_message(line)
            except BadLine as bad:
                await self.send(bad.answer())

    async def close(self) -> None:
        """Nothing to let go of: stdin and stdout are the process's."""

    async def _line(self) -> bytes | _Dropped | None:
        """The next line (without its newline), `_DROPPED` for one past the limit, None at the end."""
        buffer = self._buffer
        while True:
            end = buffer.find(b"\n", self._scanned)
            if end >= 0:
                line = bytes(buffer[:end])
                del buffer[: end + 1]
                self._scanned = 0
                if self._dropping or len(line) > self._limit:
                    self._dropping = False
                    return _DROPPED
                return line
            if self._dropping or len(buffer) > self._limit:
                self._dropping = True
                buffer.clear()
            self._scanned = len(buffer)
            chunk = await self._reader.read(_READ)
            if not chunk:
                if self._dropping:
                    self._dropping = False
                    return _DROPPED
                if buffer:
                    line = bytes(buffer)
                    buffer.clear()
                    self._scanned = 0
                    return line
                return None
            buffer += chunk


class _Dropped:
    """What `EditorLines._line` returns for a line past the limit."""


_DROPPED = _Dropped()
