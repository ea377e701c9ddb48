"""Commands: sessions, send, answer, dismiss, stop, archive, delete (cli.md).

Each runs its async body with `asyncio.run` here, at the command boundary; errors are `TuiError`s
that `tui.cli` prints and turns into exit codes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import IO, TYPE_CHECKING, Any, TypeVar

from tui.access.base import SessionAccess
from tui.commands.listing import _memory, _span, open_access
from tui.errors import QuestionNotPending, TuiError, UsageError
from tui.link.base import AttachLink
from tui.link.local import local_client_id
from tui.protocol import Event, PendingQuestion
from tui.protocol.ids import short_id
from tui.redact import PieceRedactor

if TYPE_CHECKING:
    # Imported where used: `tui attach` opens the app through this module (`open_access`) and
    # its first frame needs neither the piped surface nor a watch of turns.
    from tui.link.watch import SessionWatch, TurnResult
    from tui.protocol import Budget

__all__ = [
    "open_access",
    "run_answer",
    "run_archive",
    "run_delete",
    "run_dismiss",
    "run_interrupt",
    "run_send",
    "run_stop",
]

T = TypeVar("T")


def _run(body: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await body()

    return asyncio.run(main())


def _say(text: str, err: IO[str] | None = None) -> None:
    print(f"tui: {text}", file=err or sys.stderr, flush=True)


def run_models(args: argparse.Namespace) -> int:
    """``tui models``: the ``[models]`` profiles of config.toml and whether each has its key."""
    from tui.config import PROVIDERS, load_config

    config = load_config()
    rows = []
    for name, profile in sorted(config.models.items()):
        missing = profile.missing_key(name)
        variable = profile.key_variable
        rows.append(
            {
                "name": name,
                "provider": profile.provider,
                "model": profile.model,
                "base_url": profile.base_url,
                "key": variable,
                "ready": missing is None,
                "default": name == config.default_model,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    where = config.path or "config.toml"
    if not rows:
        _say(
            f"no [models] profiles in {where}; name one with --model PROVIDER:MODEL "
            f"(providers: {', '.join(PROVIDERS)}) or see docs/agents.md"
        )
        return 0
    table = [("NAME", "MODEL", "KEY")]
    for row in rows:
        if row["key"] is None:
            key = "none needed"
        else:
            key = f"{row['key']} set" if row["ready"] else f"{row['key']} NOT SET"
        mark = " (default)" if row["default"] else ""
        table.append((f"{row['name']}{mark}", f"{row['provider']}:{row['model']}", key))
    widths = [max(len(r[i]) for r in table) for i in range(2)]
    for r in table:
        print(f"{r[0].ljust(widths[0])}  {r[1].ljust(widths[1])}  {r[2]}")
    return 0


def run_agents(args: argparse.Namespace) -> int:
    """``tui agents``: the ACP coding agents (built in and ``[agents]`` tables), whether each one's
    command is found on ``PATH``, and the line that installs it when it is not."""
    import shutil

    from tui.config import load_config

    config = load_config()
    rows: list[dict[str, Any]] = []
    for name, profile in sorted(config.agents.items()):
        search = profile.env.get("PATH", os.environ.get("PATH", os.defpath))
        found = shutil.which(profile.command[0], path=search)
        rows.append(
            {
                "name": name,
                "command": profile.command,
                "builtin": profile.builtin,
                "found": found,
                "install": profile.install,
                "default": name == config.default_agent,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = [("NAME", "COMMAND", "INSTALLED")]
    for row in rows:
        mark = " (default)" if row["default"] else ""
        if row["found"]:
            state = f"found: {row['found']}"
        elif row["install"]:
            state = f"not installed: {row['install']}"
        else:
            state = "NOT FOUND on PATH: fix its command in config.toml"
        table.append((f"{row['name']}{mark}", " ".join(row["command"]), state))
    widths = [max(len(r[i]) for r in table) for i in range(2)]
    for r in table:
        print(f"{r[0].ljust(widths[0])}  {r[1].ljust(widths[1])}  {r[2]}".rstrip())
    where = config.path or "config.toml"
    _say(f"`tui --agent NAME` starts a session of one; [agents.NAME] in {where} adds or changes one")
    return 0


# --- send ----------------------------------------------------------------------------------------
def _abspath(folder: str | None) -> str:
    return os.path.abspath(folder or os.getcwd())


def _parse_send(args: argparse.Namespace) -> tuple[str | None, str]:
    words: list[str] = list(args.args)
    if args.new:
        if not words:
            raise UsageError("`tui send --new PROMPT` needs a prompt")
        return None, " ".join(words)
    if args.dir:
        raise UsageError("--dir goes with --new: `tui send --new --dir D PROMPT`")
    if getattr(args, "parent", None):
        raise UsageError("--parent goes with --new: `tui send --new --parent ID PROMPT`")
    if len(words) < 2:
        raise UsageError("`tui send ID PROMPT` needs a session id and a prompt (or `tui send --new PROMPT`)")
    return words[0], " ".join(words[1:])


def run_send(args: argparse.Namespace) -> int:
    """``tui send``: deliver a turn without a TUI; with ``--wait``, print its reply."""
    target, prompt = _parse_send(args)
    access = open_access(args)
    return _run(lambda: send(access, target, prompt, args))


async def send(
    access: SessionAccess,
    target: str | None,
    prompt: str,
    args: argparse.Namespace,
    *,
    out: IO[bytes] | None = None,
    err: IO[str] | None = None,
) -> int:
    """The body of ``tui send`` (see `run_send`)."""
    from tui.link.outcomes import FAILED, turn_ending
    from tui.link.watch import SessionWatch, Unanswered, describe_question
    from tui.piped import ReplyWriter
    from tui.protocol.python import syntax_error

    out = out or sys.stdout.buffer
    err = err or sys.stderr
    sent = False
    link: AttachLink | None = None
    watch: SessionWatch | None = None
    parent: str | None = None
    if target is None and args.wait and _new_runs_python(args) and (why := syntax_error(prompt)) is not None:
        _say(f"the prompt is not valid Python: {why}; no session was made", err)
        return FAILED
    try:
        async with asyncio.timeout(args.timeout):
            if target is None:
                parent = getattr(args, "parent", None)
                parent = None if parent is None else await _parent(access, parent)
                # A child works in its parent's folder unless --dir says otherwise.
                folder = (await access.show(parent)).folder if parent and not args.dir else _abspath(args.dir)
                sid = await access.create(
                    working_directory=folder,
                    agent=getattr(args, "agent", None),
                    model=getattr(args, "model", None),
                    parent_id=parent,
                    budget=_budget_of(args),
                )
                print(sid, file=err, flush=True)
            else:
                sid = await access.resolve(target)
            link = await access.link(sid, client_id=local_client_id("send"))
            watch = await SessionWatch.open(link)
            printer = ReplyWriter(lambda: watch.own_turns if watch else set(), out)
            watch.on_event = printer
            if watch.question is not None:
                # A token that may not send learns that first, not how to answer a question it cannot.
                (await link.whoami()).check("write", sid)
                raise Unanswered(describe_question(link, watch.question), watch.question)
            info = await link.info()
            if args.wait and info.prompt_syntax == "python" and (why := syntax_error(prompt)) is not None:
                _say(f"the prompt is not valid Python: {why}; it was not sent", err)
                return FAILED
            if not args.queue:
                await watch.wait_idle()
            rid = await watch.send(prompt, queue=args.queue)
            sent = True
            if target is None and parent is not None:
                await _tell_parent(access, parent, sid, prompt, watch.by_request.get(rid), err)
            short = short_id(sid)
            if not args.wait:
                how = "queued for" if args.queue else "sent to"
                _say(f"{how} session {short}; `{link.command('attach', short)}` to watch", err)
                return 0
            result = await _wait_turn_or_child(access, watch, rid, printer)
            printer.finish(result)
            ending = turn_ending(result, info.reply_format, attach=link.command("attach", short))
            if ending.code or result.stop_reason:  # a reply cut short says so, though it completed
                _say(ending.line, err)
            return ending.code
    except TimeoutError:
        where = (
            f"`{link.command('attach', short_id(link.session_id))}` to watch"
            if link
            else "nothing was started"
        )
        left = "the turn keeps running" if sent else "nothing was sent"
        _say(f"timed out after {args.timeout:g} s; {left}; {where}", err)
        return 1
    finally:
        if watch is not None:
            await watch.close()
        if link is not None:
            await link.close()


def _new_runs_python(args: argparse.Namespace) -> bool:
    """Whether ``tui send --new`` makes a python session here (``--agent``, else config.toml's
    ``default_agent``); another machine's default is its own, known once the session is made."""
    from tui.config import load_config

    if getattr(args, "remote", None):
        return getattr(args, "agent", None) == "python"
    agent = getattr(args, "agent", None) or ("model" if getattr(args, "model", None) else None)
    return (agent or load_config().default_agent) == "python"


