"""The search index of every session of the state dir: one SQLite database (``index.sqlite``)
with an FTS5 table, for ``tui search``, the app's search across sessions and the web bridge's
``GET /api/search``.

The journal stays the only truth. The index holds, for each text of a session (a turn's prompt,
its reply, each tool call's arguments and whole output, errors, notes, questions and their
answers, its children's lines), the words (FTS5, contentless: the text itself is not kept) and
where the text lies in the journal: the byte range of its turn and its place among that turn's
texts. A hit's snippet is made by reading that range again, and a hit whose text no longer holds
the words (a journal rewritten by hand) is dropped there.

A turn is indexed once it ended, its texts joined as the reader sees them (a tool's output whole,
not piece by piece: a word cut between two pieces is found). Each session's row says how far its
journal is indexed (``upto``, at a turn's start when a turn is still open) and which file it is
(its inode): the worker indexes its journal at each turn's end, in a thread (`Indexer`, in
`tui.store.index_worker`), and every search first catches up each session whose journal grew, was
replaced, or is new (sessions written by an older worker or by hand), so deleting the file only
costs a rebuild.

Many processes write it (each worker, each search): WAL mode, a busy timeout, and one short
transaction per session (or per few MiB of a long journal).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import re
import sqlite3
from collections.abc import Callable, Collection, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tui.errors import TuiError, UsageError
from tui.protocol.web import Found, FoundHit, SearchQuery
from tui.store.index_query import Hit, Query, snippet
from tui.store.index_texts import WHERE, as_str, cut, decode, micros, texts_of
from tui.store.paths import StatePaths, is_session_id

__all__ = [
    "INDEX_FILE",
    "SearchIndex",
    "find",
    "find_in",
    "remove_index",
]

log = logging.getLogger("tui.store.index")

INDEX_FILE = "index.sqlite"
"""The index's file in the state dir (with its ``-wal`` and ``-shm``)."""
SCHEMA = 2
"""Bumped when what is indexed changes: an index of another schema is rebuilt."""
BLOCK = 8 << 20
"""Bytes of journal read at once; a long journal is indexed in one transaction per block."""
BUSY = 10.0
"""Seconds a writer waits for another's transaction."""
PREFIX_MOST = 32
"""Words a prefix may start that a search asks for one by one (`SearchIndex._words`); more are
left to FTS5's prefix query."""

_Row = tuple[int, int, int, str, str, int, int, int, str]
"""A text as inserted: (rowid, session's number, turn, kind, name, start, stop, k, text)."""

# --- the index -------------------------------------------------------------------------------
_DDL = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions(
    n INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,
    inode INTEGER NOT NULL DEFAULT 0, upto INTEGER NOT NULL DEFAULT 0, turns INTEGER NOT NULL DEFAULT 0,
    record INTEGER NOT NULL DEFAULT 0, title TEXT NOT NULL DEFAULT '', folder TEXT NOT NULL DEFAULT '',
    agent TEXT NOT NULL DEFAULT '', archived INTEGER NOT NULL DEFAULT 0, parent TEXT);
