"""Commands across machines: SSH remotes (``tui remote add NAME ssh://…``, ``tui relay``) and
``tui sessions --everywhere``."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from tui.access.base import SessionAccess, SessionSummary
from tui.errors import TuiError, UsageError
from tui.protocol.ids import short_id
from tui.store import StatePaths
from tui.store.remotes import Remote, add_remote, get_remote, list_remotes

__all__ = [
    "EVERYWHERE_TIMEOUT",
    "Machine",
    "add_ssh_remote",
    "ask_everywhere",
    "ordered",
    "pick",
    "refuse_ssh_share",
    "run_everywhere",
    "run_relay",
    "table_lines",
]

EVERYWHERE_TIMEOUT = 20.0
"""Seconds each machine gets to answer ``tui sessions --everywhere`` (an SSH connection included)."""
HERE = "here"


def _state(args: argparse.Namespace) -> StatePaths:
    return StatePaths.resolve(getattr(args, "state_dir", None))


# --- SSH remotes ---------------------------------------------------------------------------------
def run_relay(args: argparse.Namespace) -> int:
    """``tui relay``: what an SSH remote's connection runs on this machine (`tui.web.relay`)."""
    from tui.web.relay import relay

    return relay(_state(args))


def add_ssh_remote(state: StatePaths, args: argparse.Namespace) -> int:
    """``tui remote add NAME ssh://[USER@]HOST[:PORT] [--tui COMMAND]``: checked by connecting."""
    from tui.access.remote import RemoteAccess
    from tui.link.ssh import parse_ssh_url

    if args.token_file:
        raise UsageError(
            f"an ssh remote needs no token (ssh logs you in): `tui remote add {args.name} {args.url}`"
        )
    url = args.url.rstrip("/")
    parse_ssh_url(url)
    remote = Remote(args.name, url, "", args.tui or "")
    access = RemoteAccess(remote)

    async def check() -> dict[str, object]:
        try:
            return await access.web.check()
        finally:
            await access.web.close()

    info = asyncio.run(check())
    add_remote(state, remote)
    print(
        f"remote {args.name}: {url} over ssh, tui {info.get('version', '?')}, as its owner; "
        f"`tui --remote {args.name} sessions` lists its sessions"
    )
    return 0


def refuse_ssh_share(name: str, state: StatePaths) -> None:
    """Share links stay with ``tui web``: refuse ``tui --remote NAME share`` on an SSH remote.

    Raises:
        UsageError: `name` is an SSH remote.
    """
    try:
        remote = get_remote(state, name)
    except TuiError:
        return  # the share command says it
    if remote.kind == "ssh":
        raise UsageError(
            f"remote {name} is reached over ssh, as its owner only: share links and participants stay "
            f"with `tui web`; run `tui web --host ADDR --token-file F` on {name} and share from there"
        )


# --- tui sessions --everywhere -------------------------------------------------------------------
@dataclass
class Machine:
    """One machine's answer to ``--everywhere``."""

    where: str
    sessions: list[SessionSummary] = field(default_factory=list)
    error: str | None = None


_ORDER = {"asking": 0, "working": 1, "idle": 2, "stopped": 3, "archived": 4}


async def ask_everywhere(
    state: StatePaths, *, include_archived: bool = False, each: float = EVERYWHERE_TIMEOUT
) -> list[Machine]:
    """This machine's sessions and every remote's, asked at once, each within `each` seconds."""
    from tui.access.local import LocalAccess
    from tui.access.remote import RemoteAccess

    async def ask(where: str, remote: Remote | None) -> Machine:
        access: SessionAccess | None = None
        try:
            access = LocalAccess(state) if remote is None else RemoteAccess(remote)
            async with asyncio.timeout(each):
                rows = await access.list_sessions(include_archived=include_archived)
            return Machine(where, rows)
        except TimeoutError:
            return Machine(where, error=f"no answer within {each:g} s")
        except TuiError as exc:
            return Machine(where, error=str(exc))
        finally:
            if isinstance(access, RemoteAccess):
                await access.web.close()

    return list(await asyncio.gather(ask(HERE, None), *(ask(r.name, r) for r in list_remotes(state))))


