"""The slash commands an `Attachment` carries out (those of `tui.link.slash` that act on the
session through the link), each answering with an `Outcome` (`tui.link.changes`) the client shows."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from tui.errors import InvalidRequest, NotFound, TuiError, UsageError
from tui.link import changes as ch
from tui.link.slash import format_children, format_context, format_stats
from tui.protocol.ids import short_id
from tui.protocol.messages import MAX_NOTE, ContextList, Noted
from tui.protocol.wording import agent_mode, agent_model, restart_loses

if TYPE_CHECKING:
    from tui.link.attachment import Attachment
    from tui.link.base import SessionVerbs

__all__ = ["COMMANDS"]


async def _call(what: str, call: Any, done: Callable[[Any], ch.Outcome]) -> ch.Outcome:
    try:
        result = await call
    except TuiError as exc:
        return ch.Failed(what, exc)
    return done(result)


def _verbs(attachment: Attachment, command: str) -> SessionVerbs:
    """The access layer's session verbs, as the link was handed them.

    Raises:
        InvalidRequest: the link was made without them: the command that does it is named.
    """
    link = attachment.link
    if link.verbs is None:
        how = link.command(command, short_id(link.session_id))
        raise InvalidRequest(f"this session cannot be told to {command} from here; `{how}` can")
    return link.verbs


async def stop(attachment: Attachment, rest: str, *, delete: bool = False) -> ch.Outcome:
    sid = attachment.link.session_id
    try:
        verbs = _verbs(attachment, "delete" if delete else "stop")
        await verbs.stop(sid)
        if delete:
            await verbs.delete(sid, force=True)
    except TuiError as exc:
        return ch.Failed("exit", exc)
    return ch.Stopped(delete)


async def archive(attachment: Attachment, rest: str) -> ch.Outcome:
    done = ch.Done("archive", "The session is archived; it keeps running.")
    try:
        verbs = _verbs(attachment, "archive")
    except TuiError as exc:
        return ch.Failed("archive", exc)
    return await _call("archive", verbs.archive(attachment.link.session_id), lambda _: done)


def _offered(now: str | None, choices: list[str], what: str, typed: str) -> str:
    """``The model is fast; /model NAME switches: fast, smart (Tab completes).``"""
    said = f"The {what} is {now}; " if now else ""
    if not choices:
        return f"{said}type {typed}."
    return f"{said}{typed} switches: {', '.join(choices)} (Tab completes)."


async def model(attachment: Attachment, rest: str) -> ch.Outcome:
    if not rest:  # what it is now, and what it may be
        s, info = attachment.session, attachment.info
        setting = next((x for x in s.settings if x.category == "model"), None)
        if setting is not None:  # an ACP agent's
            names = [c.value for c in setting.choices]
            return ch.Usage("/model", _offered(agent_model(s.settings), names, "model", "/model NAME"))
        if info is not None and info.agent == "python" and not info.models:  # none to name or switch to
            return ch.Usage(
                "/model",
                "This session runs Python, which has no model; `tui --model NAME` starts a model "
                "session (`tui models` lists them).",
            )
        offered = list(info.models) if info is not None else []
        text = _offered(s.model or "the default", offered, "model", "/model NAME")
        if not offered:
            text = text.removesuffix(".") + " (a [models] profile or PROVIDER:MODEL)."
        return ch.Usage("/model", text)
    return await _call("model", attachment.link.set_model(rest), lambda _: ch.Done("model"))


async def mode(attachment: Attachment, rest: str) -> ch.Outcome:
    if not rest:
        s = attachment.session
        setting = next((x for x in s.settings if x.category == "mode"), None)
        names = [c.value for c in s.modes] or (
            [c.value for c in setting.choices] if setting is not None else []
        )
        if not names:
            return ch.Usage("/mode", "This session's agent has no modes (/mode is an ACP agent's).")
        now = agent_mode(s.mode, list(s.modes), list(s.settings))
        return ch.Usage("/mode", _offered(now, names, "mode", "/mode NAME"))
    return await _call("mode", attachment.link.set_model(rest, "mode"), lambda _: ch.Done("mode"))


async def queue(attachment: Attachment, rest: str) -> ch.Outcome:
    if not rest:
        return ch.QueueShown(tuple(attachment.session.queue))
    attachment.submit(rest, queue=True)
    return ch.Done("queue")


async def unqueue(attachment: Attachment, rest: str) -> ch.Outcome:
    queue = attachment.session.queue
    if not queue:
        return ch.QueueShown(())
    mine = [i for i in queue if i.client_id == attachment.link.client_id] or queue
    item = mine[-1]
    try:
        await attachment.link.unqueue(item.queue_id)
    except NotFound:
        return ch.Unqueued(None)
    except TuiError as exc:
        return ch.Failed("unqueue", exc)
    return ch.Unqueued(item)


async def resume(attachment: Attachment, rest: str) -> ch.Outcome:
    return await _call("resume", attachment.link.resume_queue(), lambda resumed: ch.Resumed(bool(resumed)))


async def stats(attachment: Attachment, rest: str) -> ch.Outcome:
    return await _call(
        "stats", attachment.link.stats(), lambda stats: ch.StatsShown(format_stats(attachment._shown(stats)))
    )


async def children(attachment: Attachment, rest: str) -> ch.Outcome:
    children = attachment.session.child_sessions.values()
    return ch.ChildrenShown(format_children(children, lambda short: attachment.link.command("attach", short)))


def _noted(noted: Noted) -> ch.Outcome:
    if noted.turn_id is not None:
        return ch.Done("note", f"note left; it started turn {noted.turn_id}")
    return ch.Done("note", "note left; the agent reads it with its next turn")


async def note(attachment: Attachment, rest: str) -> ch.Outcome:
    if not rest:
        return ch.Usage("/note", "Type /note TEXT: the agent reads it with its next turn.")
    if len(rest) > MAX_NOTE:
        why = f"a note is at most {MAX_NOTE:,} characters; this one has {len(rest):,}"
        return ch.Failed("note", UsageError(why))
    return await _call("note", attachment.link.note(rest), _noted)


async def context(attachment: Attachment, rest: str) -> ch.Outcome:
    link = attachment.link
    if not rest:
        short = short_id(link.session_id)
        add = link.command("context", "add", short, "NAME", "--cmd", "CMD", "--every", "S")

        def shown(listed: ContextList) -> ch.Outcome:
            return ch.ContextShown(format_context(listed, add))

        return await _call("context", link.context_list(), shown)
    action, _, name = rest.partition(" ")
    name = name.strip()
    if action != "remove" or not name or " " in name:
        return ch.Usage("/context", "Type /context to list the sources, or /context remove NAME.")
    done = ch.Done("context", f"context source {name} removed; the agent no longer sees it")
    return await _call("context", link.context_remove(name), lambda _: done)


async def restart(attachment: Attachment, rest: str) -> ch.Outcome:
    loses = restart_loses(attachment.session.agent or (attachment.info.agent if attachment.info else None))
    done = ch.Done("restart", f"the session runs in a new worker; {loses} are gone")
    try:
        verbs = _verbs(attachment, "restart")
    except TuiError as exc:
        return ch.Failed("restart", exc)
    # Only when idle: the access layer says so (a turn runs, or a question waits: Busy).
    return await _call("restart", verbs.restart(attachment.link.session_id), lambda _: done)


_REWIND_USAGE = (
    "Type /rewind N: the files and the conversation go back to before turn N (the number in each "
    "turn's header); /rewind N --force overwrites paths changed since by someone else; /rewind --undo."
)


async def rewind(attachment: Attachment, rest: str) -> ch.Outcome:
    from tui.protocol.messages import RewindDone, RewindRequest
    from tui.protocol.routes import BRIDGE

    words = rest.split()
    force, undo = "--force" in words, "--undo" in words
    numbers = [w for w in words if w not in ("--force", "--undo")]
    if undo and not numbers:
        request = RewindRequest(undo=True)
    elif len(numbers) == 1 and numbers[0].isdigit() and int(numbers[0]) >= 1:
        request = RewindRequest(to_turn=int(numbers[0]), force=force)
    else:
        return ch.Usage("/rewind", _REWIND_USAGE)

    def done(result: RewindDone) -> ch.Outcome:
        count = len(result.files) + result.more
        files = f"{count} file{'s' if count != 1 else ''} put back" if count else "no file to put back"
        if undo:
            return ch.Done(
                "rewind", f"the files of the last rewind are back as they were before it ({files})"
            )
        again = "; /rewind --undo puts them back" if count else ""
        return ch.Done("rewind", f"rewound to before turn {result.to_turn}: {files}{again}")

    return await _call("rewind", attachment.link.call(BRIDGE["rewind"], request), done)


async def leave() -> ch.Outcome:
    return ch.Leave()


COMMANDS: dict[str, Callable[[Attachment, str], Awaitable[ch.Outcome]]] = {
    "/detach": lambda attachment, rest: leave(),
    "/exit": stop,
    "/exit --delete": lambda attachment, rest: stop(attachment, rest, delete=True),
    "/archive": archive,
    "/model": model,
    "/mode": mode,
    "/queue": queue,
    "/unqueue": unqueue,
    "/resume": resume,
    "/stats": stats,
    "/children": children,
    "/note": note,
    "/context": context,
    "/restart": restart,
    "/rewind": rewind,
}
"""The commands the attachment carries out; the others of the table (``/copy``, ``/find``,
``/help``) are the client's own (`changes.Local`)."""