CREATE TABLE IF NOT EXISTS rows(
    rowid INTEGER PRIMARY KEY, session INTEGER NOT NULL, turn INTEGER NOT NULL,
    kind TEXT NOT NULL, name TEXT NOT NULL,
    start INTEGER NOT NULL, stop INTEGER NOT NULL, k INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS rows_session ON rows(session);
CREATE VIRTUAL TABLE IF NOT EXISTS words USING fts5(
    text, content='', columnsize=0, tokenize='unicode61 remove_diacritics 0');
"""
# rowid: the turn's start in microseconds since the epoch, times 16 (bumped past any taken), so that FTS5
# hands hits newest first (ORDER BY rowid DESC) and stops at the page's end.


class SearchIndex:
    """The state dir's search index (made, or rebuilt, on first use).

    Args:
        state: the state dir.
        path: the database (default: ``index.sqlite`` in the state dir).
    """

    def __init__(self, state: StatePaths, *, path: Path | None = None) -> None:
        self.state = state
        self.path = path or state.root / INDEX_FILE
        self.db = self._open()

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=BUSY, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(_DDL)
        row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        if row is None:
            db.execute("INSERT OR IGNORE INTO meta VALUES('schema', ?)", (str(SCHEMA),))
        elif row[0] != str(SCHEMA):
            db.close()
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(str(self.path) + suffix)
            return self._open()
        return db

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> SearchIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- keeping it current ------------------------------------------------------------------
    def behind(self) -> list[tuple[str, int, int]]:
        """The sessions whose journal holds more than the index (or another file, or is new):
        (id, bytes to read, journal size).

        One `stat` a session (its journal) is what every search costs before it asks, so it is
        kept to plain calls relative to the sessions folder. A session's record is looked at
        when the sessions folder changed (a session made or deleted, and `save_session` touches
        it), when its journal changed, or when the session is new to the index.
        """
        known = {
            sid: (inode, upto, record)
            for sid, inode, upto, record in self.db.execute("SELECT id, inode, upto, record FROM sessions")
        }
        out: list[tuple[str, int, int]] = []
        stale: list[tuple[str, str]] = []
        top = str(self.state.sessions)
        try:
            fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            fd = -1
        mark = ""
        try:
            if fd >= 0:
                mark = str(os.fstat(fd).st_mtime_ns)  # before the records are read
                names = os.listdir(fd)
            else:
                names = []
            every = mark != self._meta("records")
            stat = os.stat
            for name in names:
                inode, upto, seen = known.get(name) or (0, -1, 0)
                if upto < 0 and (len(name) != 16 or not is_session_id(name)):
                    continue
                try:
                    st = stat(f"{name}/journal.jsonl", dir_fd=fd)
                except OSError:
                    continue
                if every or inode != st.st_ino or st.st_size != upto:
                    try:
                        mtime = stat(f"{name}/session.json", dir_fd=fd).st_mtime_ns
                    except OSError:
                        continue
                    if seen != mtime:
                        stale.append((name, f"{top}/{name}/session.json"))
                if inode != st.st_ino or st.st_size < upto:
                    out.append((name, st.st_size, st.st_size))
                elif st.st_size > upto:
                    out.append((name, st.st_size - upto, st.st_size))
        finally:
            if fd >= 0:
                os.close(fd)
        if stale or every:
            self._records(stale, mark if every else None)
        gone = list(known.keys() - set(names))
        if gone:
            self._forget(gone)
        return out

    def _meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _records(self, stale: list[tuple[str, str]], mark: str | None = None) -> None:
        """Keep what each session's record says (title, folder, agent, archived) beside its rows
        (and `mark`, the sessions folder's mtime they were all looked at for, when given)."""
        with self._writing():
            if mark is not None:
                self.db.execute("INSERT OR REPLACE INTO meta VALUES('records', ?)", (mark,))
            for sid, path in stale:
                try:
                    mtime = os.stat(path).st_mtime_ns
                    with open(path, "rb") as f:
                        data = json.load(f)
                except (OSError, ValueError):
                    continue
                if not isinstance(data, dict):
                    continue
                values = (
                    mtime,
                    as_str(data.get("title")),
                    as_str(data.get("working_directory")),
                    as_str(data.get("agent") or "python"),
                    int(data.get("status") == "archived"),
                    data.get("parent_id") if isinstance(data.get("parent_id"), str) else None,
                    sid,
                )
                self.db.execute("INSERT OR IGNORE INTO sessions(id) VALUES(?)", (sid,))
                self.db.execute(
                    "UPDATE sessions SET record=?, title=?, folder=?, agent=?, archived=?, parent=? "
                    "WHERE id=?",
                    values,
                )

    def _forget(self, session_ids: list[str]) -> None:
        """Drop the rows of deleted sessions (their words stay in FTS5 until a rebuild, unreached)."""
        with self._writing():
            for sid in session_ids:
                row = self.db.execute("SELECT n FROM sessions WHERE id=?", (sid,)).fetchone()
                if row is not None:
                    self.db.execute("DELETE FROM rows WHERE session=?", (row[0],))
                    self.db.execute("DELETE FROM sessions WHERE n=?", (row[0],))

    def catch_up(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Index what every session's journal holds beyond the index.

        Args:
            progress: called with (bytes done, bytes to do) as it goes, when there is much to do.

        Returns:
            How many sessions were caught up.
        """
        todo = self.behind()
        total = sum(size for _, size, _ in todo)
        done = 0
        for sid, size, _ in todo:
            base = done

            def step(n: int, base: int = base) -> None:
                if progress is not None:
                    progress(base + n, total)

            self.index_session(sid, step)
            done += size
        if progress is not None and todo:
            progress(total, total)
        return len(todo)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def index_session(
        self, session_id: str, step: Callable[[int], None] | None = None, *, most: int | None = None
    ) -> int:
        """Index what `session_id`'s journal holds beyond the index (all of it when the journal
        was replaced or shrank); nothing when that is more than `most` bytes.

        Returns:
            How many texts were added.
        """
        journal = self.state.session(session_id).journal
        try:
            fd = os.open(journal, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return 0
        added = 0
        try:
            st = os.fstat(fd)
            offset: int | None = None
            while True:
                with self._writing():
                    n, upto, turns = self._session_row(session_id, st.st_ino, st.st_size)
                    if offset is not None and upto != offset:
                        break  # someone else indexes this journal now
                    if upto >= st.st_size or (
                        offset is None and most is not None and st.st_size - upto > most
                    ):
                        break
                    want = BLOCK
                    while True:
                        count, done, done_turns = self._index_block(fd, n, upto, turns, st.st_size, want)
                        if done > upto or upto + want >= st.st_size:
                            break
                        want *= 2  # one turn longer than the block: read it whole
                    added += count
                    upto, turns = done, done_turns
                    self.db.execute(
                        "UPDATE sessions SET inode=?, upto=?, turns=? WHERE n=?", (st.st_ino, upto, turns, n)
                    )
                if step is not None:
                    step(upto)
                if offset == upto:
                    break  # a turn still open: the rest is indexed when it ends
                offset = upto
        finally:
            os.close(fd)
        return added

    def _session_row(self, session_id: str, inode: int, size: int) -> tuple[int, int, int]:
        row = self.db.execute(
            "SELECT n, inode, upto, turns FROM sessions WHERE id=?", (session_id,)
        ).fetchone()
        if row is None:
            cur = self.db.execute("INSERT INTO sessions(id, inode) VALUES(?, ?)", (session_id, inode))
            assert cur.lastrowid is not None
            return cur.lastrowid, 0, 0
        n, known, upto, turns = row
        if known != inode or size < upto:
            # Another file, or a shorter one: what was indexed of it no longer holds.
            self.db.execute("DELETE FROM rows WHERE session=?", (n,))
            return n, 0, 0
        return n, upto, turns

    def _index_block(
        self, fd: int, n: int, upto: int, turns: int, size: int, want: int
    ) -> tuple[int, int, int]:
        """Index the whole lines from `upto` on, about `want` bytes of them.

        Returns:
            (texts added, the new `upto`, turns started before it).
        """
        data = b""
        pos = upto
        while pos < size:
            more = os.pread(fd, min(max(want - len(data), 1 << 16), size - pos), pos)
            if not more:
                break
            pos += len(more)
            data += more
            if len(data) >= want and b"\n" in more:
                break
        data = data[: data.rfind(b"\n") + 1]
        batch, done, done_turns = cut(data, upto, turns)
        self._insert(
            [
                (rowid, n, seg.turn, text.where, text.name, seg.start, seg.stop, k, text.text)
                for rowid, k, text, seg in batch
            ]
        )
        return len(batch), done, done_turns

    def _insert(self, rows: list[_Row]) -> None:
        """Insert `rows` (each with its session's number after its rowid)."""
        # In rowid order: FTS5 writes out what it holds in memory each time a rowid is not above
        # the last one, so texts inserted out of order cost a segment each (100 times slower).
        rows.sort(key=lambda row: row[0])
        sql = "INSERT INTO rows(rowid, session, turn, kind, name, start, stop, k) VALUES(?,?,?,?,?,?,?,?)"
        self.db.execute("SAVEPOINT batch")
        try:
            self.db.executemany(sql, (row[:8] for row in rows))
        except sqlite3.IntegrityError:
            # Two texts of the same microsecond: each taken rowid is bumped, one by one.
            self.db.execute("ROLLBACK TO batch")
            for i, row in enumerate(rows):
                rowid = row[0]
                while True:
                    try:
                        self.db.execute(sql, (rowid, *row[1:8]))
                        break
                    except sqlite3.IntegrityError:
                        rowid += 1
                rows[i] = (rowid, *row[1:])
        self.db.execute("RELEASE batch")
        self.db.executemany("INSERT INTO words(rowid, text) VALUES(?, ?)", ((row[0], row[8]) for row in rows))

    # --- finding -----------------------------------------------------------------------------
    def search(
        self,
        query: Query,
        *,
        sessions: Collection[str] | None = None,
        folder: str | None = None,
        agent: str | None = None,
        active: bool = False,
        where: Collection[str] | None = None,
        since: datetime | None = None,
        limit: int = 20,
        before: int | None = None,
    ) -> tuple[list[Hit], int | None]:
        """The newest hits of `query`, at most `limit`.

        Args:
            sessions: only these sessions (None: every one).
            folder: only sessions in this folder or below it.
            agent: only sessions of this agent.
            active: leave archived sessions out.
            where: only these kinds of text (`WHERE`).
            since: only turns started at or after it.
            before: only hits older than this cursor (the previous page's `next`).

        Returns:
            The hits, newest first, and the cursor of the next page (None: no more).
        """
        match = query.match
        if query.prefix:
            words = self._words(query.words[-1])
            if words is not None:
                if not words:
                    return [], None
                head = " ".join(query.words[:-1])
                match = " OR ".join('"' + f"{head} {w}".strip().replace('"', '""') + '"' for w in words)
        clauses = ["words MATCH ?"]
        params: list[Any] = [match]
        if since is not None:
            clauses.append("words.rowid >= ?")
            params.append(int(since.timestamp() * 1_000_000) * 16)
        if before is not None:
            clauses.append("words.rowid < ?")
            params.append(before)
        if where is not None:
            clauses.append(f"rows.kind IN ({','.join('?' * len(where))})")
            params += list(where)
        if sessions is not None:
            ids = list(sessions)
            if not ids:
                return [], None
            clauses.append(f"sessions.id IN ({','.join('?' * len(ids))})")
            params += ids
        if folder is not None:
            top = folder.rstrip("/") or "/"
            below = top.rstrip("/").replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%"
            clauses.append("(sessions.folder = ? OR sessions.folder LIKE ? ESCAPE '\\')")
            params += [top, below]
        if agent is not None:
            clauses.append("sessions.agent = ?")
            params.append(agent)
        if active:
            clauses.append("sessions.archived = 0")
        sql = (
            "SELECT words.rowid, sessions.id, rows.turn, rows.kind, rows.name, rows.start, rows.stop, "
            "rows.k, "
            "sessions.title, sessions.folder, sessions.agent, sessions.archived "
            "FROM words JOIN rows ON rows.rowid = words.rowid JOIN sessions ON sessions.n = rows.session "
            "WHERE " + " AND ".join(clauses) + " ORDER BY words.rowid DESC"
        )
        pattern = query.pattern
        hits: list[Hit] = []
        cursor = self.db.execute(sql, params)
        last: int | None = None
        for rowid, sid, turn, kind, name, start, stop, k, title, where_, agent_, archived in cursor:
            if len(hits) >= limit:
                cursor.close()
                return hits, last
            hit = self._hit(pattern, sid, turn, kind, name, start, stop, k)
            last = rowid
            if hit is not None:
                hits.append(
                    dataclasses.replace(
                        hit, title=title, folder=where_, agent=agent_, archived=bool(archived)
                    )
                )
        return hits, None

    def _words(self, prefix: str) -> list[str] | None:
        """The indexed words that start with `prefix`, when they are few (None: more than
        `PREFIX_MOST`, or a prefix FTS5 may fold otherwise than Python does).

        A prefix query makes FTS5 merge the whole list of every word it starts before it hands
        the newest hit; the same words asked for one by one (``"retry" OR "retrieve"``) are read
        newest first, and the first page stops at its 20th. Each word is one look into FTS5's
        list of words (`fts5vocab`), not a read of its hits.
        """
        if not prefix.isascii():
            return None
        self.db.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.vocab USING fts5vocab(main, words, instance)"
        )
        words: list[str] = []
        at, end = prefix, prefix + "\U0010ffff"
        while True:
            row = self.db.execute(
                "SELECT term FROM temp.vocab WHERE term >= ? AND term < ? LIMIT 1", (at, end)
            ).fetchone()
            if row is None:
                return words
            if len(words) == PREFIX_MOST:
                return None
            words.append(row[0])
            at = row[0] + "\x01"  # past it: no word holds a control character

    def _hit(
        self,
        pattern: re.Pattern[str],
        sid: str,
        turn: int,
        kind: str,
        name: str,
        start: int,
        stop: int,
        k: int,
    ) -> Hit | None:
        """The hit as the journal holds it now (None: it no longer holds the words there)."""
        try:
            with open(self.state.session(sid).journal, "rb") as f:
                f.seek(start)
                data = f.read(stop - start)
        except OSError:
            return None
        events = [e for e in map(decode, data.split(b"\n")) if e is not None]
        texts = texts_of(events)
        if k >= len(texts) or texts[k].where != kind:
            return None
        found = pattern.search(texts[k].text)
        if found is None:
            return None
        shown, mark = snippet(texts[k].text, found)
        at = micros(str(events[0].get("at", ""))) if events else 0
        return Hit(
            session_id=sid,
            turn=turn,
            at=datetime.fromtimestamp(at / 1_000_000, UTC),
            where=kind,
            name=name,
            snippet=shown,
            match=mark,
        )


def find(
    state: StatePaths,
    text: str,
    *,
    sessions: Collection[str] | None = None,
    folder: str | None = None,
    agent: str | None = None,
    active: bool = False,
    where: Collection[str] | None = None,
    since: datetime | None = None,
    limit: int = 20,
    before: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Found:
    """Find `text` in the sessions of `state`: the index caught up first, then asked
    (`SearchIndex.search` says what each filter does).

    Raises:
        UsageError: `text` holds no word, or `where` names a kind of text there is not.
    """
    query = Query(text)
    if where is not None:
        unknown = sorted(set(where) - set(WHERE))
        if unknown:
            raise UsageError(f"--in {unknown[0]}: a text is in one of {', '.join(WHERE)}")

    def ask() -> tuple[list[Hit], int | None]:
        with SearchIndex(state) as index:
            index.catch_up(progress)
            return index.search(
                query,
                sessions=sessions,
                folder=folder,
                agent=agent,
                active=active,
                where=where,
                since=since,
                limit=limit,
                before=before,
            )

    try:
        try:
            hits, more = ask()
        except sqlite3.OperationalError:
            raise
        except sqlite3.DatabaseError as exc:
            # Not a database any more (a torn copy, a disk error): it is only a cache of the
            # journals, so it is made again from them.
            log.warning("the search index %s is unreadable (%s): rebuilding it", state.root / INDEX_FILE, exc)
            remove_index(state)
            hits, more = ask()
    except sqlite3.Error as exc:
        raise TuiError(
            f"the search index {state.root / INDEX_FILE} could not be read ({exc}); try again, "
            "or delete it and the next search builds it again from the journals"
        ) from exc
    return Found(
        hits=[
            FoundHit(
                session_id=h.session_id,
                title=h.title,
                folder=h.folder,
                agent=h.agent or "python",
                archived=h.archived,
                turn=h.turn,
                at=h.at,
                where=h.where,
                name=h.name,
                snippet=h.snippet,
                match=list(h.match),
            )
            for h in hits
        ],
        next=more,
    )


def find_in(
    state: StatePaths,
    query: SearchQuery,
    progress: Callable[[int, int], None] | None = None,
    sessions: Collection[str] | None = None,
) -> Found:
    """`find` of a `SearchQuery` (what a machine is asked), in `sessions` only when given."""
    return find(
        state,
        query.q,
        sessions=sessions,
        folder=query.folder,
        agent=query.agent,
        active=query.active,
        where=query.where,
        since=query.since,
        limit=query.limit,
        before=query.before,
        progress=progress,
    )


def remove_index(state: StatePaths) -> None:
    """Delete the index's files (the next search builds it again from the journals)."""
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(state.root / INDEX_FILE) + suffix)
