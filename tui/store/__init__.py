"""The state dir: session records, the journal, the owner lock, the worker sidecar, turn records.

Everything here is plain files and no Textual; the worker writes, everyone else reads.
"""

from tui.store.journal import Journal, JournalLine, JournalMark, read_span
from tui.store.lock import EpochFence, OwnerLock, is_live
from tui.store.paths import MAX_SOCKET_PATH, SessionPaths, StatePaths, is_session_id, socket_path_for
from tui.store.sessions import (
    SessionRecord,
    archive_session,
    create_session,
    delete_session,
    get_session,
    list_sessions,
    new_session_id,
    resolve_id,
    save_session,
    unarchive_session,
)
from tui.store.sidecar import WorkerSidecar, live_worker, read_sidecar, write_sidecar
from tui.store.turns import TurnStore

__all__ = [
    "MAX_SOCKET_PATH",
    "EpochFence",
    "Journal",
    "JournalLine",
    "JournalMark",
    "OwnerLock",
    "SessionPaths",
    "SessionRecord",
    "StatePaths",
    "TurnStore",
    "WorkerSidecar",
    "archive_session",
    "create_session",
    "delete_session",
    "get_session",
    "is_live",
    "is_session_id",
    "list_sessions",
    "live_worker",
    "new_session_id",
    "read_sidecar",
    "read_span",
    "resolve_id",
    "save_session",
    "socket_path_for",
    "unarchive_session",
    "write_sidecar",
]
