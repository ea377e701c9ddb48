"""Commands: note, context, restart, unarchive (cli.md): what a session is told besides its
prompts, and moving it onto the tui installed.

Each runs its async body with `asyncio.run`, at the command boundary, as `tui.commands.sessions`
does; errors are `TuiError`s that `tui.cli` prints and turns into exit codes.
"""

from __future__ import annotations

import argparse
import json
import sys

from tui.access.base import SessionSummary, restart_loses
from tui.commands.limits import limits_asked
from tui.commands.sessions import _run, _say, open_access
from tui.errors import Busy, UsageError
from tui.link.local import local_client_id
from tui.protocol.ids import short_id

__all__ = ["run_budget", "run_context", "run_note", "run_restart", "run_unarchive"]


def run_note(args: argparse.Namespace) -> int:
    """``tui note ID TEXT [--source NAME] [--now]``: a note the agent is given with its next turn."""
    from tui.protocol.messages import MAX_NOTE, NoteRequest

    text = " ".join(args.text).strip()
    if text == "-":
        text = sys.stdin.read().strip()
    if not text:
        raise UsageError("a note needs text: `tui note ID 'the build is green'` (or `-` to read stdin)")
    if len(text) > MAX_NOTE:
        raise UsageError(f"a note is at most {MAX_NOTE:,} characters; this one has {len(text):,}")
    access = open_access(args)

    async def body() -> int:
        sid = await access.resolve(args.id)
        short = short_id(sid)
        request = NoteRequest(
            text=text, source=args.source or "", now=args.now, client_id=local_client_id("note")
        )
        noted = await access.note(sid, request)
        if noted.turn_id is not None:
            _say(f"note left; it started turn {noted.turn_id} of session {short}")
        elif args.now:
            _say(f"note left; session {short} is busy, so its next turn reads it")
        else:
            _say(f"note left; session {short} reads it with its next turn (`--now` starts one)")
        return 0

    return _run(body)


_OPTIONS = (("cost", "cost"), ("tokens", "tokens"), ("wall time", "time"), ("turns", "turns"))
"""The word of a reached limit and its option."""


def run_budget(args: argparse.Namespace) -> int:
    """``tui budget ID [--cost USD] [--tokens N] [--turns N] [--time DURATION]``: show or change
    a session's limits (0 takes one away)."""
    from tui.protocol import BudgetRequest
    from tui.worker.budget import describe, money, span

    asked = limits_asked(args)
    access = open_access(args)

    async def body() -> int:
        sid = await access.resolve(args.id)
        short = short_id(sid)
        request = BudgetRequest.model_validate(asked) if asked else None
        view = await access.budget(sid, request)
        limits = view.budget
        rows = (
            ("cost", money(view.cost), None if limits.cost is None else money(limits.cost)),
            ("tokens", f"{view.tokens:,}", None if limits.tokens is None else f"{limits.tokens:,}"),
            ("turns", str(view.turns), None if limits.turns is None else str(limits.turns)),
            ("time", span(view.time), None if limits.time is None else span(limits.time)),
        )
        if request is not None:
            _say(f"session {short}'s budget is now {describe(limits)}")
        print("LIMIT\tSPENT\tOF")
        for name, spent, of in rows:
            print(f"{name}\t{spent}\t{of or '-'}")
        if view.reached is not None:
            said = view.reached
            option = next((o for w, o in _OPTIONS if w in said), "time")
            raising = access.command("budget", short, f"--{option}", "MORE")
            _say(f"session {short} reached its budget ({said}): new turns are refused until `{raising}`")
        return 0

    return _run(body)


