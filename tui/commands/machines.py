"""Commands across machines: SSH remotes (``tui remote add NAME ssh://…``, ``tui relay``) and
``tui sessions --everywhere``."""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import dataclass, field

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
    "refuse_ssh_share",
    "run_everywhere",
    "run_relay",
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


def run_everywhere(args: argparse.Namespace) -> int:
    """``tui sessions --everywhere [--json]``: every machine's sessions, a waiting question first."""
    from tui.commands.sessions import _age, _clip, _folder

    if getattr(args, "remote", None):
        raise UsageError("--everywhere asks this machine and every remote; leave out --remote")
    machines = asyncio.run(ask_everywhere(_state(args), include_archived=args.all))
    rows = sorted(
        ((m.where, s) for m in machines for s in m.sessions),
        key=lambda row: (
            _ORDER.get(row[1].state, 9),
            -(row[1].updated_at or row[1].created_at).timestamp(),
        ),
    )
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
    table = [("WHERE", "ID", "TITLE", "STATE", "LIVE", "AGE", "FOLDER")]
    for where, r in rows:
        title = _clip(r.title or "(untitled)", 40)
        table.append(
            (where, short_id(r.id), title, r.state, "yes" if r.live else "no", _age(r), _folder(r.folder))
        )
    failed = [m for m in machines if m.error is not None]
    widths = [max(len(row[i]) for row in table) for i in range(6)]
    for row in table:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:6])) + "  " + row[6])
    for m in failed:
        print(f"{m.where.ljust(widths[0])}  {'-'.ljust(widths[1])}  no answer: {m.error}")
    if len(table) == 1 and not failed:
        print("tui: no sessions on any machine; `tui send --new PROMPT` starts one here")
    return 0