Row = tuple[str, SessionSummary]
"""Where a session is (``here`` or a remote's name), and the session."""


def ordered(machines: list[Machine]) -> list[Row]:
    """Every machine's sessions: a waiting question first, then working ones, then the rest;
    newest first within a state."""
    return sorted(
        ((m.where, s) for m in machines for s in m.sessions),
        key=lambda row: (
            _ORDER.get(row[1].state, 9),
            -(row[1].updated_at or row[1].created_at).timestamp(),
        ),
    )


def table_lines(rows: list[Row], machines: list[Machine], *, numbered: bool = False) -> list[str]:
    """The table of ``--everywhere`` (numbered from 1 for the picker), then a row for each
    machine that did not answer."""
    from tui.commands.listing import _age, _clip, _folder

    table: list[tuple[str, ...]] = [("#", "WHERE", "ID", "TITLE", "STATE", "LIVE", "AGE", "FOLDER")]
    for n, (where, r) in enumerate(rows, 1):
        title = _clip(r.title or "(untitled)", 40)
        live = "yes" if r.live else "no"
        table.append((str(n), where, short_id(r.id), title, r.state, live, _age(r), _folder(r.folder)))
    if not numbered:
        table = [row[1:] for row in table]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    lines = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])) + "  " + row[-1] for row in table
    ]
    lead = 1 if numbered else 0
    for m in machines:
        if m.error is not None:
            cells = [""] * lead + [m.where.ljust(widths[lead]), "-".ljust(widths[lead + 1])]
            lines.append(
                "  ".join(c.ljust(widths[i]) for i, c in enumerate(cells)) + f"  no answer: {m.error}"
            )
    return lines


def run_everywhere(args: argparse.Namespace) -> int:
    """``tui sessions --everywhere [--json]``: every machine's sessions, a waiting question first."""
    if getattr(args, "remote", None):
        raise UsageError("--everywhere asks this machine and every remote; leave out --remote")
    machines = asyncio.run(ask_everywhere(_state(args), include_archived=args.all))
    rows = ordered(machines)
    if args.json:
        print(
            json.dumps(
                {
                    "sessions": [{"where": where, **s.model_dump(mode="json")} for where, s in rows],
                    "machines": [
                        {"where": m.where, "answered": m.error is None, "sessions": len(m.sessions)}
                        | ({"error": m.error} if m.error is not None else {})
                        for m in machines
                    ],
                },
                indent=2,
            )
        )
        return 0
    for line in table_lines(rows, machines):
        print(line)
    if not rows and all(m.error is None for m in machines):
        print("tui: no sessions on any machine; `tui send --new PROMPT` starts one here")
    return 0


# --- tui attach with no id -----------------------------------------------------------------------
def pick(
    args: argparse.Namespace, *, read: Callable[[str], str] = input, out: TextIO | None = None
) -> Row | None:
    """``tui attach`` with no id, in a terminal: the sessions of every machine, numbered; the one
    chosen (None: none, or there are none).

    Raises:
        UsageError: an answer that is not one of the numbers.
    """
    out = out or sys.stderr
    machines = asyncio.run(ask_everywhere(_state(args)))
    rows = ordered(machines)
    for line in table_lines(rows, machines, numbered=True):
        print(line, file=out)
    if not rows:
        print("tui: no sessions on any machine; `tui` starts one here", file=out, flush=True)
        return None
    try:
        answer = read(f"attach which? (1-{len(rows)}, Enter: 1, q: none) ").strip().lower()
    except EOFError:
        return None
    if answer in ("q", "quit", "n", "none"):
        return None
    if not answer:
        return rows[0]
    if not answer.isdigit() or not 1 <= int(answer) <= len(rows):
        raise UsageError(f"{answer!r} is not one of 1-{len(rows)}; `tui attach ID` attaches by id")
    return rows[int(answer) - 1]
