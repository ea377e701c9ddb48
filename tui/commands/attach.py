"""Commands: ``tui [PROMPT]`` and ``tui attach ID``.

With a terminal on stdin they run the full-screen app; with anything else (a pipe, a file) the
piped surface (`tui.piped`) runs the same session without it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import TYPE_CHECKING

from tui.errors import UsageError
from tui.places import saved_theme

if TYPE_CHECKING:
    from tui.access.base import SessionAccess
    from tui.link.base import AttachLink
    from tui.protocol.web import Found, SearchQuery


def run_new(args: argparse.Namespace) -> int:
    """``tui [PROMPT]``: a new session in the current folder (or ``--dir``), attached."""
    if not sys.stdin.isatty():
        from tui import piped
        from tui.commands.limits import budget_of
        from tui.commands.sessions import open_access

        args.budget = budget_of(args)
        first = getattr(args, "prompt", None)
        agent, model = getattr(args, "agent", None), getattr(args, "model", None)
        if (agent or model) and not getattr(args, "remote", None):
            # An agent this machine cannot run is said first (not that stdin was empty).
            from tui.config import load_config
            from tui.worker.agents import check_agent

            check_agent(agent or ("model" if model else "python"), load_config(), model)
        stdin = sys.stdin if first is not None else piped.with_input(sys.stdin)
        if stdin is None:
            print(
                "tui: stdin was empty, so no session was made; `tui < script.py` runs a script "
                "in a new session, `tui 'PROMPT'` starts one with a first turn",
                file=sys.stderr,
            )
            return 0
        return piped.run(open_access(args), args, first_prompt=first, stdin=stdin)
    return _attach(args, prefix=None, first_prompt=getattr(args, "prompt", None))[0]


def run_attach(args: argparse.Namespace) -> int:
    """``tui attach ID``: attach to a session, starting its worker when none runs."""
    if args.id is None:
        if not sys.stdin.isatty():
            raise UsageError("`tui attach` without a terminal needs an id: `tui attach ID < script`")
        from tui.commands.machines import HERE, pick

        if getattr(args, "remote", None):
            raise UsageError(
                f"`tui --remote {args.remote} attach` needs an id; without one it picks from every machine"
            )
        chosen = pick(args)
        if chosen is None:
            return 0
        where, summary = chosen
        args.remote = None if where == HERE else where
        args.id = summary.id
    if not sys.stdin.isatty():
        from tui import piped
        from tui.commands.sessions import open_access

        if getattr(args, "turn", None) is not None:
            raise UsageError(
                "--turn opens the app on a turn: it needs a terminal (`tui transcript ID` prints it all)"
            )
        return piped.run(open_access(args), args, session_id=args.id)
    if getattr(args, "find", None) and getattr(args, "turn", None) is None:
        raise UsageError(
            "--find goes with --turn N: `tui attach ID --turn N --find TEXT` (Ctrl+F finds in the app)"
        )
    if getattr(args, "turn", None) is not None and args.turn < 1:
        raise UsageError(f"--turn {args.turn}: turns are numbered from 1, as `tui search` prints them")
    open_at = None if getattr(args, "turn", None) is None else (args.turn, getattr(args, "find", None) or "")
    while True:
        code, elsewhere = _attach(args, prefix=args.id, first_prompt=None, open_at=open_at)
        if elsewhere is None:
            return code
        # A hit of another session was chosen in the app's search: attach there, on its turn.
        args.id, number, text = elsewhere
        open_at = (number, text)


def _attach(
    args: argparse.Namespace,
    *,
    prefix: str | None,
    first_prompt: str | None,
    open_at: tuple[int, str] | None = None,
) -> tuple[int, tuple[str, int, str] | None]:
    """Run the app on one session; its exit code, and the hit of another session chosen in its
    search across sessions, to attach next (None: none).

    The app draws its first screen before anything else is imported: the session is reached
    (`reach`: the store, the link, httpx, the wire models) in a thread once that screen shows."""
    from tui.ui import Reached, TuiApp

    folder = os.path.abspath(getattr(args, "dir", None) or os.getcwd())

    def reach() -> Reached:
        from tui.commands.limits import budget_of
        from tui.commands.sessions import open_access
        from tui.config import load_config
        from tui.errors import TuiError
        from tui.link.local import local_client_id
        from tui.store import StatePaths

        access = open_access(args)

        async def connect() -> tuple[AttachLink, str]:
            if prefix is None:
                session_id = await access.create(
                    working_directory=folder,
                    agent=getattr(args, "agent", None),
                    model=getattr(args, "model", None),
                    budget=budget_of(args),
                )
                where = folder
            else:
                session_id = await access.resolve(prefix)
                where = await _folder(access, session_id)
            # The link wakes the session's worker (starting one when none runs).
            link = await access.link(session_id, client_id=local_client_id())
            import tui.link.client  # noqa: F401 - httpx, here rather than on the app's loop after mount

            return link, where

        link, where = asyncio.run(connect())
        try:
            alerts = load_config().notify.terminal
        except TuiError:
            alerts = "auto"  # a broken config.toml is said by the commands that read the rest of it
        return Reached(link, where, StatePaths.resolve(args.state_dir).root, alerts)

    app = TuiApp(
        reach=reach,
        reaching=f"reaching session {prefix}" if prefix is not None else f"starting a session in {folder}",
        first_prompt=first_prompt,
        theme=saved_theme(),
        keep_theme=_keep_theme,
        search=lambda query: _search_once(args, query),
        open_at=open_at,
    )
    app.run()
    if app.failure is not None:
        raise app.failure
    code = app.return_code or 0
    if not app.reached:
        print(
            "tui: left before the session was reached; `tui sessions` lists it if it was made.",
            file=sys.stderr,
        )
        return code, None
    from tui.protocol.ids import short_id

    short = short_id(app.link.session_id)
    link = app.link
    if code == 0 and app.next_open is not None:
        print(f"tui: detached from {short}; it keeps running.", file=sys.stderr)
        return code, app.next_open
    if code == 0 and app.session.stopped is None:
        hint = f"`{link.command('attach', short)}` comes back"
        print(f"tui: detached from {short}; it keeps running. {hint}.", file=sys.stderr)
    elif app.session.stopped == "stopped":
        print(
            f"tui: stopped session {short}: what it held in memory (its programs' variables) is gone; "
            f"`{link.command('attach', short)}` resumes it with the same transcript and a fresh worker.",
            file=sys.stderr,
        )
    elif app.session.stopped == "deleted":
        print(f"tui: deleted session {short}.", file=sys.stderr)
    return code, None


def _keep_theme(chosen: str) -> object:
    """Keeps the theme chosen in the app for the next attach (``config.toml``)."""
    from tui.config import save_setting

    return save_setting("theme", chosen)


async def _folder(access: SessionAccess, session_id: str) -> str:
    """The session's folder: from its record on this machine, else from the sessions' list."""
    from tui.access.local import LocalAccess

    if isinstance(access, LocalAccess):
        from tui.store import get_session

        return get_session(access.state, session_id).working_directory
    return (await access.show(session_id)).folder


async def _search_once(args: argparse.Namespace, query: SearchQuery) -> Found:
    """The app's search across sessions; `tui.commands.search` (the index, SQLite) is imported
    at the first search, not before the first frame."""
    from tui.commands.search import search_once

    return await search_once(args, query)
