"""The journal (``journal.jsonl``): a session's events, one JSON object a line, the only truth.

One worker appends (it holds the owner lock); each line is written with a single ``write`` on an
``O_APPEND`` descriptor before the event is sent to anyone. Every open journal keeps an index of
each line's byte offset and seq, so reading the events after a cursor costs a bisection and one
read of exactly those bytes, never a parse of the whole file. A reader in another process calls
`Journal.refresh` (or just reads: reads refresh) to index lines appended since.

A worker that starts from a checkpoint (`tui.store.checkpoint`) opens the journal with the
checkpoint's `JournalMark`: when the journal still holds that line (same bytes at the same
offset), only the lines after it are indexed now, and the lines before it are indexed the first
time a reader asks for them (a follower replaying from an early cursor). A mark the journal does
not hold is ignored: everything is indexed, as without one.

A worker killed mid-write can leave a torn last line; `Journal.open_for_append` cuts it back to
the last complete line and logs that it did. A write that fails (disk full, I/O error) is cut
back at once, before `DiskFull` is raised, so the next append never lands on torn bytes.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import json
import logging
import os
import re
from array import array
from collections.abc import Collection, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from tui.errors import DiskFull, TuiError
from tui.protocol import Event, decode_event, now
from tui.protocol.events import EventBase
from tui.store.chain import ChainWriter

__all__ = ["Journal", "JournalLine", "JournalMark", "read_span"]

log = logging.getLogger("tui.store.journal")

E = TypeVar("E", bound=EventBase)

# What this version writes: seq, at and type lead every line, so the index needs no JSON parse.
_HEAD = re.compile(rb'^\{"seq":(\d+),"at":"[^"]*","type":"([^"\\]+)"')
_LINE = re.compile(rb'\{"seq":(\d+),"at":"[^"\n]*","type":"([^"\\\n]+)"[^\n]*\n')
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class JournalLine:
    """One event as it is stored: its seq, its type and its JSON text (no newline)."""

    seq: int
    type: str
    raw: bytes

    def decode(self) -> Event:
        """The typed event."""
        return decode_event(self.raw)


@dataclass(frozen=True, slots=True)
class JournalMark:
    """Where a journal stood at one line: enough to check later that it still holds that line.

    Attributes:
        seq: the line's seq.
        start: the byte offset of the line.
        end: the byte offset just past its newline.
        digest: the SHA-256 (hex) of the line's bytes, newline included.
    """

    seq: int
    start: int
    end: int
    digest: str


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _head(line: bytes) -> tuple[int, str] | None:
    m = _HEAD.match(line)
    if m:
        return int(m.group(1)), m.group(2).decode()
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    if not isinstance(obj.get("seq"), int) or not isinstance(obj.get("type"), str):
        return None
    return obj["seq"], obj["type"]


def read_span(
    path: Path, after: int, until: int, types: Collection[str] | None = None
) -> Generator[tuple[int, list[JournalLine]]]:
    """The lines with ``after < seq <= until`` (of `types` only, when given), in order, in batches
    of about `_CHUNK` bytes, each with the last seq read so far, read straight through the file
    once, without the index a `Journal` keeps (a span read once, such as a load's replay). A
    missing journal reads as empty; a line that is no event (one being written) ends it, as it
    ends a reader's index.
    """
    try:
        file = path.open("rb")
    except FileNotFoundError:
        return
    match = _HEAD.match
    names: dict[bytes, str] = {}
    last = after
    with file:
        rest = b""
        while chunk := file.read(_CHUNK):
            data = rest + chunk
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            batch: list[JournalLine] = []
            for line in data[:cut].split(b"\n")[:-1]:
                m = match(line)
                if m is not None:
                    seq, raw_type = int(m.group(1)), m.group(2)
                    typ = names.get(raw_type)
                    if typ is None:
                        typ = names[raw_type] = raw_type.decode()
                else:  # not in this version's layout (or blank, or no event at all)
                    if not line.strip():
                        continue
                    head = _head(line)
                    if head is None:
                        break
                    seq, typ = head
                if seq > until:
                    break
                if seq > after:
                    last = seq
                    if types is None or typ in types:
                        batch.append(JournalLine(seq, typ, line))
            else:
                yield last, batch
                continue
            yield last, batch
            return


class Journal:
    """A session's journal, opened to append (the worker) or to read (anyone else)."""

    def __init__(self, path: Path, *, writable: bool) -> None:
        self.path = path
        self.writable = writable
        self._seqs = array("q")
        self._offsets = array("q")
        self._types: list[str] = []
        self._names: dict[bytes, str] = {}
        self._end = 0
        """Byte offset just past the last indexed (complete) line."""
        self._read_fd: int | None = None
        self._write_fd: int | None = None
        self._torn = False
        """A failed write left bytes past `_end` that could not be cut yet."""
        self._prefix: JournalMark | None = None
        """The lines up to this mark are not indexed yet (the journal was opened at it)."""
        self.resumed: JournalMark | None = None
        """The mark the journal was opened at, when it held that line (None: indexed from the start)."""
        self.chain: ChainWriter | None = None
        """The chain a worker extends with each line (`tui.store.chain`); None in a reader."""

    # --- opening -----------------------------------------------------------------------------
    @classmethod
    def open_for_append(cls, path: Path, *, resume: JournalMark | None = None) -> Journal:
        """Open the journal to append, making it if missing and cutting a torn last line.

        The caller must hold the session's owner lock.

        Args:
            path: the journal file.
            resume: a checkpoint's mark: when the journal holds that line, only the lines after
                it are indexed now (`resumed` says so), the others on first use.
        """
        journal = cls(path, writable=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            size = os.fstat(fd).st_size
            journal._read_fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            if resume is not None and journal.holds(resume, size):
                journal._prefix = journal.resumed = resume
                journal._end = resume.end
            journal._index_until(size)
            if journal._end < size:
                log.warning(
                    "journal %s: cut a torn last line (%d bytes after offset %d)",
                    path,
                    size - journal._end,
                    journal._end,
                )
                os.ftruncate(fd, journal._end)
        finally:
            os.close(fd)
        journal._write_fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        journal.chain = ChainWriter.open(
            path,
            lambda seq: ((line.seq, line.raw) for line in journal.iter_after(seq)),
            journal._end,
            journal.last_seq,
        )
        return journal

    @classmethod
    def open_for_reading(cls, path: Path) -> Journal:
        """Open the journal to read; a missing journal reads as empty until it appears."""
        journal = cls(path, writable=False)
        journal.refresh()
        return journal

    def close(self) -> None:
        """Close the descriptors; the index stays readable."""
        if self.chain is not None:
            self.chain.close()
        for fd in (self._read_fd, self._write_fd):
            if fd is not None:
                os.close(fd)
        self._read_fd = self._write_fd = None

    def stop_appending(self) -> None:
        """Close the journal to appends; it stays readable until `close`."""
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None
        if self.chain is not None:
            self.chain.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the index ---------------------------------------------------------------------------
    def _index_until(self, size: int) -> None:
        """Index the complete lines between the indexed end and `size`.

        A line that does not parse stops the index there: in the worker that is the torn line to
        cut; in a reader it is a line still being written.
        """
        assert self._read_fd is not None
        match = _LINE.match
        names = self._names
        pos = self._end
        carry = b""
        while pos < size:
            chunk = os.pread(self._read_fd, min(_CHUNK, size - pos), pos)
            if not chunk:
                break
            data = carry + chunk
            start = 0
            base = pos - len(carry)
            while True:
                m = match(data, start)
                if m is not None:
                    raw_type = m.group(2)
                    typ = names.get(raw_type)
                    if typ is None:
                        typ = names[raw_type] = raw_type.decode()
                    self._seqs.append(int(m.group(1)))
                    self._offsets.append(base + start)
                    self._types.append(typ)
                    start = m.end()
                    continue
                # Not in this version's layout (or not an event at all): the slow path.
                nl = data.find(b"\n", start)
                if nl < 0:
                    break
                line = data[start:nl]
                if line.strip():
                    head = _head(line)
                    if head is None:
                        self._end = base + start
                        return
                    self._seqs.append(head[0])
                    self._offsets.append(base + start)
                    self._types.append(head[1])
                start = nl + 1
            self._end = base + start
            carry = data[start:]
            pos += len(chunk)

    def holds(self, mark: JournalMark, size: int | None = None) -> bool:
        """Whether the journal holds the line `mark` names: the same bytes at the same offset."""
        if self._read_fd is None or mark.start < 0 or mark.end <= mark.start:
            return False
        if size is None:
            size = os.fstat(self._read_fd).st_size
        if mark.end > size:
            return False
        data = os.pread(self._read_fd, mark.end - mark.start, mark.start)
        if not data.endswith(b"\n") or _digest(data) != mark.digest:
            return False
        if mark.start > 0 and os.pread(self._read_fd, 1, mark.start - 1) != b"\n":
            return False
        head = _head(data[:-1])
        return head is not None and head[0] == mark.seq

    def mark(self) -> JournalMark | None:
        """The mark of the last line (None when the journal is empty): what a checkpoint is current to."""
        if not self._seqs:
            return self._prefix
        start = self._offsets[-1]
        assert self._read_fd is not None
        data = os.pread(self._read_fd, self._end - start, start)
        return JournalMark(self._seqs[-1], start, self._end, _digest(data))

    def _index_prefix(self) -> None:
        """Index the lines before the mark the journal was opened at (once, on first need)."""
        prefix, self._prefix = self._prefix, None
        if prefix is None:
            return
        seqs, offsets, types, end = self._seqs, self._offsets, self._types, self._end
        self._seqs, self._offsets, self._types, self._end = array("q"), array("q"), [], 0
        assert self._read_fd is not None
        while True:
            self._index_until(prefix.end)
            if self._end >= prefix.end:
                break
            # A line that is not an event, before lines that are: skip it, as a replay would.
            rest = os.pread(self._read_fd, prefix.end - self._end, self._end)
            log.warning("journal %s: the line at offset %d is not an event, skipped", self.path, self._end)
            self._end += rest.find(b"\n") + 1
        self._seqs.extend(seqs)
        self._offsets.extend(offsets)
        self._types.extend(types)
        self._end = end

    def refresh(self) -> None:
        """Index lines another process appended since (a reader's catch-up)."""
        if self._read_fd is None:
            try:
                self._read_fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return
        size = os.fstat(self._read_fd).st_size
        if size < self._end:
            raise TuiError(f"journal {self.path} shrank while it was read; attach again")
        if size > self._end:
            self._index_until(size)

    @property
    def last_seq(self) -> int:
        """The seq of the last event (0 when empty)."""
        if self._seqs:
            return self._seqs[-1]
        return self._prefix.seq if self._prefix is not None else 0

    def __len__(self) -> int:
        self._index_prefix()
        return len(self._seqs)

    # --- appending ---------------------------------------------------------------------------
    def append(self, event: E) -> E:
        """Give `event` the next seq and the current time, write it, and return it.

        The line reaches the kernel before this returns; send the event only after.

        Raises:
            TuiError: the journal is not open to append, or the write failed.
        """
        return self.append_line(event)[0]

    def append_line(self, event: E) -> tuple[E, JournalLine]:
        """As `append`, also returning the line as stored (what a stream sends on)."""
        if self._write_fd is None:
            raise TuiError(f"journal {self.path} is not open to append")
        stamped = event.model_copy(update={"seq": self.last_seq + 1, "at": now()})
        raw = stamped.model_dump_json().encode()
        typ = str(getattr(stamped, "type", ""))
        self._write_raw(stamped.seq, typ, raw)
        return stamped, JournalLine(stamped.seq, typ, raw)

    def _write_raw(self, seq: int, typ: str, raw: bytes) -> None:
        assert self._write_fd is not None
        data = raw + b"\n"
        try:
            if self._torn:
                self._cut_back()
            written = 0
            while written < len(data):
                written += os.write(self._write_fd, data[written:])
        except OSError as exc:
            self._torn = True
            with contextlib.suppress(OSError):
                self._cut_back()
            raise DiskFull(
                f"disk full: could not append to the journal {self.path} ({exc.strerror}); "
                "free some space, then try again",
                path=str(self.path),
            ) from exc
        self._seqs.append(seq)
        self._offsets.append(self._end)
        self._types.append(typ)
        self._end += len(data)
        if self.chain is not None:
            self.chain.add(seq, raw)

    def _cut_back(self) -> None:
        """Cut what a failed write left after the last whole line (shrinking needs no space)."""
        assert self._write_fd is not None
        if os.fstat(self._write_fd).st_size != self._end:
            os.ftruncate(self._write_fd, self._end)
            log.warning("journal %s: cut a partly written line back to offset %d", self.path, self._end)
        self._torn = False

    def last_line(self) -> JournalLine | None:
        """The last event as stored."""
        if not self._seqs and self._prefix is not None:
            self._index_prefix()
        return self._line_at(len(self._seqs) - 1) if self._seqs else None

    # --- reading -----------------------------------------------------------------------------
    def read_after(self, cursor: int, limit: int = 1000, max_bytes: int | None = None) -> list[JournalLine]:
        """At most `limit` events with ``seq > cursor``, in order.

        Args:
            cursor: the last seq the caller has.
            limit: at most this many events.
            max_bytes: at most about this many bytes (always at least one event).

        A reader refreshes its index first, so it sees what the worker appended since.
        """
        if not self.writable:
            self.refresh()
        if self._prefix is not None and cursor < self._prefix.seq:
            self._index_prefix()
        i = bisect.bisect_right(self._seqs, cursor)
        j = min(len(self._seqs), i + max(0, limit))
        if i >= j:
            return []
        assert self._read_fd is not None
        start = self._offsets[i]
        if max_bytes is not None:
            j = max(i + 1, min(j, bisect.bisect_right(self._offsets, start + max_bytes, i, j) - 1))
        end = self._offsets[j] if j < len(self._offsets) else self._end
        data = os.pread(self._read_fd, end - start, start)
        lines: list[JournalLine] = []
        for k in range(i, j):
            a = self._offsets[k] - start
            b = (self._offsets[k + 1] - start if k + 1 < j else end - start) - 1
            lines.append(JournalLine(self._seqs[k], self._types[k], data[a:b]))
        return lines

    def iter_after(self, cursor: int = 0, batch: int = 1000) -> Iterator[JournalLine]:
        """Every event with ``seq > cursor``, read in batches."""
        while True:
            lines = self.read_after(cursor, batch)
            if not lines:
                return
            yield from lines
            cursor = lines[-1].seq

    def heads_after(self, cursor: int = 0) -> Iterator[tuple[int, int, str]]:
        """``(position, seq, type)`` of every event after `cursor`, from the index alone.

        A position stays valid until the next read before the mark the journal was opened at.
        """
        if self._prefix is not None and cursor < self._prefix.seq:
            self._index_prefix()
        for k in range(bisect.bisect_right(self._seqs, cursor), len(self._seqs)):
            yield k, self._seqs[k], self._types[k]

    def line_at(self, position: int) -> JournalLine:
        """The event at `position` (as `heads_after` numbers them)."""
        return self._line_at(position)

    def _line_at(self, k: int) -> JournalLine:
        assert self._read_fd is not None
        start = self._offsets[k]
        end = self._offsets[k + 1] if k + 1 < len(self._offsets) else self._end
        data = os.pread(self._read_fd, end - start, start)
        return JournalLine(self._seqs[k], self._types[k], data.rstrip(b"\n"))
