"""The journal's chain (``journal.chain``, beside ``journal.jsonl``): each line's link is the SHA-256
of the link before it and the line's bytes, so a line changed, removed or reordered later breaks
every link from it on.

The chain file starts with one header line, ``tui-chain 1 SEQ OFFSET PREV``: the seq of the first
line chained, its byte offset in the journal, and the link before it (64 zeros for a journal
chained from its first event; for a journal an older tui began, the SHA-256 of all its bytes before
``OFFSET``, so those lines are held by the chain as one block). Then one ``SEQ LINK`` line per
journal line, written by the worker just after the journal line (`ChainWriter.add`). A worker that
stopped between the two writes leaves the chain a line or two short; the next worker that opens
the journal adds the missing links first (`ChainWriter.open`).

The chain proves nothing against someone who rewrites both files; the head (the last link) is
printed in every export (`tui audit`, `tui verify`), so a copy kept elsewhere shows that nothing
before it changed since (`verify`'s ``head``).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["GENESIS", "ChainWriter", "Verdict", "chain_path", "link", "verify"]

log = logging.getLogger("tui.store.chain")

GENESIS = "0" * 64
_MAGIC = b"tui-chain 1 "


def chain_path(journal: Path) -> Path:
    """The chain file of `journal`."""
    return journal.with_name(journal.stem + ".chain")


def link(prev: str, line: bytes) -> str:
    """The link of `line` (its bytes, no newline) after the link `prev`."""
    return hashlib.sha256(bytes.fromhex(prev) + line).hexdigest()


def _seq_of(line: bytes) -> int | None:
    if not line.startswith(b'{"seq":'):
        return None
    end = line.find(b",", 7)
    try:
        return int(line[7:end])
    except ValueError:
        return None


class ChainWriter:
    """The worker's side: one link appended per journal line, just after it."""

    def __init__(self, path: Path, fd: int, head: str, seq: int) -> None:
        self.path = path
        self._fd: int | None = fd
        self.head = head
        """The last link."""
        self.seq = seq
        """The seq of the last line linked (the header's seq - 1 before the first)."""

    @classmethod
    def open(
        cls, journal: Path, lines_after: Callable[[int], Iterable[tuple[int, bytes]]], end: int, last_seq: int
    ) -> ChainWriter:
        """Open (or begin) the chain of `journal`, linking the lines it lacks.

        Args:
            journal: the journal file (whole lines up to `end`).
            lines_after: the journal's lines after a seq, as (seq, bytes) (`Journal.iter_after`),
                read only when the chain lacks some.
            end: the byte offset just past the journal's last whole line.
            last_seq: the journal's last seq.
        """
        path = chain_path(journal)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                prev = GENESIS
                if end > 0:  # an older tui's journal: its lines so far are one block
                    prev = _digest_file(journal, end)
                    log.info(
                        "journal %s: chained from seq %d (the lines before are one block)",
                        journal,
                        last_seq + 1,
                    )
                os.write(fd, _MAGIC + b"%d %d %s\n" % (last_seq + 1, end, prev.encode()))
                head, seq = prev, last_seq
            else:
                head, seq, whole = _tail(fd, size)
                if whole < size:
                    os.ftruncate(fd, whole)
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
        writer = cls(path, os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC), head, seq)
        if seq < last_seq:
            for line_seq, raw in lines_after(seq):
                if line_seq > writer.seq:
                    writer.add(line_seq, raw)
        return writer

    def add(self, seq: int, raw: bytes) -> None:
        """Link the journal line just written (`raw`, no newline)."""
        if self._fd is None:
            return
        head = link(self.head, raw)
        try:
            os.write(self._fd, b"%d %s\n" % (seq, head.encode()))
        except OSError as exc:
            # The journal line is kept; the next worker links what this one could not.
            log.warning(
                "the chain %s could not be written (%s); it is completed at the next start", self.path, exc
            )
            self.close()
            return
        self.head, self.seq = head, seq

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def _digest_file(path: Path, end: int) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        left = end
        while left > 0:
            block = f.read(min(left, 1 << 20))
            if not block:
                break
            h.update(block)
            left -= len(block)
    return h.hexdigest()


