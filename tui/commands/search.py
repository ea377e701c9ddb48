"""``tui search TEXT``: find text in every session of this machine (or of another one with
``--remote NAME``, or of every one with ``--everywhere``), newest first, through the state dir's
search index (`tui.store.index`)."""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from tui.config import parse_duration
from tui.errors import TuiError, UsageError
from tui.protocol.ids import short_id
from tui.protocol.web import Found, FoundHit, SearchQuery
from tui.store import StatePaths
from tui.store.index import find_in
from tui.store.index_texts import WHERE
from tui.store.remotes import Remote, list_remotes

if TYPE_CHECKING:
    from tui.access.remote import RemoteAccess

__all__ = ["NO_HIT", "query_of", "run_search", "search_once"]

NO_HIT = 1
"""The exit code when nothing is found (as grep's)."""
HERE = "here"


def _state(args: argparse.Namespace) -> StatePaths:
    return StatePaths.resolve(getattr(args, "state_dir", None))


def _since(text: str) -> datetime:
    """``2h``, ``3d`` (that long ago) or an ISO date or time."""
    try:
        return datetime.now(UTC) - timedelta(seconds=parse_duration(text, unit=True))
    except ValueError:
        pass
    t = text.strip()
    if t.replace(".", "", 1).isdigit():  # `2`: seconds or days? the command line says which
        raise UsageError(f"--since {t} has no unit; write e.g. {t}h, {t}d or {t}w (units: s m h d w)")
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"--since {text}: give a duration (2h, 3d, 1w) or a date (2026-01-31, 2026-01-31T09:00)"
        ) from None
    return when if when.tzinfo is not None else when.astimezone()


def query_of(args: argparse.Namespace) -> SearchQuery:
    """The search the arguments ask for.

    Raises:
        UsageError: an ``--in`` that is no kind of text, a ``--since`` that is no time.
    """
    where: list[str] = []
    for given in args.within or []:
        for word in given.split(","):
            word = word.strip().lower()
            if word not in WHERE:
                raise UsageError(f"--in {word}: a text is in one of {', '.join(WHERE)}")
            where.append(word)
    if not 1 <= args.limit <= 500:
        raise UsageError(f"--limit {args.limit}: give 1 to 500 (--since WHEN narrows the search)")
    folder = None
    if args.dir:
        import os

        folder = os.path.abspath(os.path.expanduser(args.dir))
    return SearchQuery(
        q=" ".join(args.text),
        where=where or None,
        folder=folder,
        agent=args.agent,
        since=_since(args.since) if args.since else None,
        active=args.active,
        limit=args.limit,
    )


@dataclass
class _Machine:
    where: str
    found: Found = field(default_factory=Found)
    error: str | None = None


async def _ask(
    where: str, asking: Awaitable[Found], each: float | None, remote: RemoteAccess | None
) -> _Machine:
    try:
        async with asyncio.timeout(each):
            return _Machine(where, await asking)
    except TimeoutError:
        return _Machine(where, error=f"no answer within {each:g} s")
    except TuiError as exc:
        return _Machine(where, error=str(exc))
    finally:
        if remote is not None:
            await remote.web.close()


async def _search(args: argparse.Namespace, query: SearchQuery) -> list[_Machine]:
    # This machine's search is asked of its index straight away: neither the access layer nor
    # httpx is imported unless a remote is asked too.
    state = _state(args)
    if args.remote and not args.everywhere:
        from tui.access.remote import open_access

        access = open_access(args.remote, getattr(args, "state_dir", None))
        try:
            return [_Machine(args.remote, await access.search(query))]
        finally:
            await access.web.close()
    remotes: list[Remote] = list_remotes(state) if args.everywhere else []
    here = asyncio.to_thread(find_in, state, query, _progress_line())
    if not remotes:
        return [_Machine(HERE, await here)]
    from tui.access.remote import RemoteAccess
    from tui.commands.machines import EVERYWHERE_TIMEOUT

    asked = [_ask(HERE, here, None, None)]
    for remote in remotes:
        access = RemoteAccess(remote)
        asked.append(_ask(remote.name, access.search(query), EVERYWHERE_TIMEOUT, access))
    return list(await asyncio.gather(*asked))


