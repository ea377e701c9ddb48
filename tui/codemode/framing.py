"""The frames between the parent and the sandboxed runner.

A frame is a 5-byte header, kind (one byte) and payload length (four bytes, big-endian), then
the payload: kind 0 a JSON object, kind 1 raw output bytes (never JSON-escaped). The runner
(``_child.py``, standard library only) writes the same format with its own copy of these lines.
"""

from __future__ import annotations

import json
import struct
from typing import Any

__all__ = [
    "HEADER",
    "KIND_JSON",
    "KIND_OUTPUT",
    "MAX_FRAME",
    "FrameReader",
    "decode_message",
    "encode_message",
]

HEADER = struct.Struct(">BI")
KIND_JSON = 0
KIND_OUTPUT = 1
MAX_FRAME = 256 * 1024**2
"""Larger frames mean the stream is broken (the runner sends output in 1 MiB chunks)."""

_ENCODE = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
"""One encoder for all messages: ``json.dumps`` with options builds a new one on every call."""


def encode_message(message: dict[str, Any]) -> bytes:
    """One JSON message as a whole frame."""
    payload = _ENCODE(message).encode()
    return HEADER.pack(KIND_JSON, len(payload)) + payload


def decode_message(payload: bytes) -> dict[str, Any]:
    """The JSON object of a kind-0 frame.

    Raises:
        ValueError: the payload is not a JSON object.
    """
    message = json.loads(payload)
    if not isinstance(message, dict):
        raise ValueError("a message that is not a JSON object")
    return message


class FrameReader:
    """Cuts a byte stream into frames, however the reads split it."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._need = HEADER.size

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """Add what was read; return the frames it completed, in order.

        A frame is parsed once it is whole, so a large frame read in many pieces is not
        re-examined at every piece.

        Raises:
            ValueError: a header of an unknown kind or an impossible length: the stream is broken.
        """
        buffer = self._buffer
        buffer += data
        if len(buffer) < self._need:
            return []
        frames: list[tuple[int, bytes]] = []
        offset = 0
        total = len(buffer)
        while total - offset >= HEADER.size:
            kind, size = HEADER.unpack_from(buffer, offset)
            if size > MAX_FRAME or kind not in (KIND_JSON, KIND_OUTPUT):
                raise ValueError(f"a frame of kind {kind} and {size} bytes")
            end = offset + HEADER.size + size
            if end > total:
                break
            frames.append((kind, bytes(buffer[offset + HEADER.size : end])))
            offset = end
        del buffer[:offset]
        self._need = (
            HEADER.size + HEADER.unpack_from(buffer)[1] if len(buffer) >= HEADER.size else HEADER.size
        )
        return frames
