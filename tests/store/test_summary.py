"""The sessions' summary (`tui.summary`) and its freshness rule: a row is trusted without a look at
its folder while the sessions folder's time is the one the table was checked at; when it moved,
each folder's and record's time is looked at; a row that says a worker runs or ran has its lock
probed; folders new to the table, or gone, are read or dropped; no usable summary means the
folders are read and the summary made again."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tui.summary as summary
from tui.store import StatePaths, create_session

PAST = 1_700_000_000_000_000_000
"""A time long gone (ns): the sessions folder set to it is no racy mark."""


def _settled(state: StatePaths, n: int = 0) -> None:
    """Move the sessions folder's time, to a moment far from the clock."""
    os.utime(state.sessions, ns=(PAST + n, PAST + n))


def _titles(state: StatePaths) -> dict[str, str]:
    """The listing's stopped sessions by id, their titles (the id only: the access layer's)."""
    out = {}
    for got in summary.read(state.root, include_archived=True):
        if isinstance(got, str):
            out[got] = "(asked)"
        else:
            out[got[0]] = got[1].split(summary.SEP)[4]
    return out


@pytest.fixture
def looks(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many times a listing read a folder, probed a lock, and looked at a folder's times."""
    seen: Counter[str] = Counter()

    def counted(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            seen[name] += 1
            return real(*args)

        return call

    for name in ("read_folder", "lock_held", "_stamp"):
        monkeypatch.setattr(summary, name, counted(name, getattr(summary, name)))
    return seen


def _row(state: StatePaths, sql: str, *args: object) -> None:
    with sqlite3.connect(state.root / summary.FILE) as db:
        db.execute(sql, args)


def test_a_checked_table_is_read_without_a_look_at_any_folder(
    state_dir: Path, tmp_path: Path, looks: Counter[str]
) -> None:
    state = StatePaths(state_dir)
    ids = [create_session(state, working_directory=tmp_path, title=f"s{n}").id for n in range(3)]
    _settled(state)
    looks.clear()
    assert _titles(state) == {sid: f"s{n}" for n, sid in enumerate(ids)}  # checks the times, marks
    assert looks == {"_stamp": 3}
    looks.clear()
    # A row no folder agrees with is believed while the sessions folder's time stands still:
    # nothing of any folder is looked at.
    _row(state, "UPDATE sessions SET line=replace(line, 's0', 'cached') WHERE id=?", ids[0])
    assert _titles(state)[ids[0]] == "cached"
    assert looks == {}
    # A record edited in place by hand: seen once the sessions folder's time moves.
    record = state.session(ids[1]).record
    record.write_text(json.dumps({**json.loads(record.read_text()), "title": "by hand"}))
    _settled(state, 1)
    assert _titles(state) == {ids[0]: "cached", ids[1]: "by hand", ids[2]: "s2"}
    assert looks == {"_stamp": 3, "read_folder": 1, "lock_held": 1}  # a folder read probes its lock


def test_rows_of_workers_folders_gone_and_folders_new_follow_the_folders(
    state_dir: Path, tmp_path: Path, looks: Counter[str]
) -> None:
    state = StatePaths(state_dir)
    ran, gone, kept = (create_session(state, working_directory=tmp_path, title=t).id for t in "abc")
    _settled(state)
    _titles(state)
    # A row saying a worker runs, its lock free (killed): probed and read at each listing, and
    # left saying so (the worker may be about to take its lock).
    _row(state, "UPDATE sessions SET worker=1 WHERE id=?", ran)
    looks.clear()
    for _ in range(2):
        assert _titles(state)[ran] == "a"
    assert looks == {"lock_held": 4, "read_folder": 2}  # the probe, then the folder read's own
    shutil.rmtree(state.session(gone).root)
    shutil.copytree(state.session(kept).root, state.sessions / "0123456789abcdef")
    _settled(state, 1)
    looks.clear()
    assert _titles(state) == {ran: "a", kept: "c", "0123456789abcdef": "c"}
    assert looks["read_folder"] == 2  # the worker's row and the new folder
    with sqlite3.connect(state.root / summary.FILE) as db:
        rows = dict(db.execute("SELECT id, worker FROM sessions"))
    assert rows == {ran: 1, kept: 0, "0123456789abcdef": 0}


@pytest.mark.parametrize("how", ["deleted", "another schema", "not a database", "another table"])
def test_without_a_usable_summary_the_folders_are_read_and_it_is_made_again(
    state_dir: Path, tmp_path: Path, how: str
) -> None:
    state = StatePaths(state_dir)
    ids = [create_session(state, working_directory=tmp_path, title=f"s{n}").id for n in range(2)]
    path = state.root / summary.FILE
    if how == "another schema":
        _row(state, "UPDATE meta SET value='0' WHERE key='schema'")
    elif how == "another table":  # the same schema's number, its table not what it says
        _row(state, "ALTER TABLE sessions DROP COLUMN stamp")
    else:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        if how == "not a database":
            path.write_bytes(b"not a database" * 500)
    expected = {sid: f"s{n}" for n, sid in enumerate(ids)}
    assert _titles(state) == expected
    with sqlite3.connect(path) as db:
        assert {r[0] for r in db.execute("SELECT id, line, stamp FROM sessions")} == set(ids)
