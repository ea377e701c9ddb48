"""``turns/``: one compact record per ended turn, what a fresh attach loads instead of the journal.

Each record is ``turns/<started_seq, 12 digits>-<turn_id>.json``, so the folder's names sort in
the order the turns started, and a page of the last K turns reads K files.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from pydantic import ValidationError

from tui.errors import DiskFull
from tui.protocol import TurnRecord

__all__ = ["TurnStore"]


def _write_new(path: Path, data: bytes) -> None:
    """Write a record as `write_atomic` does (a reader sees all of it or none), in fewer system
    calls: the worker holding the session's lock is its one writer, so the temporary file's name
    is fixed, not drawn."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class TurnStore:
    """The ended turns of one session."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._names: list[str] | None = None
        self._ids: set[str] = set()
        self._made = False

    def _listing(self) -> list[str]:
        if self._names is None:
            try:
                names = [n for n in os.listdir(self.folder) if n.endswith(".json") and not n.startswith(".")]
            except FileNotFoundError:
                names = []
            self._names = sorted(names)
            self._ids = {n[13:-5] for n in self._names}
        return self._names

    @staticmethod
    def _name(record: TurnRecord) -> str:
        return f"{record.started_seq:012d}-{record.turn_id}.json"

    def save(self, record: TurnRecord) -> None:
        """Write (or rewrite) an ended turn's record.

        Raises:
            DiskFull: it could not be written (nothing half-written is left).
        """
        name = self._name(record)
        try:
            if not self._made:
                self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                self._made = True
            _write_new(self.folder / name, record.model_dump_json().encode() + b"\n")
        except OSError as exc:
            self._made = False
            raise DiskFull(
                f"disk full: could not write the turn record {self.folder / name} ({exc.strerror}); "
                "free some space, then try again",
                path=str(self.folder / name),
            ) from exc
        names = self._listing()
        if record.turn_id not in self._ids:
            self._ids.add(record.turn_id)
            names.append(name)
            if len(names) > 1 and names[-2] > name:
                names.sort()

    def __len__(self) -> int:
        return len(self._listing())

    def has(self, turn_id: str) -> bool:
        """Whether a record of `turn_id` exists."""
        self._listing()
        return turn_id in self._ids

    def _index(self, turn_id: str) -> int:
        """The position of turn `turn_id` among the ended turns.

        Raises:
            KeyError: it names no ended turn.
        """
        names = self._listing()
        if turn_id in self._ids:
            suffix = f"-{turn_id}.json"
            for i in range(len(names) - 1, -1, -1):
                if names[i].endswith(suffix):
                    return i
        raise KeyError(turn_id)

    def _read(self, names: list[str]) -> list[TurnRecord]:
        records: list[TurnRecord] = []
        for n in names:
            try:
                records.append(TurnRecord.model_validate_json((self.folder / n).read_bytes()))
            except (OSError, ValidationError):
                continue
        return records

    def get(self, turn_id: str) -> TurnRecord:
        """The record of ended turn `turn_id`.

        Raises:
            KeyError: it names no ended turn (or its record cannot be read).
        """
        found = self._read([self._listing()[self._index(turn_id)]])
        if not found:
            raise KeyError(turn_id)
        return found[0]

    def page(self, limit: int, before: str | None = None) -> tuple[list[TurnRecord], bool]:
        """The last `limit` ended turns, oldest first, that started before turn `before`.

        Returns:
            The records and whether older ones remain.

        Raises:
            KeyError: `before` names no ended turn.
        """
        records, older, _ = self.window(limit, before=before)
        return records, older

    def window(
        self,
        limit: int,
        *,
        before: str | None = None,
        after: str | None = None,
        around: str | None = None,
        first: bool = False,
    ) -> tuple[list[TurnRecord], bool, bool]:
        """A page of `limit` ended turns, oldest first: the last ones; those that started before
        turn `before`; those right after turn `after`; a page holding turn `around` (about half
        of it before that turn); or, with `first`, the session's first ones.

        Returns:
            The records, whether older ones remain, and whether newer ones remain.

        Raises:
            KeyError: the turn named names no ended turn.
        """
        names = self._listing()
        limit = max(0, limit)
        if first:
            start, end = 0, min(len(names), limit)
        elif after is not None:
            start = self._index(after) + 1
            end = min(len(names), start + limit)
        elif around is not None:
            at = self._index(around)
            start = max(0, min(at - limit // 2, len(names) - limit))
            end = min(len(names), start + limit)
        else:
            end = self._index(before) if before is not None else len(names)
            start = max(0, end - limit)
        return self._read(names[start:end]), start > 0, end < len(names)
