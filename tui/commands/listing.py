"""``tui sessions`` (cli.md): this machine's sessions read from the summary the workers keep.

A stopped session is its row in the state dir's summary (`tui.summary`: one SQLite read for all
of them, checked against the sessions folder by its freshness rule; a session the summary cannot
vouch for is read from its folder, ``session.json`` checked field by field without the record's
model). A session a worker holds, or whose record the plain check does not take, is summed up as
before, by `LocalAccess` (its worker asked); so are all of them on another machine
(``--remote``) or with a ``[cluster]`` in config.toml. This module imports no model, no HTTP
client and no asyncio: the commands it does not need are imported only when a session needs them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from json.encoder import encode_basestring_ascii as _quote  # what json.dumps quotes with, in C
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from tui.places import config_path, state_dir
from tui.summary import NONE, SEP, Folder, read

if TYPE_CHECKING:
    from tui.access.base import SessionAccess
    from tui.protocol.web import SessionSummary

__all__ = ["Row", "as_json_text", "as_row", "as_tree", "open_access", "run_sessions"]


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


def as_json_text(rows: Sequence[Row | SessionSummary]) -> str:
    """``json.dumps([...], indent=2)`` of `rows` as dicts, byte for byte, each `Row` written from
    one template (Python's encoder with an indent is its pure-Python one: 10,000 rows cost it
    about 80 ms)."""
    if not rows:
        return "[]"
    items = []
    for r in rows:
        if type(r) is Row:
            updated = "null" if r.updated_at is None else _quote(_when(r.updated_at))
            items.append(
                _ROW_JSON
                % (
                    _quote(r.id),
                    _quote(r.title),
                    _quote(r.state),
                    "true" if r.live else "false",
                    _quote(r.folder),
                    _quote(_when(r.created_at)),
                    updated,
                    _quote(r.agent),
                    "null" if r.model is None else _quote(r.model),
                    "true" if r.archived else "false",
                    "null" if r.parent_id is None else _quote(r.parent_id),
                )
            )
        else:
            text = json.dumps(r.as_json() if isinstance(r, Row) else r.model_dump(mode="json"), indent=2)
            items.append("  " + text.replace("\n", "\n  "))
    return "[\n" + ",\n".join(items) + "\n]"


_ROW_JSON = (
    "  {\n"
    + ",\n".join(
        f'    "{key}": {value}'
        for key, value in (
            ("id", "%s"),
            ("title", "%s"),
            ("state", "%s"),
            ("live", "%s"),
            ("folder", "%s"),
            ("created_at", "%s"),
            ("updated_at", "%s"),
            ("agent", "%s"),
            ("model", "%s"),
            ("archived", "%s"),
            ("parent_id", "%s"),
            ("memory", "null"),
            ("idle_seconds", "null"),
            ("quiet_seconds", "null"),
            ("worker_version", "null"),
            ("outdated", "false"),
            ("idle_timeout", "null"),
            ("node", "null"),
        )
    )
    + "\n  }"
)
"""`Row.as_json` as ``json.dumps(..., indent=2)`` writes it as a list's item, its values to fill."""


def _when(moment: datetime) -> str:
    text = moment.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _created(text: str) -> datetime:
    """A record's ``created_at``; one written without a zone is UTC, as `SessionRecord` reads it."""
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def as_row(got: Folder) -> Row:
    """The `Row` of a stopped session as the summary (`tui.summary`) holds it."""
    _, archived, journal_time, sid, title, where, created, agent, model, parent = got[1].split(SEP)
    return Row(
        sid,
        title,
        where,
        _created(created),
        datetime.fromtimestamp(float(journal_time), UTC) if journal_time else None,
        agent,
        None if model == NONE else model,
        archived == "1",
        None if parent == NONE else parent,
        "archived" if archived == "1" else "stopped",
    )


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
    found = [g if isinstance(g, str) else as_row(g) for g in read(root, include_archived=args.all)]
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
        sys.stdout.write(as_json_text(rows) + "\n")
        return 0
    if not rows:
        hint = "" if args.all else f" (`{command('sessions', '--all')}` shows archived ones)"
        _say(f"no sessions yet{hint}; `{command('send', '--new', 'PROMPT')}` starts one")
        return 0
    table = [("ID", "TITLE", "STATE", "LIVE", "MEMORY", "IDLE", "AGE", "FOLDER")]
    now, home = datetime.now(UTC), os.path.expanduser("~")
    for depth, r in as_tree(list(rows)):
        # A child is drawn under its parent, its title indented: ``└ title``.
        title = _clip(r.title or "(untitled)", 40)
        if depth:
            title = "  " * (depth - 1) + "└ " + title
        if type(r) is Row:  # stopped: no worker to say more
            table.append((r.id[:8], title, r.state, "no", "-", "-", _age(r, now), _folder(r.folder, home)))
            continue
        live = "yes" if r.live else "no"
        if r.outdated:
            live = f"yes, old tui {r.worker_version}"
        if r.live and r.node:
            live += f", on {r.node}"
        table.append(
            (r.id[:8], title, r.state, live, _memory(r), _idle(r), _age(r, now), _folder(r.folder, home))
        )
    # Each cell padded to its column's width (``{:<N}`` pads as `str.ljust` does), the last one not.
    widths = [max(map(len, column)) for column in list(zip(*table, strict=True))[:-1]]
    line = "  ".join(f"{{:<{width}}}" for width in widths) + "  {}\n"
    sys.stdout.write("".join(line.format(*row) for row in table))
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
