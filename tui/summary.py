"""The summary of every session of the state dir (``summary.sqlite``): one row a session with
what ``tui sessions`` prints of it when it is stopped, kept current by whoever changes it, so
that listing 10,000 sessions reads one table instead of 10,000 folders.

The session folders stay the truth; a row is a cache of one, written by
- `save_session` (``tui new``, a rename, ``tui archive``, a worker naming its session): the
  record's fields;
- each worker: "a worker runs" before it takes the session's lock, its state at each turn's
  start and end (from its indexing thread), and "stopped" with the journal's size and time just
  before it lets go of the lock;
- ``tui sessions`` itself, for every folder it had to read (a session new to the table, or one
  whose record changed).
A writer that cannot write its row touches the session's record and the sessions folder, so
that the next listing reads that session from its folder.

The freshness rule (`read`): the sessions folder is listed once (its names) and its time taken.
A row is trusted as it is when it says no worker runs and the sessions folder's time is the one
the whole table was last checked at (every session made, deleted, renamed or archived moves it:
`save_session` touches it). When that time moved, each row's folder and record are `stat`ed and a
row whose folder or record changed since it was written is read again from the folder. A row that says a
worker runs or ran has its lock probed: held, the worker is asked as before (`LocalAccess`);
free (its worker ended without saying so: killed; or is about to take it), the folder is read
as it is. A folder missing from the table is read and added; a row whose folder is gone is
dropped. With no usable table (deleted, another schema, a read-only state dir) every folder is
read, and the table is made again from them.

What it cannot see: a record edited by hand (not through tui) until the sessions folder's time
moves (``touch`` it), and a worker of an older tui, which does not write its row (``tui restart
--outdated`` moves workers to this one).

This module imports only the standard library: ``tui sessions`` reads it before anything else.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import sqlite3
import time

__all__ = [
    "FILE",
    "NONE",
    "SEP",
    "Folder",
    "lock_held",
    "note_session",
    "note_state",
    "read",
    "read_folder",
]

FILE = "summary.sqlite"
"""The summary's file in the state dir (with its ``-wal`` and ``-shm``)."""
SCHEMA = "1"
"""Bumped when a row's meaning changes: a table of another schema is made again."""
BUSY = 2.0
"""Seconds a writer waits for another's transaction (each is a few rows long)."""
RACY = 50_000_000
"""Nanoseconds: the sessions folder's time this close to the clock may yet be shared by a later change in
the same clock tick, so the table is not marked checked at it."""

_DDL = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions(
    id TEXT PRIMARY KEY, line TEXT NOT NULL, stamp TEXT NOT NULL, worker INTEGER NOT NULL,
    journal_size INTEGER, state TEXT NOT NULL DEFAULT '', seq INTEGER NOT NULL DEFAULT 1);