async def search_once(args: argparse.Namespace, query: SearchQuery) -> Found:
    """`query` asked of the machine the arguments name (this one, or ``--remote NAME``), on the
    caller's loop: the app's search across sessions."""
    from tui.access.remote import RemoteAccess
    from tui.commands.sessions import open_access

    access = open_access(args)
    try:
        return await access.search(query)
    finally:
        if isinstance(access, RemoteAccess):
            await access.web.close()


def _progress_line() -> Callable[[int, int], None] | None:
    """A progress line on stderr while the index is (re)built, when stderr is a terminal."""
    if not sys.stderr.isatty():
        return None
    shown = [0.0]

    def progress(done: int, total: int) -> None:
        import time

        now = time.monotonic()
        if done < total and now - shown[0] < 0.2:
            return
        shown[0] = now
        end = "\n" if done >= total else ""
        print(
            f"\rtui: indexing the sessions for search: {done / 1e6:,.0f} of {total / 1e6:,.0f} MB",
            end=end,
            file=sys.stderr,
            flush=True,
        )

    return progress


def _when(at: datetime) -> str:
    return at.astimezone().strftime("%Y-%m-%d %H:%M")


def _place(hit: FoundHit) -> str:
    return f"{hit.where} {hit.name}" if hit.name and hit.where in ("tool", "error") else hit.where


def _marked(hit: FoundHit, color: bool) -> str:
    a, b = hit.match[0], hit.match[1]
    before, after = ("\x1b[1;7m", "\x1b[0m") if color else ("«", "»")
    return hit.snippet[:a] + before + hit.snippet[a:b] + after + hit.snippet[b:]


def run_search(args: argparse.Namespace) -> int:
    """``tui search TEXT [--json] [--in KIND] [--dir D] [--agent A] [--since WHEN] [--active]``."""
    if args.everywhere and args.remote:
        raise UsageError("--everywhere asks this machine and every remote; leave out --remote")
    query = query_of(args)
    machines = asyncio.run(_search(args, query))
    rows = sorted(
        ((m.where, h) for m in machines for h in m.found.hits), key=lambda row: row[1].at, reverse=True
    )[: query.limit]
    more = any(m.found.next is not None for m in machines)
    if args.json:
        print(
            json.dumps(
                {
                    "hits": [{"machine": where, **h.model_dump(mode="json")} for where, h in rows],
                    "more": more,
                    "machines": [
                        {"where": m.where, "answered": m.error is None, "hits": len(m.found.hits)}
                        | ({"error": m.error} if m.error is not None else {})
                        for m in machines
                    ],
                },
                indent=2,
            )
        )
        return 0 if rows else NO_HIT
    color = sys.stdout.isatty()
    from tui.commands.listing import _clip, _folder

    several = len(machines) > 1 or args.remote
    for where, h in rows:
        machine = f"{where}  " if several else ""
        archived = "  (archived)" if h.archived else ""
        title = _clip(h.title or "(untitled)", 40)
        print(
            f"{machine}{short_id(h.session_id)}  turn {h.turn}  {_when(h.at)}  {_place(h)}  "
            f"{title}  {_folder(h.folder)}  {h.agent}{archived}"
        )
        print(f"    {_marked(h, color)}")
    for m in machines:
        if m.error is not None:
            print(f"tui: {m.where}: no answer: {m.error}", file=sys.stderr)
    if not rows:
        print(f"tui: no session holds {query.q!r}", file=sys.stderr)
        return NO_HIT
    remote = f"--remote {rows[0][0]} " if several and rows[0][0] != HERE else ""
    find = shlex.quote(query.q)
    if more:
        print(
            f"tui: more hits than these {len(rows)}; --limit N shows more, --since WHEN fewer",
            file=sys.stderr,
        )
    print(
        f"tui: `tui {remote}attach {short_id(rows[0][1].session_id)} --turn {rows[0][1].turn} --find {find}` "
        "opens the first there",
        file=sys.stderr,
    )
    return 0
