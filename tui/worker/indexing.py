"""The worker keeps the state dir's search index (`tui.store.index`) current: after each turn's
end (and a note, an answer or a child's end between turns) its `Indexer` thread indexes the
journal's new lines, off the journal's write path: the listener only wakes the thread. The same
thread writes the worker's state at each turn's start and end into the sessions' summary
(`tui.summary`)."""

from __future__ import annotations

from tui.protocol import Event
from tui.protocol.state import SessionState
from tui.store import SessionPaths, StatePaths
from tui.store.index_worker import Indexer
from tui.worker.writer import Listener

__all__ = ["INDEXED_AFTER", "keep_index"]

INDEXED_AFTER = frozenset({"turn_ended", "note", "child_ended", "question_resolved"})
"""The events after which the journal holds something new to find (a turn once it ended)."""


def keep_index(listeners: list[Listener], paths: SessionPaths) -> Indexer:
    """An `Indexer` of the session of `paths`, woken by a listener added to `listeners`."""
    indexer = Indexer(StatePaths(paths.root.parent.parent), paths.session_id)

    def saw(event: Event, state: SessionState) -> None:
        if event.type in INDEXED_AFTER and state.current is None:
            indexer.poke()
        if event.type == "turn_started":
            indexer.note("running")
        elif event.type == "turn_ended":
            indexer.note("idle")

    listeners.append(saw)
    return indexer
