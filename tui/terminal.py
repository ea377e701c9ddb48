"""What text may reach a terminal: control characters shown, never acting.

Programs, agents and models write whatever bytes they like: an escape sequence in their output
(OSC 52 writes the clipboard, OSC 0 the window title, OSC 8 a hidden link, ``CSI 2J`` clears the
screen, DCS talks to the terminal itself) would act on the user's terminal if it reached it as
it is. Wherever tui draws such text to a terminal (the full-screen app, and the plain commands
when their stdout or stderr is a terminal) it goes through `visible` first: each control
character is replaced by a character that shows it. Output to a pipe or a file keeps its bytes.

- C0 controls (U+0000 to U+001F) show as their control pictures (ESC as ``␛``, BEL as ``␇``),
  except a newline and a tab, which keep their meaning, and a carriage return right before a
  newline; DEL shows as ``␡``.
- C1 controls (U+0080 to U+009F) show as the ESC sequence each stands for: the 8-bit CSI U+009B
  as ``␛[``, U+009D (OSC) as ``␛]``.
- On a terminal, bytes that are not UTF-8 show as ``\\xNN`` (a lone 0x9B byte is CSI to a
  terminal that does not read UTF-8).

This module imports nothing of tui's, so that the app and the command line share it.
"""

from __future__ import annotations

import codecs
import dataclasses
import io
import re
import sys
from typing import IO, Any, TypeVar

__all__ = ["VisibleBytes", "guard_stdio", "visible", "visible_data"]

T = TypeVar("T")

_PICTURES: dict[int, str] = {c: chr(0x2400 + c) for c in range(0x20) if c not in (0x09, 0x0A, 0x0D)}
_PICTURES[0x7F] = "\u2421"  # ␡
_PICTURES.update({c: "\u241b" + chr(c - 0x40) for c in range(0x80, 0xA0)})  # ␛ and its 7-bit form
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Every character `visible` may change (a carriage return too: kept only before a newline)."""
_LONE_CR = re.compile(r"\r(?!\n)")


def visible(text: str) -> str:
    """`text` with every control character shown instead of acting (see the module)."""
    if (text.isascii() and text.isprintable()) or _CONTROL.search(text) is None:
        return text
    shown = text.translate(_PICTURES)
    return _LONE_CR.sub("\u240d", shown) if "\r" in shown else shown


def visible_data(value: T) -> T:
    """`value` with `visible` applied to every string in it: inside pydantic models, dataclasses,
    lists, tuples and dicts (keys too). What holds no control character is returned as it is."""
    return _clean(value)  # type: ignore[no-any-return]


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    if isinstance(value, list):
        items = [_clean(v) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        items = [_clean(v) for v in value]
        return tuple(items) if any(a is not b for a, b in zip(items, value, strict=True)) else value
    if isinstance(value, dict):
        pairs = [(_clean(k), _clean(v)) for k, v in value.items()]
        changed = any(a is not k or b is not v for (a, b), (k, v) in zip(pairs, value.items(), strict=True))
        return dict(pairs) if changed else value
    fields = getattr(type(value), "model_fields", None)
    if isinstance(fields, dict) and hasattr(value, "model_copy"):  # a pydantic model
        update = {}
        for name in fields:
            old = getattr(value, name, None)
            new = _clean(old)
            if new is not old:
                update[name] = new
        extra = getattr(value, "__pydantic_extra__", None) or {}
        for name, old in extra.items():
            new = _clean(old)
            if new is not old:
                update[name] = new
        return value.model_copy(update=update) if update else value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            if not f.init:
                continue
            old = getattr(value, f.name)
            new = _clean(old)
            if new is not old:
                changes[f.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    return value


class VisibleBytes(io.BufferedIOBase):
    """A binary stream that writes through `visible` to `raw` (a terminal): UTF-8 read as it
    comes (a character cut between two writes is held until its end arrives), bytes that are not
    UTF-8 shown as ``\\xNN``."""

    def __init__(self, raw: IO[bytes]) -> None:
        super().__init__()
        self.raw_stream = raw
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="backslashreplace")

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        text = self._decoder.decode(chunk)
        if text:
            self.raw_stream.write(visible(text).encode("utf-8"))
        return len(chunk)

    def flush(self) -> None:
        self.raw_stream.flush()

    def fileno(self) -> int:
        return self.raw_stream.fileno()

    def isatty(self) -> bool:
        return self.raw_stream.isatty()


def _guarded(stream: Any) -> Any:
    buffer = getattr(stream, "buffer", None)
    if buffer is None or isinstance(buffer, VisibleBytes):
        return stream
    try:
        if not stream.isatty():
            return stream
    except (OSError, ValueError):
        return stream
    return io.TextIOWrapper(
        VisibleBytes(buffer),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
        write_through=True,
    )


def guard_stdio() -> None:
    """Make `sys.stdout` and `sys.stderr` show control characters instead of sending them, each
    only when it is a terminal; a pipe or a file keeps every byte. Text and ``.buffer`` alike."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None:
            setattr(sys, name, _guarded(stream))
