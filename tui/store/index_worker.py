"""A worker's share of the search index: its own session indexed at each turn's end, in a thread
of its own (`Indexer`), so the journal's writer never waits for SQLite. What it leaves (a backlog
longer than `WORKER_MOST`, a worker killed before it indexed) is caught up by the next search
(`tui.store.index.SearchIndex.catch_up`). The same thread writes the worker's state (a turn
running, idle) into the sessions' summary (`tui.summary`).
"""

from __future__ import annotations

import logging
import sqlite3
import threading

from tui.store.index import SearchIndex
from tui.store.paths import StatePaths
from tui.summary import connect, note_state

__all__ = ["GATHER", "WORKER_MOST", "Indexer"]

log = logging.getLogger("tui.store.index")

GATHER = 0.25
"""Seconds a worker's indexer waits after a turn's end for more to index in the same go."""
WORKER_MOST = 16 << 20
"""Bytes of journal a worker indexes itself at most: a longer backlog (a long session an older
worker wrote) is left to the next search, in its own process, not to the worker's thread."""


class Indexer:
    """A worker's indexing of its session: told at each turn's end, it indexes in a thread of its
    own, so the journal's writer never waits for the index.

    Args:
        state: the state dir.
        session_id: the worker's session.
    """

    def __init__(self, state: StatePaths, session_id: str) -> None:
        self.state = state
        self.session_id = session_id
        self._due = threading.Event()
        self._woken = threading.Event()
        """Set only to end a gathering wait early (`stop`)."""
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.runs = 0
        """How many times it indexed (for tests)."""
        self.most = WORKER_MOST
        """The longest backlog it indexes itself (`WORKER_MOST`)."""
        self.idle = threading.Event()
        """Set while nothing is due and nothing runs."""
        self.idle.set()
        self._told = threading.Lock()
        """Guards what is due (`_index`, `_state`) between the writer's thread and this one."""
        self._index = False
        self._state: str | None = None

    def poke(self) -> None:
        """Something worth finding was written: index it soon (never waits)."""
        with self._told:
            self._index = True
        self._wake()

    def note(self, state: str) -> None:
        """The worker's state changed (``running``, ``idle``): write it into the sessions'
        summary soon (never waits; only the last one told is written)."""
        with self._told:
            self._state = state
        self._wake()

    def _wake(self) -> None:
        self.idle.clear()
        self._due.set()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="tui-index", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """No more indexing after the current run (what is left is caught up by the next search)."""
        self._stopping = True
        self._due.set()
        self._woken.set()

    def _run(self) -> None:
        index: SearchIndex | None = None
        summary: sqlite3.Connection | None = None
        try:
            while True:
                self._due.wait()
                if self._stopping:
                    break
                # What ends within `GATHER` is indexed in one go: a burst of short turns costs
                # one transaction, not one each, and the writer's thread is left alone meanwhile.
                self._woken.wait(GATHER)
                self._due.clear()
                with self._told:
                    told, self._state = self._state, None
                    due, self._index = self._index, False
                if told is not None:
                    try:
                        if summary is None:
                            summary = connect(self.state.root)
                        note_state(summary, self.session_id, told)
                    except (sqlite3.Error, OSError) as exc:
                        log.warning("the sessions' summary was not told the state %s (%s)", told, exc)
                if not due:
                    if not self._due.is_set():
                        self.idle.set()
                    continue
                try:
                    if index is None:
                        index = SearchIndex(self.state)
                    index.index_session(self.session_id, most=self.most)
                    self.runs += 1
                except (sqlite3.Error, OSError) as exc:
                    log.warning("the search index was not updated (%s); the next search catches it up", exc)
                if not self._due.is_set():
                    self.idle.set()
        finally:
            if index is not None:
                index.close()
            if summary is not None:
                summary.close()
            self.idle.set()