def _tail(fd: int, size: int) -> tuple[str, int, int]:
    """The chain's last link, its seq, and the offset past its last whole line."""
    back = min(size, 4096)
    data = os.pread(fd, back, size - back)
    whole = size - back + data.rfind(b"\n") + 1
    lines = data[: data.rfind(b"\n")].split(b"\n")
    last = lines[-1]
    if last.startswith(_MAGIC):
        seq, _, prev = last[len(_MAGIC) :].split(b" ")
        return prev.decode(), int(seq) - 1, whole
    seq, _, head = last.partition(b" ")
    return head.decode(), int(seq), whole


@dataclass
class Verdict:
    """What `verify` found."""

    chained: bool
    """The journal has a chain (False: an older tui wrote it, nothing can be checked)."""
    intact: bool = False
    lines: int = 0
    """Journal lines read."""
    since: int = 1
    """The seq the chain starts at (lines before it: one block, see the module)."""
    head: str = ""
    """The last link, recomputed from the journal."""
    head_seq: int = 0
    problem: str = ""
    """The first line changed, removed or reordered, in words."""
    line: int = 0
    """Its line number in the journal (1-based), 0 when none."""
    heads: dict[str, int] = field(default_factory=dict, repr=False)

    def says(self, head: str | None = None) -> str:
        """One line for a person."""
        if not self.chained:
            return "this journal has no chain (an older tui wrote it): it reads, but cannot be verified"
        if not self.intact:
            return self.problem
        said = f"intact: {self.lines} lines, chain head {self.head_seq}:{self.head}"
        if self.since > 1:
            said += f" (chained from seq {self.since}; the lines before are one block)"
        if head is not None:
            said += f"; the head {head} kept elsewhere is in it"
        return said


def verify(journal: Path) -> Verdict:
    """Recompute the chain from the journal's bytes and compare it with the chain file."""
    path = chain_path(journal)
    try:
        chain = path.read_bytes()
    except FileNotFoundError:
        return Verdict(chained=False)
    data = journal.read_bytes() if journal.exists() else b""
    rows = chain.split(b"\n")
    if not rows or not rows[0].startswith(_MAGIC):
        return Verdict(chained=True, problem="the chain file has no header: it was changed", line=0)
    since_s, offset_s, prev_s = rows[0][len(_MAGIC) :].split(b" ")
    since, offset, prev = int(since_s), int(offset_s), prev_s.decode()
    verdict = Verdict(chained=True, since=since)
    if offset > len(data) or (offset and hashlib.sha256(data[:offset]).hexdigest() != prev):
        verdict.problem = f"the lines before seq {since} (one block, from an older tui) were changed"
        verdict.line = 1
        return verdict
    links = [(int(s), h.decode()) for s, _, h in (r.partition(b" ") for r in rows[1:] if r)]
    lines = data[offset:].split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    before = data[:offset].count(b"\n")
    seqs = [_seq_of(line) for line in lines]
    head, head_seq = prev, since - 1
    verdict.heads[head] = head_seq
    for i, raw in enumerate(lines):
        number = before + i + 1
        verdict.lines = number
        if i >= len(links):
            verdict.problem = (
                f"line {number} (seq {seqs[i]}) has no link in the chain: it was added afterwards"
            )
            verdict.line = number
            return verdict
        want_seq, want = links[i]
        got = link(head, raw)
        if got != want:
            verdict.line = number
            seq = seqs[i]
            if seq == want_seq:
                verdict.problem = f"line {number} (seq {seq}) was changed"
            elif want_seq in seqs[i + 1 :]:
                verdict.problem = (
                    f"line {number} (seq {seq}) is out of order: seq {want_seq} was expected there"
                )
            else:
                verdict.problem = f"the line of seq {want_seq} was removed (line {number} holds seq {seq})"
            return verdict
        head, head_seq = got, want_seq
        verdict.heads[head] = head_seq
    if len(links) > len(lines):
        missing = links[len(lines)][0]
        verdict.problem = f"the line of seq {missing} was removed (the journal ends at line {verdict.lines})"
        verdict.line = verdict.lines + 1
        return verdict
    verdict.intact = True
    verdict.head, verdict.head_seq = head, head_seq
    return verdict
