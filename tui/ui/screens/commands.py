"""The session screen's slash commands: the attachment carries each out (`Attachment.command`),
and this layer shows what it did, by the handler its outcome's type names in `_SHOW`; the
commands of the screen alone (``/copy``, ``/find``, ``/help``) it carries out itself. Requests
of its own (interrupt, answer, dismiss) run in workers whose failures are shown in one way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from tui.errors import TuiError
from tui.link import changes as ch
from tui.link.attachment import Attachment
from tui.protocol.principal import Permission
from tui.protocol.state import who
from tui.terminal import visible
from tui.ui.screens.help import help_text
from tui.ui.screens.reading import ReadingScreen

__all__ = ["CommandScreen"]


class CommandScreen(ReadingScreen):
    """The session screen's slash commands and requests."""

    attachment: Attachment
    stopped: str | None = None
    """``stopped`` or ``deleted`` once /exit ended the session's worker."""

    def leave(self, code: int, message: str | None = None, *, forget: bool = False) -> None:
        """Leave the app with exit code `code` (the session screen says how)."""
        raise NotImplementedError

    # --- who this client is --------------------------------------------------------------------
    def permitted(self, action: Permission, what: str) -> bool:
        """Whether this client may do `action`; if not, say so in one line (nothing is sent)."""
        why = self.attachment.refusal(action, what)
        if why is None:
            return True
        self.notify(why, title="Not permitted", severity="warning")
        return False

    # --- slash commands ------------------------------------------------------------------------
    def run_command(self, line: str) -> None:
        """Run a slash command typed at the prompt (the attachment's), and show what it did."""
        self.run_worker(self._command(line), group="requests", exit_on_error=False)

    async def _command(self, line: str) -> None:
        outcome = await self.attachment.command(line)
        await _SHOW[type(outcome)](self, outcome)

    async def _done(self, outcome: ch.Done) -> None:
        if outcome.text:
            self.notify(outcome.text)

    async def _command_failed(self, outcome: ch.Failed) -> None:
        self._failed(outcome.name, outcome.error)

    async def _not_permitted(self, outcome: ch.NotPermitted) -> None:
        self.notify(outcome.text, title="Not permitted", severity="warning")

    async def _usage(self, outcome: ch.Usage) -> None:
        self.notify(outcome.text, title=_WHICH.get(outcome.name, "How?"), severity="warning")

    async def _unknown(self, outcome: ch.Unknown) -> None:
        self.notify(
            f"{outcome.name} is not a command; /help lists them.", title="Unknown command", severity="warning"
        )

    async def _leave(self, outcome: ch.Leave) -> None:
        self.leave(0)

    async def _stopped(self, outcome: ch.Stopped) -> None:
        self.stopped = "deleted" if outcome.deleted else "stopped"
        self.leave(0, None, forget=outcome.deleted)

    async def _queue_shown(self, outcome: ch.QueueShown) -> None:
        if not outcome.queue:
            self.notify("Nothing is queued.", title="Queue")
        else:
            queued = enumerate(outcome.queue, 1)
            lines = "\n".join(f"{n}. {i.prompt}  · {who(i.by, i.client_id)}" for n, i in queued)
            self.notify(lines, title="Queue")

    async def _unqueued(self, outcome: ch.Unqueued) -> None:
        if outcome.item is None:
            self.notify("It already started.", title="Could not take it back", severity="warning")
        elif not self.prompt.text.strip():
            self.prompt.load_text(outcome.item.prompt)
            self.prompt.move_cursor(self.prompt.document.end)

    async def _resumed(self, outcome: ch.Resumed) -> None:
        if not outcome.resumed:
            self.notify("The queue is not held.", title="Queue")

    async def _stats_shown(self, outcome: ch.StatsShown) -> None:
        await self.transcript.add_line(outcome.line)

    async def _children_shown(self, outcome: ch.ChildrenShown) -> None:
        await self.transcript.add_line(visible(outcome.text))

    async def _context_shown(self, outcome: ch.ContextShown) -> None:
        await self.transcript.add_line(visible(outcome.text))

    async def _local(self, outcome: ch.Local) -> None:
        """The commands of this screen alone: /copy, /find, /search, /help."""
        if outcome.name == "/copy":
            self.copy_last_reply()
        elif outcome.name == "/find":
            self.open_search(outcome.rest)
        elif outcome.name == "/search":
            self.search_sessions(outcome.rest)
        elif outcome.name == "/help":
            view = self.transcript  # its width once the help brings the scrollbar
            columns = view.outer_size.width - view.styles.gutter.width - view.styles.scrollbar_size_vertical
            await self.transcript.add_line(help_text(columns))

    def unqueue(self) -> None:
        """Take the last queued prompt back into the prompt."""
        if self.permitted("write", "Taking a queued prompt back"):
            self.run_command("/unqueue")

    def copy_last_reply(self) -> None:
        """Copy the last reply there is (of the ended turns kept here) to the clipboard (OSC 52:
        it works over SSH and tmux); the note says which turn's it is when a later one had none."""
        newest = list(reversed(self.attachment.session.turns.values()))
        kept = [i.record for i in reversed(self.transcript.items) if i.record is not None]
        if not newest and not kept:
            self.notify("No turn has ended yet.", title="Nothing to copy", severity="warning")
            return
        last = next((r for r in [*newest, *kept] if r.reply), None)
        if last is None:
            self.notify("No ended turn here has a reply.", title="Nothing to copy", severity="warning")
            return
        self.app.copy_to_clipboard(last.reply)
        lines = len(last.reply.splitlines())
        latest = (newest or kept)[0]
        which = "The last reply" if last.turn_id == latest.turn_id else f"The reply of turn {last.number}"
        later = "" if last.turn_id == latest.turn_id else " (the turns after it have none)"
        self.notify(f"copied {lines} line{'s' if lines != 1 else ''}{later}", title=which)

    def _request(self, what: str, call: object, *, done: str | None = None) -> None:
        async def run() -> None:
            try:
                await call  # type: ignore[misc]
            except TuiError as exc:
                self._failed(what, exc)
                return
            if done:
                self.notify(done)

        self.run_worker(run(), group="requests", exit_on_error=False)


_SHOW: dict[type, Callable[[CommandScreen, Any], Awaitable[None]]] = {
    ch.Done: CommandScreen._done,
    ch.Failed: CommandScreen._command_failed,
    ch.NotPermitted: CommandScreen._not_permitted,
    ch.Usage: CommandScreen._usage,
    ch.Unknown: CommandScreen._unknown,
    ch.Leave: CommandScreen._leave,
    ch.Stopped: CommandScreen._stopped,
    ch.QueueShown: CommandScreen._queue_shown,
    ch.Unqueued: CommandScreen._unqueued,
    ch.Resumed: CommandScreen._resumed,
    ch.StatsShown: CommandScreen._stats_shown,
    ch.ChildrenShown: CommandScreen._children_shown,
    ch.ContextShown: CommandScreen._context_shown,
    ch.Local: CommandScreen._local,
}
"""How what each slash command did is shown."""

_WHICH = {"/model": "Which model?", "/mode": "Which mode?", "/note": "What note?", "/context": "Context"}
"""The title of the line that asks for a command's missing argument."""