"""
# `line`: what `tui sessions` prints of the session, as one text (`Folder`): one value a row
# to hand from SQLite to Python instead of ten costs a listing of 10,000 a third of its read.

Folder = tuple[str, str, str, int, "int | None"]
"""A session as the summary holds it: (its folder's name, line, its stamp (the folder's and the
record's mtime in ns, ``FOLDER/RECORD``), whether a worker holds it or left its
``worker.json``, the journal's size). ``line`` is
``plain``, ``archived``, the journal's mtime (empty: no journal), the record's id, title, folder,
``created_at`` as written, agent, model and parent id (``NUL``: none), joined by ``US`` (`SEP`);
``plain`` is ``0`` (and nothing follows) for a record `read_folder` does not take as it is (a
budget, a time in another form, not JSON): such a session is summed up by the access layer."""

SEP = "\x1f"
"""What separates the values of a row's ``line`` (no plain record holds it)."""
NONE = "\x00"
"""A value of ``line`` that is None."""

_CREATED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?(?:Z|[+-]\d\d:\d\d)?")
"""A record's ``created_at`` as tui writes it (or without a zone: UTC); anything else is read
through the record's model."""
_ID = re.compile(r"[0-9a-f]{16}")


def _log(message: str, *args: object) -> None:
    """A warning in the process's log (a worker's ``worker.log``; a command's stderr when it
    logs); logging is imported only then, not by every listing."""
    import logging

    logging.getLogger("tui.summary").warning(message, *args)


def lock_held(path: str) -> bool:
    """Whether a worker holds the owner lock at `path` (asked without blocking: a shared lock
    taken and let go at once)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _read(path: str) -> tuple[bytes, int]:
    """The file at `path` and its mtime in ns."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        when = os.fstat(fd).st_mtime_ns
        parts = [os.read(fd, 1 << 16)]
        while len(parts[-1]) == 1 << 16:
            parts.append(os.read(fd, 1 << 16))
    finally:
        os.close(fd)
    return b"".join(parts), when


def read_folder(top: str, name: str) -> Folder | None:
    """The session of folder `name` of the sessions folder `top`, read from its files (its
    record, its journal's `stat`, its lock probed, whether ``worker.json`` is there); None when
    it is no session (no record, not a folder)."""
    folder = f"{top}/{name}"
    try:
        folder_time = os.stat(folder).st_mtime_ns
        raw, record_time = _read(folder + "/session.json")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        raw, record_time = b"", 0
    stamp = f"{folder_time}/{record_time}"
    worker = int(lock_held(folder + "/owner.lock") or os.path.lexists(folder + "/worker.json"))
    try:
        js = os.stat(folder + "/journal.jsonl")
        journal_time, journal_size = repr(js.st_mtime), js.st_size
    except OSError:
        journal_time, journal_size = "", None
    odd = (name, "0", stamp, worker, journal_size)
    try:
        data = json.loads(raw)
    except ValueError:
        return odd
    if not isinstance(data, dict):
        return odd
    sid, created, where = data.get("id"), data.get("created_at"), data.get("working_directory")
    title = data.get("title", "")
    agent, model, parent = data.get("agent", "python"), data.get("model"), data.get("parent_id")
    status, participant = data.get("status", "active"), data.get("for_participant")
    if not (
        _text(sid)
        and isinstance(created, str)
        and _CREATED.fullmatch(created)
        and _text(where)
        and _text(title)
        and _text(agent)
        and (model is None or _text(model))
        and status in ("active", "archived")
        and (parent is None or _text(parent))
        and data.get("budget") is None
        and (participant is None or isinstance(participant, str))
    ):
        return odd
    line = SEP.join(
        (
            "1",
            "1" if status == "archived" else "0",
            journal_time,
            str(sid),  # a folder copied by hand holds another's id, and is listed with it
            str(title),
            str(where),
            created,
            str(agent),
            NONE if model is None else str(model),
            NONE if parent is None else str(parent),
        )
    )
    return (name, line, stamp, worker, journal_size)


def _text(value: object) -> bool:
    return isinstance(value, str) and SEP not in value and NONE not in value


# --- the table -----------------------------------------------------------------------------------
def _open(root: str, *, make: bool) -> sqlite3.Connection | None:
    """The summary of state dir `root` (None: there is none and `make` is false, or it cannot
    be opened); one of another schema is emptied and marked with this one."""
    path = f"{root}/{FILE}"
    if not make and not os.path.exists(path):
        return None
    db = sqlite3.connect(path, timeout=BUSY, isolation_level=None, check_same_thread=False)
    try:
        found = None
        with contextlib.suppress(sqlite3.OperationalError):
            found = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        if found is None or found[0] != SCHEMA:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("BEGIN IMMEDIATE")
            with contextlib.suppress(sqlite3.OperationalError):
                found = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        if found is None or found[0] != SCHEMA:  # looked at again once this one alone writes
            db.execute("DROP TABLE IF EXISTS sessions")
            db.execute("DROP TABLE IF EXISTS meta")
            for statement in _DDL.strip().split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute("INSERT INTO meta VALUES('schema', ?)", (SCHEMA,))
        if db.in_transaction:
            db.execute("COMMIT")
        db.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.Error:
        db.close()
        raise
    return db


def _upsert(db: sqlite3.Connection, got: Folder, *, worker: bool | None, state: str | None) -> None:
    """Write `got` as its session's row (`worker`, `state`: what the writer knows of them better
    than the folder says; None: the folder's word for a new row, the row's own otherwise)."""
    sid, line, stamp, found, size = got
    held = found if worker is None else int(worker)
    db.execute(
        "INSERT INTO sessions(id, line, stamp, worker, journal_size, state) VALUES(?,?,?,?,?,?) "
        "ON CONFLICT(id) DO UPDATE SET line=excluded.line, stamp=excluded.stamp, "
        "journal_size=excluded.journal_size, seq=seq+1"
        + (", worker=excluded.worker" if worker is not None else "")
        + (", state=excluded.state" if state is not None else ""),
        (sid, line, stamp, held, size, state or ("running" if held else "stopped")),
    )


def note_session(
    root: str | os.PathLike[str], session_id: str, *, worker: bool | None = None, state: str | None = None
) -> None:
    """Write session `session_id`'s row from its folder as it is now (a record saved, a worker
    starting or leaving: `worker`, `state`). Never raises: when the row cannot be written, the
    session's record and the sessions folder are touched, so that the next listing reads the
    session from its folder."""
    root = os.fspath(root)
    top = f"{root}/sessions"
    try:
        db = _open(root, make=True)
        assert db is not None
        try:
            db.execute("BEGIN IMMEDIATE")
            got = read_folder(top, session_id)  # read inside the transaction: writers take turns
            if got is None:
                db.execute("DELETE FROM sessions WHERE id=?", (session_id,))
            else:
                _upsert(db, got, worker=worker, state=state)
            db.execute("COMMIT")
        finally:
            db.close()
    except (sqlite3.Error, OSError) as exc:
        _log("the sessions' summary %s/%s was not updated (%s)", root, FILE, exc)
        for path in (f"{top}/{session_id}/session.json", top):
            with contextlib.suppress(OSError):
                os.utime(path)


def note_state(db: sqlite3.Connection, session_id: str, state: str) -> None:
    """A running worker's state (``running``, ``idle``) in its row; nothing once its row says it
    stopped (a late write from its indexing thread)."""
    db.execute("UPDATE sessions SET state=?, seq=seq+1 WHERE id=? AND worker=1", (state, session_id))


def connect(root: str | os.PathLike[str]) -> sqlite3.Connection:
    """A connection to the summary of state dir `root` (made when missing), for a writer that
    keeps one (a worker's indexing thread)."""
    db = _open(os.fspath(root), make=True)
    assert db is not None
    return db


# --- reading it ----------------------------------------------------------------------------------
def read(root: str | os.PathLike[str], *, include_archived: bool) -> list[Folder | str]:
    """Every session of state dir `root`, in the sessions folder's order, by the freshness rule
    (module docstring): a `Folder` for each stopped one, the id of each one the access layer
    must sum up (a worker holds it or left its ``worker.json``, or its record is not plain);
    archived ones only with `include_archived`. Rows found stale are written again."""
    root = os.fspath(root)
    top = f"{root}/sessions"
    try:
        fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    try:
        now = time.time_ns()
        mark = os.fstat(fd).st_mtime_ns  # before the names: a change after it moves it again
        names = os.listdir(fd)
        db: sqlite3.Connection | None = None
        known: dict[str, tuple[str, str, str, int, int]] = {}
        checked = False
        try:
            db = _open(root, make=True)
            if db is not None:
                seen = db.execute("SELECT value FROM meta WHERE key='checked'").fetchone()
                checked = seen is not None and seen[0] == str(mark)
                known = {
                    row[0]: row for row in db.execute("SELECT id, line, stamp, worker, seq FROM sessions")
                }
        except (sqlite3.Error, OSError) as exc:
            # Every folder is read; a file that is no summary (torn, another tool's) is made
            # again from them, unless another process holds it or the state dir is read-only.
            if db is not None:
                db.close()
            db, known, checked = None, {}, False
            if isinstance(exc, sqlite3.Error) and not _busy(exc):
                db = _made_again(root)
        out: list[Folder | str] = []
        fresh: list[tuple[str, Folder | None, int | None]] = []
        for name in names:
            row = known.pop(name, None)
            got: Folder | None
            if row is not None:
                if row[3]:
                    # A worker runs, or ran and did not say it stopped (killed).
                    if lock_held(f"{top}/{name}/owner.lock"):
                        out.append(name)
                        continue
                    got = read_folder(top, name)  # its row stays: the worker may be starting
                elif checked or _stamp(name, fd) == row[2]:
                    got = row  # the same shape, its seq where the journal's size is
                else:
                    got = read_folder(top, name)
                    fresh.append((name, got, row[4]))
            elif len(name) == 16 and _ID.fullmatch(name):
                got = read_folder(top, name)
                if got is not None:
                    fresh.append((name, got, None))
            else:
                continue
            if got is None:
                continue
            line = got[1]
            if line[0] == "0" or got[3]:
                out.append(name)
            elif include_archived or line[2] == "0":
                out.append(got)
        if db is not None:
            try:
                _remember(db, fresh, known, str(mark) if now - mark > RACY and not checked else None)
            except sqlite3.Error:
                pass  # read again from the folders by the next listing
            finally:
                db.close()
        return out
    finally:
        os.close(fd)


def _busy(exc: sqlite3.Error) -> bool:
    """Whether `exc` says another process holds the database (not that it is broken)."""
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _made_again(root: str) -> sqlite3.Connection | None:
    """A new, empty summary in place of the one at `root` that could not be read (None: it
    cannot be made)."""
    try:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{root}/{FILE}{suffix}")
        return _open(root, make=True)
    except (sqlite3.Error, OSError):
        return None


def _stamp(name: str, top: int) -> str:
    """The times of folder `name` of the sessions folder (its descriptor `top`) and of its record,
    as a row keeps them: a file made or removed in the folder moves the first, the record
    rewritten (by tui, which replaces it, or in place by hand) the second."""
    try:
        folder = os.stat(name, dir_fd=top).st_mtime_ns
        return f"{folder}/{os.stat(f'{name}/session.json', dir_fd=top).st_mtime_ns}"
    except OSError:
        return ""


def _remember(
    db: sqlite3.Connection,
    fresh: list[tuple[str, Folder | None, int | None]],
    gone: dict[str, tuple[str, str, str, int, int]],
    mark: str | None,
) -> None:
    """Write what a listing read from the folders: a row only where no one wrote it since it
    was read (its ``seq``), and the sessions folder's time they were all checked at (`mark`)."""
    if not fresh and not gone and mark is None:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        for name, got, seq in fresh:
            if got is None:
                db.execute("DELETE FROM sessions WHERE id=? AND seq=?", (name, seq))
            elif seq is None:
                db.execute(
                    "INSERT OR IGNORE INTO sessions(id, line, stamp, worker, journal_size, state) "
                    "VALUES(?,?,?,?,?,?)",
                    (*got, "running" if got[3] else "stopped"),
                )
            else:
                db.execute(
                    "UPDATE sessions SET line=?, stamp=?, worker=?, journal_size=?, seq=seq+1 "
                    "WHERE id=? AND seq=?",
                    (*got[1:], name, seq),
                )
        for name, row in gone.items():
            db.execute("DELETE FROM sessions WHERE id=? AND seq=?", (name, row[4]))
        if mark is not None:
            db.execute("INSERT OR REPLACE INTO meta VALUES('checked', ?)", (mark,))
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
