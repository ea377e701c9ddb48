"""Session records (``session.json``): create, read, list, archive, delete, and id resolution."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ValidationError, field_validator

from tui.errors import AmbiguousId, NotFound, TuiError, WorkerRunning, os_error
from tui.protocol.events import Budget
from tui.protocol.ids import short_id
from tui.store._atomic import write_atomic
from tui.store.lock import is_live
from tui.store.paths import StatePaths, is_session_id
from tui.summary import note_session

__all__ = [
    "SessionRecord",
    "archive_session",
    "create_session",
    "delete_session",
    "get_session",
    "list_sessions",
    "new_session_id",
    "resolve_id",
    "save_session",
    "unarchive_session",
]


class SessionRecord(BaseModel):
    """What ``session.json`` holds."""

    id: str
    """16 lowercase hex characters; printed short as its first 8."""
    title: str = ""
    created_at: datetime
    working_directory: str
    """The session's folder (``--dir`` on the command line)."""
    agent: str = "python"
    model: str | None = None
    status: Literal["active", "archived"] = "active"
    parent_id: str | None = None
    for_participant: str | None = None
    """The participant whose turn (in its parent, or further up) started this child: the children
    it starts spend that share's turns too."""
    budget: Budget | None = None
    """The limits it was made with (``--cost`` …); None: config.toml's ``[budget]``. Its journal
    holds them from its first worker on (``budget_set``), and any change since."""

    @field_validator("created_at")
    @classmethod
    def _zoned(cls, value: datetime) -> datetime:
        """A time written without a zone (by hand, by another tool) is UTC, as tui writes it."""
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def new_session_id() -> str:
    """A fresh random session id."""
    return secrets.token_hex(8)


def save_session(state: StatePaths, record: SessionRecord) -> None:
    """Write a session's record atomically (its folder must exist), its row of the sessions'
    summary (`tui.summary`), and touch the sessions folder: the search index (`tui.store.index`)
    and the summary look at every record only when it changed."""
    write_atomic(state.session(record.id).record, record.model_dump_json(indent=2) + "\n")
    note_session(state.root, record.id)
    with contextlib.suppress(OSError):
        os.utime(state.sessions)


def create_session(
    state: StatePaths,
    *,
    working_directory: str | os.PathLike[str],
    title: str = "",
    agent: str = "python",
    model: str | None = None,
    parent_id: str | None = None,
    budget: Budget | None = None,
) -> SessionRecord:
    """Make a new session's folder and record.

    Args:
        state: the state dir.
        working_directory: the session's folder (made absolute).
        title: a title for lists; empty until the first prompt names one.
        agent: which agent runs its turns (``python`` by default).
        model: the agent's model, if it has models.
        parent_id: the session that started this one (it is that session's child).
        budget: its limits; None: config.toml's ``[budget]``.

    Returns:
        The new record.
    """
    try:
        state.sessions.mkdir(mode=0o700, parents=True, exist_ok=True)
        while True:
            sid = new_session_id()
            paths = state.session(sid)
            try:
                paths.root.mkdir(mode=0o700)
            except FileExistsError:
                continue
            break
        paths.turns.mkdir(mode=0o700)
        paths.images.mkdir(mode=0o700)
    except OSError as exc:
        raise os_error(exc, exc.filename or state.sessions) from exc
    record = SessionRecord(
        id=sid,
        title=title,
        created_at=datetime.now(UTC),
        working_directory=os.path.abspath(working_directory),
        agent=agent,
        model=model,
        parent_id=parent_id,
        budget=budget,
    )
    save_session(state, record)
    return record


def get_session(state: StatePaths, session_id: str) -> SessionRecord:
    """Read one session's record by its full id.

    Raises:
        NotFound: there is no such session.
        TuiError: its record cannot be read.
    """
    path = state.session(session_id).record if is_session_id(session_id) else None
    if path is None or not path.exists():
        raise NotFound(f"no session {session_id!r}; `tui sessions` lists them")
    try:
        return SessionRecord.model_validate_json(path.read_bytes())
    except (OSError, ValidationError) as exc:
        raise TuiError(f"the record of session {session_id} cannot be read ({path}): {exc}") from exc


def list_sessions(
    state: StatePaths, *, include_archived: bool = False, only: Collection[str] | None = None
) -> list[SessionRecord]:
    """Every readable session (`only`: of these ids), newest first (unreadable records are skipped)."""
    records: list[SessionRecord] = []
    for sid in _session_ids(state) if only is None else only:
        try:
            record = get_session(state, sid)
        except TuiError:
            continue
        if include_archived or record.status == "active":
            records.append(record)
    records.sort(key=lambda r: r.created_at, reverse=True)
    return records


def resolve_id(state: StatePaths, prefix: str) -> str:
    """The full id for an id or a unique prefix of one.

    Raises:
        NotFound: no session starts with `prefix`.
        AmbiguousId: several do; `matches` lists them.
    """
    text = prefix.strip().lower()
    if is_session_id(text) and state.session(text).record.exists():
        return text
    matches = sorted(sid for sid in _session_ids(state) if text and sid.startswith(text))
    if not matches and not state.sessions.is_dir():
        raise NotFound(
            f"no session matches {prefix!r}: the state dir {state.root} has no sessions (was it deleted?); "
            "`tui send --new PROMPT` starts one there"
        )
    if not matches:
        raise NotFound(f"no session matches {prefix!r}; `tui sessions --all` lists them")
    if len(matches) > 1:
        shown = ", ".join(short_id(m) for m in matches[:10])
        raise AmbiguousId(
            f"{prefix!r} matches {len(matches)} sessions ({shown}); type more of the id",
            matches=matches,
        )
    return matches[0]


def archive_session(state: StatePaths, session_id: str) -> SessionRecord:
    """Mark a session archived (hidden from lists); its files stay."""
    record = get_session(state, session_id).model_copy(update={"status": "archived"})
    save_session(state, record)
    return record


def unarchive_session(state: StatePaths, session_id: str) -> SessionRecord:
    """Show an archived session in lists again (a session not archived stays as it is)."""
    record = get_session(state, session_id).model_copy(update={"status": "active"})
    save_session(state, record)
    return record


def delete_session(state: StatePaths, session_id: str) -> None:
    """Remove a session's folder (and its socket when it lives elsewhere).

    Raises:
        NotFound: there is no such session.
        Conflict: its worker is live (``worker_running``); stop it first.
    """
    paths = state.session(session_id)
    if not paths.root.exists():
        raise NotFound(f"no session {session_id!r}; `tui sessions --all` lists them")
    if is_live(paths.lock):
        raise WorkerRunning(
            f"session {short_id(session_id)} has a live worker; "
            f"`tui delete {short_id(session_id)} --force` stops it first"
        )
    sock = paths.socket
    if sock.parent != paths.root:
        with contextlib.suppress(FileNotFoundError):
            sock.unlink()
    shutil.rmtree(paths.root, ignore_errors=True)


def _session_ids(state: StatePaths) -> list[str]:
    try:
        return [e.name for e in os.scandir(state.sessions) if e.is_dir() and is_session_id(e.name)]
    except FileNotFoundError:
        return []