def _seconds_old(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


def run_context(args: argparse.Namespace) -> int:
    """``tui context add|list|remove|push ID …``: the sources whose values the agent is given."""
    from tui.protocol.messages import MAX_EVERY, MAX_PUSH, ContextAddRequest

    if args.action == "add" and args.every is not None and not 1 <= args.every <= MAX_EVERY:
        # Refused here, before anything is asked: a usage error, not the worker's refusal.
        raise UsageError(
            f"--every: how often the source is read, 1 to {MAX_EVERY:,} seconds, not {args.every:g}; "
            "e.g. --every 60"
        )
    access = open_access(args)
    action = args.action

    async def body() -> int:
        sid = await access.resolve(args.id)
        short = short_id(sid)
        if action == "list":
            listed = await access.context_list(sid)
            if not listed.sources:
                adding = access.command("context", "add", short, "NAME", "--cmd", "CMD", "--every", "S")
                _say(f"session {short} has no context sources; `{adding}` adds one")
                return 0
            print("NAME\tKIND\tAGE\tSIZE\tWHAT")
            for entry in listed.sources:
                age = "-" if entry.at is None else _seconds_old((listed.now - entry.at).total_seconds())
                what = entry.cmd or entry.path or "pushed"
                every = f" every {entry.every:g} s" if entry.every else ""
                failed = " (failed)" if entry.error else ""
                print(f"{entry.name}\t{entry.kind}\t{age}\t{entry.size}\t{what}{every}{failed}")
            return 0
        if action == "add":
            if sum(bool(x) for x in (args.cmd, args.file, args.push)) != 1:
                example = access.command(
                    "context", "add", short, "ci", "--cmd", "'gh run list -L 1'", "--every", "60"
                )
                raise UsageError(f"give one of --cmd CMD --every SECONDS, --file PATH or --push: `{example}`")
            if args.cmd and args.every is None:
                raise UsageError("--cmd needs --every SECONDS: how often it runs (at most once a second)")
            request = ContextAddRequest(
                name=args.name,
                cmd=args.cmd or "",
                path=args.file or "",
                push=args.push,
                every=args.every or 0.0,
                why=args.why or "",
            )
            await access.context_add(sid, request)
            _say(
                f"context source {args.name} added to session {short}; the agent reads it from its next turn"
            )
            return 0
        if action == "remove":
            await access.context_remove(sid, args.name)
            _say(f"context source {args.name} removed from session {short}")
            return 0
        value = sys.stdin.read()
        size = len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogateescape"))
        if size > MAX_PUSH:
            raise UsageError(
                f"a pushed value is at most {MAX_PUSH:,} bytes as JSON; this one has {size:,}: push its last "
                f"part (`tail -c {MAX_PUSH // 1024}K FILE | tui context push {short} {args.name}`), "
                f"or make the source a file (`tui context add {short} {args.name} --file PATH`)"
            )
        await access.context_push(sid, args.name, value)
        _say(f"context source {args.name} of session {short} is now {len(value):,} characters")
        return 0

    return _run(body)


def run_restart(args: argparse.Namespace) -> int:
    """``tui restart ID`` / ``tui restart --outdated``: move sessions to a new worker running the
    tui installed; followers go on with the new worker."""
    from tui import __version__

    if bool(args.id) == bool(args.outdated):
        raise UsageError("give a session or --outdated: `tui restart ID` or `tui restart --outdated`")
    access = open_access(args)

    async def one(row: SessionSummary, *, ahead: bool = True) -> None:
        short = short_id(row.id)
        loses = restart_loses(row.agent)
        if row.live and ahead:
            _say(f"restarting session {short} onto tui {__version__}: {loses} will be lost")
        await access.restart(row.id)
        after = await access.show(row.id)
        if row.live:
            _say(
                f"session {short} runs tui {after.worker_version or __version__} in a new worker; "
                f"{loses} are gone"
            )
        else:
            _say(
                f"session {short} had no worker; one running tui "
                f"{after.worker_version or __version__} is started"
            )

    async def outdated() -> int:
        rows = [row for row in await access.list_sessions(include_archived=True) if row.outdated]
        busy = 0
        for row in rows:
            try:
                await one(row, ahead=False)
            except Busy:  # a turn runs or a question waits: the access layer refuses the restart
                busy += 1
        if not rows:
            _say(f"every live worker runs tui {__version__}, the one installed")
        elif busy:
            _say(
                f"{busy} outdated worker{'s' if busy != 1 else ''} left alone: "
                "a turn runs or a question waits"
            )
        return 0

    async def body() -> int:
        sid = await access.resolve(args.id)
        await one(await access.show(sid))
        return 0

    return _run(outdated if args.outdated else body)


def run_unarchive(args: argparse.Namespace) -> int:
    """``tui unarchive ID``: list an archived session again."""
    access = open_access(args)

    async def body() -> int:
        sid = await access.resolve(args.id)
        await access.unarchive(sid)
        short = short_id(sid)
        _say(f"session {short} is listed again; `{access.command('attach', short)}` resumes it")
        return 0

    return _run(body)