async def _parent(access: SessionAccess, given: str) -> str:
    """The full id of ``--parent``'s session, one that may take a new child.

    Raises:
        NotFound: no such session (the sentence names `tui sessions --all`).
        Conflict: it is archived.
    """
    from tui.errors import Conflict

    parent = await access.resolve(given)
    if (await access.show(parent)).archived:
        short = short_id(parent)
        raise Conflict(
            f"session {short} is archived, so it takes no new child; "
            f"`{access.command('unarchive', short)}` lists it again, or leave out --parent"
        )
    return parent


async def _tell_parent(
    access: SessionAccess, parent: str, child: str, prompt: str, turn_id: str | None, err: IO[str]
) -> None:
    """Have the parent's worker (started if none runs) follow the child made for it, as it follows
    one it delegated to: its clients then show the child's start, question and end."""
    from tui.protocol import ChildAdoptRequest

    try:
        await access.adopt_child(parent, ChildAdoptRequest(child_id=child, prompt=prompt, turn_id=turn_id))
    except TuiError as exc:
        _say(
            f"session {short_id(parent)} does not follow its child {short_id(child)} ({exc.detail}); "
            f"the child runs on its own: `{access.command('attach', short_id(child))}`",
            err,
        )


async def _wait_turn_or_child(
    access: SessionAccess, watch: SessionWatch, rid: str, printer: Callable[[Event], None]
) -> TurnResult:
    """`SessionWatch.wait_turn`, ended by a child's question as by the session's own.

    Raises:
        Unanswered: a child of the session waits for an answer (its commands to answer it).
    """
    asked = asyncio.Event()

    def look() -> None:
        # A question the parent's own model is answering is not one for this command.
        if any(c.question is not None and not c.answering for c in watch.session.child_sessions.values()):
            asked.set()

    def on_event(event: Event) -> None:
        printer(event)
        look()

    watch.on_event = on_event
    look()  # a child may be asking already
    waiting = asyncio.ensure_future(watch.wait_turn(rid))
    asking = asyncio.ensure_future(asked.wait())
    try:
        await asyncio.wait({waiting, asking}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        asking.cancel()
        if not waiting.done():
            waiting.cancel()
            with contextlib.suppress(BaseException):
                await waiting
    if waiting.done() and not waiting.cancelled():
        return waiting.result()
    from tui.link.watch import Unanswered, describe_question

    child = next(
        c for c in watch.session.child_sessions.values() if c.question is not None and not c.answering
    )
    assert child.question is not None
    question = PendingQuestion.model_validate(child.question.model_dump())
    link = await access.link(child.child_id, client_id=local_client_id("send"))
    try:
        with contextlib.suppress(TuiError):
            await link.whoami()
        told = describe_question(link, question)
    finally:
        await link.close()
    parent = short_id(watch.link.session_id)
    raise Unanswered(f"session {parent} waits for its child {short_id(child.child_id)}:\n{told}", question)


# --- questions -----------------------------------------------------------------------------------
def _on_question(
    args: argparse.Namespace, act: Callable[[AttachLink, PendingQuestion], Awaitable[str]]
) -> int:
    """Run `act` on the session's pending question and say what it did (``answer``, ``dismiss``).

    Raises:
        QuestionNotPending: the session has no live worker, or no question waits.
    """
    access = open_access(args)

    async def body() -> int:
        sid = await access.resolve(args.id)
        short = short_id(sid)
        if not (await access.show(sid)).live:
            raise QuestionNotPending(
                f"session {short} has no live worker, so no question is waiting; "
                f"`{access.command('attach', short)}` resumes it"
            )
        link = await access.link(sid, client_id=local_client_id(args.command))
        try:
            now = await link.transcript(limit=0)
            question = now.question
            # No question of its own: a child's is answered from here (its worker forwards it).
            asking = [c.question for c in now.children if c.question is not None]
            if question is None and asking:
                question = PendingQuestion.model_validate(asking[0].model_dump())
            if question is None:
                raise QuestionNotPending(
                    f"session {short} has no pending question; `{link.command('attach', short)}` to look"
                )
            _say(await act(link, question))
            return 0
        finally:
            await link.close()

    return _run(body)


def run_answer(args: argparse.Namespace) -> int:
    """``tui answer ID --option N --text T``: answer the pending question."""

    from tui.link.watch import describe_question

    async def answer(link: AttachLink, question: PendingQuestion) -> str:
        if not args.option and args.text is None:
            raise UsageError("give --option N and/or --text T:\n" + describe_question(link, question))
        labels = [o.label for o in question.options]
        selected: list[str] = []
        for n in args.option:
            if not 1 <= n <= len(labels):
                raise UsageError(f"there is no option {n}:\n" + describe_question(link, question))
            selected.append(labels[n - 1])
        if len(selected) > 1 and not question.multiple:  # the worker would refuse it, saying less
            raise UsageError(
                "this question takes one option, not several:\n" + describe_question(link, question)
            )
        if args.text is not None and not question.freeform:
            raise UsageError("this question takes only its options:\n" + describe_question(link, question))
        await link.answer(question.question_id, selected, args.text)
        said = ", ".join([*selected, *([repr(args.text)] if args.text is not None else [])])
        return f"answered {question.text!r} with {said}"

    return _on_question(args, answer)


def run_dismiss(args: argparse.Namespace) -> int:
    """``tui dismiss ID``: dismiss the pending question."""

    async def dismiss(link: AttachLink, question: PendingQuestion) -> str:
        await link.dismiss(question.question_id)
        return f"dismissed {question.text!r}"

    return _on_question(args, dismiss)


# --- the session ---------------------------------------------------------------------------------
def run_interrupt(args: argparse.Namespace) -> int:
    """``tui interrupt ID``: end the running turn ``interrupted``; no worker is started."""
    access = open_access(args)

    async def body() -> int:
        sid = await access.resolve(args.id)
        short = short_id(sid)
        attach = access.command("attach", short)
        if not (await access.show(sid)).live:
            _say(f"session {short} has no live worker, so no turn is running; `{attach}` resumes it")
        elif await access.interrupt(sid, client_id=local_client_id("interrupt")):
            _say(
                f"interrupted the running turn of session {short}; prompts queued behind it wait "
                f"until /resume in `{attach}` runs them"
            )
        else:
            _say(f"session {short} has no running turn; nothing was interrupted")
        return 0

    return _run(body)


async def _say_children(access: SessionAccess, sid: str, verb: str, done: str) -> None:
    """The one rule for a parent's children: a child is a session of its own, so stopping,
    archiving or deleting its parent leaves it as it is. Say so, with the command for each."""
    rows = await access.list_sessions(include_archived=True)
    children = [r for r in rows if r.parent_id == sid]
    if not children:
        return
    each = ", ".join(f"`{access.command(verb, short_id(c.id))}`" for c in children)
    count = "its child stays" if len(children) == 1 else f"its {len(children)} children stay"
    _say(
        f"{count} as {'it is' if len(children) == 1 else 'they are'} (a child is a session of its own, "
        f"not {done} with its parent): {each}"
    )


def run_stop(args: argparse.Namespace) -> int:
    """``tui stop ID``: stop the worker; the session stays."""
    access = open_access(args)

    if (args.id is not None) + bool(args.all) + (args.idle is not None) != 1:
        raise UsageError(
            "say what to stop, one of: `tui stop ID` (one session), `tui stop --all` (every live one), "
            "`tui stop --idle 30m` (those idle for 30 minutes or more)"
        )
    idle: float | None = None
    if args.idle is not None:
        from tui.config import parse_duration

        try:
            idle = parse_duration(args.idle, unit=True)
        except ValueError as exc:
            raise UsageError(f"--idle {exc}") from exc

    async def stop_all() -> int:
        # Archived sessions too: archiving hides a session, it does not stop its worker.
        live = [row for row in await access.list_sessions(include_archived=True) if row.live]
        if idle is not None:
            live = [row for row in live if row.idle_seconds is not None and row.idle_seconds >= idle]
        for row in live:
            await access.stop(row.id)
            why = f"idle {_span(row.idle_seconds or 0)}, " if idle is not None else ""
            _say(f"stopped session {short_id(row.id)} ({why}{_memory(row)} freed)")
        if not live:
            none = (
                f"no worker has been idle {args.idle} or more"
                if idle is not None
                else "no session has a live worker"
            )
            _say(f"{none}; nothing was stopped")
            return 0
        count = "1 session" if len(live) == 1 else f"{len(live)} sessions"
        _say(f"{count} stopped; what they held in memory is gone, their transcripts stay")
        return 0

    if args.all or idle is not None:
        return _run(stop_all)

    async def body() -> int:
        sid = await access.resolve(args.id)
        stopped = await access.stop(sid)
        short = short_id(sid)
        if stopped:
            _say(
                f"stopped session {short}: what it held in memory (its programs' variables) is gone; "
                f"`{access.command('attach', short)}` resumes it with the same transcript and a fresh worker"
            )
        else:
            _say(f"session {short} had no live worker; `{access.command('attach', short)}` resumes it")
        await _say_children(access, sid, "stop", "stopped")
        return 0

    return _run(body)


def run_archive(args: argparse.Namespace) -> int:
    """``tui archive ID``: hide the session from lists."""
    access = open_access(args)

    async def body() -> int:
        sid = await access.resolve(args.id)
        await access.archive(sid)
        _say(f"archived session {short_id(sid)}; `{access.command('sessions', '--all')}` still lists it")
        await _say_children(access, sid, "archive", "archived")
        return 0

    return _run(body)


def run_transcript(args: argparse.Namespace) -> int:
    """``tui transcript ID [--format text|markdown|jsonl] [--redact]``: the whole session, from
    its journal (secrets replaced with ``--redact``, `tui.redact`)."""
    access = open_access(args)
    out = sys.stdout

    async def body() -> int:
        sid = await access.resolve(args.id)
        try:
            redactor = PieceRedactor(args.format) if args.redact else None
            async for piece in access.export(sid, args.format):
                for clean in [piece] if redactor is None else redactor.feed(piece):
                    out.write(clean)
            for clean in [] if redactor is None else redactor.flush():
                out.write(clean)
            if not getattr(args, "remote", None):
                from tui.store import StatePaths
                from tui.store.export import chain_head

                state = StatePaths.resolve(getattr(args, "state_dir", None))
                _say(chain_head(state.session(sid).journal))
            out.flush()
        except BrokenPipeError:
            # `tui transcript ID | head`: the reader has what it wanted.
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        return 0

    return _run(body)


def run_delete(args: argparse.Namespace) -> int:
    """``tui delete ID [--force]``: remove the session."""
    access = open_access(args)

    async def body() -> int:
        sid = await access.resolve(args.id)
        await access.delete(sid, force=args.force)
        _say(f"deleted session {short_id(sid)}")
        await _say_children(access, sid, "delete", "deleted")
        return 0

    return _run(body)


def _budget_of(args: argparse.Namespace) -> Budget | None:
    from tui.commands.limits import budget_of

    return budget_of(args)
