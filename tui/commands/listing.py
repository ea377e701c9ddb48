"""``tui sessions`` (cli.md): this machine's sessions read straight from their folders.

A stopped session is its ``session.json`` (read as JSON and checked field by field, without the
record's model), its journal's time (one ``stat``) and the absence of ``worker.json`` (another):
no lock is probed, no worker asked, no task made. A session whose folder holds ``worker.json``
(a worker runs, or died and left it), has no journal yet (a worker may be starting), or whose
record the plain check does not take is summed up as before, by `LocalAccess` (its lock probed,
its worker asked); so are all of them on another machine (``--remote``) or with a ``[cluster]``
in config.toml. This module imports no model, no HTTP client and no asyncio: the commands it
does not need are imported only when a session needs them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from tui.places import config_path, state_dir

if TYPE_CHECKING:
    from tui.access.base import SessionAccess
    from tui.protocol.web import SessionSummary

__all__ = ["Row", "as_tree", "open_access", "read_folders", "run_sessions"]


@dataclass(slots=True)
class Row:
    """A stopped session as `tui sessions` lists it: `SessionSummary`'s fields, without its model
    (what a stopped session has none of stays at its default)."""

    id: str
    title: str
    folder: str
    created_at: datetime
    updated_at: datetime | None
    agent: str
    model: str | None
    archived: bool
    parent_id: str | None
    state: str = "stopped"
    live: bool = False
    memory: int | None = None
    idle_seconds: float | None = None
    quiet_seconds: float | None = None
    worker_version: str | None = None
    outdated: bool = False
    idle_timeout: float | None = None
    node: str | None = None

    def as_json(self) -> dict[str, Any]:
        """What ``SessionSummary.model_dump(mode="json")`` gives for the same session."""
        return {
            "id": self.id,
            "title": self.title,
            "state": self.state,
            "live": self.live,
            "folder": self.folder,
            "created_at": _when(self.created_at),
            "updated_at": _when(self.updated_at) if self.updated_at is not None else None,
            "agent": self.agent,
            "model": self.model,
            "archived": self.archived,
            "parent_id": self.parent_id,
            "memory": None,
            "idle_seconds": None,
            "quiet_seconds": None,
            "worker_version": None,
            "outdated": False,
            "idle_timeout": None,
            "node": None,
        }


_CREATED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?(?:Z|[+-]\d\d:\d\d)?")
"""A record's ``created_at`` as tui writes it; anything else is read through the record's model."""


def _when(moment: datetime) -> str:
    text = moment.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        parts = [os.read(fd, 1 << 16)]
        while len(parts[-1]) == 1 << 16:
            parts.append(os.read(fd, 1 << 16))
    finally:
        os.close(fd)
    return b"".join(parts)


def _row(top: str, name: str, include_archived: bool) -> Row | str | None:
    """The session of folder `name`: its row, or its id when `LocalAccess` must sum it up, or None
    when it is not listed (no record; archived, unless `include_archived`)."""
    folder = f"{top}/{name}"
    try:
        raw = _read(folder + "/session.json")
    except FileNotFoundError:
        return None
    except OSError:
        return name
    try:
        data = json.loads(raw)
    except ValueError:
        return name
    if not isinstance(data, dict):
        return name
    sid, created, where = data.get("id"), data.get("created_at"), data.get("working_directory")
    title, agent, model = data.get("title", ""), data.get("agent", "python"), data.get("model")
    status, parent = data.get("status", "active"), data.get("parent_id")
    if not (
        isinstance(sid, str)
        and isinstance(created, str)
        and _CREATED.fullmatch(created)
        and isinstance(where, str)
        and isinstance(title, str)
        and isinstance(agent, str)
        and (model is None or isinstance(model, str))
        and status in ("active", "archived")
        and (parent is None or isinstance(parent, str))
        and data.get("budget") is None
        and (data.get("for_participant") is None or isinstance(data.get("for_participant"), str))
    ):
        return name
    if status == "archived" and not include_archived:
        return None
    if os.path.lexists(folder + "/worker.json"):
        return name
    try:
        updated = datetime.fromtimestamp(os.stat(folder + "/journal.jsonl").st_mtime, UTC)
    except OSError:
        return name
    return Row(
        id=sid,
        title=title,
        folder=where,
        created_at=datetime.fromisoformat(created),
        updated_at=updated,
        agent=agent,
        model=model,
        archived=status == "archived",
        parent_id=parent,
        state="archived" if status == "archived" else "stopped",
    )


def read_folders(top: str, *, include_archived: bool) -> list[Row | str]:
    """Every session under the sessions folder `top`, in the folder's order: a `Row` for each
    stopped one, the id of each one `LocalAccess` must sum up."""
    try:
        entries = [e.name for e in os.scandir(top) if len(e.name) == 16 and e.is_dir()]
    except FileNotFoundError:
        return []
    out: list[Row | str] = []
    for name in entries:
        if _ID.fullmatch(name):
            got = _row(top, name, include_archived)
            if got is not None:
                out.append(got)
    return out


_ID = re.compile(r"[0-9a-f]{16}")


def _cluster_named() -> bool:
    """Whether config.toml may name a ``[cluster]`` (its workers are then found by its engine)."""
    try:
        with open(config_path(), "rb") as f:
            return b"cluster" in f.read()
    except OSError:
        return False


def open_access(args: argparse.Namespace) -> SessionAccess:
    """The sessions a command works on: this machine's, or `--remote NAME`'s."""
    remote = getattr(args, "remote", None)
    if remote:
        from tui.access.remote import open_access as open_remote

        return open_remote(remote, getattr(args, "state_dir", None))
    from tui.access.local import LocalAccess
    from tui.store import StatePaths

    return LocalAccess(StatePaths.resolve(getattr(args, "state_dir", None)))


def run_sessions(args: argparse.Namespace) -> int:
    """``tui sessions``: the sessions as a table, or ``--json``."""
    if getattr(args, "remote", None) or _cluster_named():
        import asyncio

        access = open_access(args)
        summed = asyncio.run(access.list_sessions(include_archived=args.all))
        return show(summed, args, access.command)
    root = state_dir(getattr(args, "state_dir", None))
    found = read_folders(str(root / "sessions"), include_archived=args.all)
    asked = [item for item in found if isinstance(item, str)]
    by_id: dict[str, SessionSummary] = {}
    if asked:
        # Each lock probed, each live worker asked, as for every session before.
        import asyncio

        from tui.access.local import LocalAccess
        from tui.store import StatePaths

        local = LocalAccess(StatePaths(root))
        summed = asyncio.run(local.list_sessions(include_archived=args.all, only=asked))
        by_id = {s.id: s for s in summed}
    rows: list[Row | SessionSummary] = [
        item if isinstance(item, Row) else by_id[item]
        for item in found
        if not isinstance(item, str) or item in by_id
    ]
    # Newest first, as the records were sorted (a stable sort: ties keep the folder's order).
    rows.sort(key=lambda r: r.created_at, reverse=True)
    return show(rows, args, lambda *words: " ".join(("tui", *words)))


# --- the table -----------------------------------------------------------------------------------
def show(rows: Sequence[Row | SessionSummary], args: argparse.Namespace, command: Callable[..., str]) -> int:
    """Print `rows` as the table, or as JSON with ``--json``; `command`: a command as the user types
    it for this machine (for the hints)."""
    if args.json:
        print(
            json.dumps(
                [r.as_json() if isinstance(r, Row) else r.model_dump(mode="json") for r in rows], indent=2
            )
        )
        return 0
    if not rows:
        hint = "" if args.all else f" (`{command('sessions', '--all')}` shows archived ones)"
        _say(f"no sessions yet{hint}; `{command('send', '--new', 'PROMPT')}` starts one")
        return 0
    table = [("ID", "TITLE", "STATE", "LIVE", "MEMORY", "IDLE", "AGE", "FOLDER")]
    now, home = datetime.now(UTC), os.path.expanduser("~")
    for depth, r in as_tree(list(rows)):
        live = "yes" if r.live else "no"
        # A child is drawn under its parent, its title indented: ``└ title``.
        title = "  " * (depth - 1) + "└ " * (depth > 0) + _clip(r.title or "(untitled)", 40)
        if r.outdated:
            live = f"yes, old tui {r.worker_version}"
        if r.live and r.node:
            live += f", on {r.node}"
        table.append(
            (r.id[:8], title, r.state, live, _memory(r), _idle(r), _age(r, now), _folder(r.folder, home))
        )
    last = len(table[0]) - 1
    widths = [max(len(row[i]) for row in table) for i in range(last)]
    sys.stdout.write(
        "".join(
            "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:last])) + "  " + row[last] + "\n"
            for row in table
        )
    )
    old = sum(r.outdated for r in rows)
    if old:
        from tui import __version__

        sys.stdout.flush()
        _say(
            f"{old} worker{'s run' if old != 1 else ' runs'} an older tui than the one installed "
            f"({__version__}); `{command('restart', '--outdated')}` moves the idle ones to it"
        )
    return 0


def _say(text: str) -> None:
    print(f"tui: {text}", file=sys.stderr, flush=True)


class _Summed(Protocol):
    @property
    def created_at(self) -> datetime: ...
    @property
    def updated_at(self) -> datetime | None: ...
    @property
    def memory(self) -> int | None: ...
    @property
    def quiet_seconds(self) -> float | None: ...
    @property
    def idle_seconds(self) -> float | None: ...
    @property
    def idle_timeout(self) -> float | None: ...


def _age(summary: _Summed, now: datetime | None = None) -> str:
    then = summary.updated_at or summary.created_at
    return _span(((now or datetime.now(UTC)) - then).total_seconds())


def _span(seconds: float) -> str:
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _memory(summary: _Summed) -> str:
    if summary.memory is None:
        return "-"
    return f"{summary.memory / 2**20:.0f}M"


def _idle(summary: _Summed) -> str:
    """How long since a live worker's session last did something, whoever is attached, and after
    how long the worker lets go (``4m/30m``) when it counts toward that (nobody attached)."""
    quiet = summary.quiet_seconds if summary.quiet_seconds is not None else summary.idle_seconds
    if quiet is None:
        return "-"
    limit = summary.idle_timeout
    counting = limit is not None and limit > 0 and (summary.idle_seconds or 0) > 0
    return _span(quiet) + (f"/{_span(limit)}" if counting and limit is not None else "")


def _folder(path: str, home: str | None = None) -> str:
    home = home if home is not None else os.path.expanduser("~")
    return "~" + path[len(home) :] if home != "/" and (path == home or path.startswith(home + "/")) else path


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


class _Node(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def parent_id(self) -> str | None: ...


N = TypeVar("N", bound=_Node)


def as_tree(rows: list[N]) -> list[tuple[int, N]]:
    """`rows` with each child right under its parent (depth first, in the order given), each
    with its depth; a child whose parent is not listed (archived, deleted) is at the top."""
    listed = {r.id for r in rows}
    under: dict[str | None, list[N]] = {}
    for r in rows:
        under.setdefault(r.parent_id if r.parent_id in listed else None, []).append(r)
    out: list[tuple[int, N]] = []
    todo = [(0, r) for r in reversed(under.get(None, []))]
    while todo:
        depth, r = todo.pop()
        out.append((depth, r))
        todo.extend((depth + 1, child) for child in reversed(under.pop(r.id, [])))
    return out
