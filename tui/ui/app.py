"""`TuiApp`: the full-screen app attached to one session through an `AttachLink`."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.timer import Timer

from tui.errors import TuiError
from tui.link.base import AttachLink, Reconnecting
from tui.protocol.ids import short_id
from tui.protocol.web import FoundHit
from tui.ui.alerts import Alerts, Mode
from tui.ui.screens.finder import Searcher
from tui.ui.screens.session import GONE_EXIT_AFTER, SessionScreen
from tui.ui.seen import SeenStore

__all__ = ["TuiApp"]

KEEP_THEME_AFTER = 1.0
"""Seconds a theme must stay chosen before it is written to ``config.toml``."""
TMUX_SETTING = "set -g set-clipboard on"
"""What tmux needs (in ~/.tmux.conf) to let a program's OSC 52 through when `tmux load-buffer -w`
cannot be used (a tmux older than 3.2, or tui run through SSH from inside tmux)."""


class TuiApp(App[int]):
    """One attached session, full-screen. Its return code is the process's exit code (cli.md):
    0 detached or exited, 4 the worker went away, 6 refused."""

    # Priority bindings: they win over the prompt's own (TextArea binds Ctrl+C to copy and
    # Ctrl+D to delete-right).
    # Esc does one thing at a time, and the footer names the one it does now: close the
    # completions, else dismiss the question, else interrupt the running turn (each only when
    # this client may); the last binding says why when it may not.
    BINDINGS = [
        Binding("escape", "hide_keys", "Close the keys panel", show=False, priority=True, id="app.hide-keys"),
        Binding("escape", "close", "Close", show=False, priority=True, id="app.close"),
        Binding(
            "escape",
            "leave_reading",
            "Back",
            priority=True,
            id="app.leave-reading",
            tooltip="Leave the selection or the search, back to the prompt",
        ),
        Binding(
            "escape",
            "dismiss",
            "Dismiss",
            priority=True,
            id="app.dismiss",
            tooltip="Dismiss the pending question (the program sees it declined)",
        ),
        Binding(
            "escape",
            "interrupt",
            "Interrupt",
            priority=True,
            id="app.interrupt",
            tooltip="Interrupt the running turn",
        ),
        Binding("escape", "escape", "Interrupt", show=False, priority=True, id="app.escape"),
        Binding("f1", "help", "Help", id="app.help", tooltip="Keys and commands (as /help)"),
        Binding(
            "ctrl+r",
            "retry",
            "Retry now",
            priority=True,
            id="app.retry",
            tooltip="Reconnect now instead of waiting for the next try",
        ),
        Binding(
            "ctrl+c",
            "ctrl_c",
            "Interrupt",
            show=False,
            priority=True,
            id="app.ctrl-c",
            tooltip="Interrupt the running turn; twice on an idle prompt, detach",
        ),
        Binding(
            "ctrl+d",
            "detach",
            "Detach",
            priority=True,
            id="app.detach",
            tooltip="Leave the session; its worker keeps running",
        ),
        Binding(
            "ctrl+q",
            "detach",
            "Detach",
            show=False,
            priority=True,
            id="app.detach-q",
            tooltip="Leave the session; its worker keeps running",
        ),
    ]

    TITLE = "tui"

    _keep_timer: Timer | None = None
    _theme_read = False
    """Whether the theme given was applied (a change after that is the user's)."""

    def __init__(
        self,
        link: AttachLink,
        *,
        first_prompt: str | None = None,
        state_dir: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
        gone_exit_after: float | None = GONE_EXIT_AFTER,
        folder: str = "",
        theme: str | None = None,
        keep_theme: Callable[[str], object] | None = None,
        alerts: Mode = "auto",
        search: Searcher | None = None,
        open_at: tuple[int, str] | None = None,
    ) -> None:
        super().__init__()
        self.alerts = Alerts(alerts, label=f"tui {short_id(link.session_id)}")
        """The desktop notification of a question or a turn's end while the terminal is not in front."""
        self._saved_theme = theme
        """The theme of ``config.toml`` (shown from the start), then the one last kept."""
        self.keep_theme = keep_theme
        """Keeps a theme chosen for the next attach (writes ``config.toml``); it may raise `TuiError`."""
        self.link = link
        self.first_prompt = first_prompt
        self.seen = SeenStore(state_dir) if state_dir is not None else None
        self.clock = clock
        self.gone_exit_after = gone_exit_after

        self.session = SessionScreen(
            link,
            first_prompt=first_prompt,
            seen=self.seen,
            clock=clock,
            gone_exit_after=gone_exit_after,
            folder=folder,
        )
        """The session screen."""
        self.session.searcher = search
        self.session.open_at = open_at
        self.session.open_elsewhere = self._open_elsewhere
        self.next_open: tuple[str, int, str] | None = None
        """A hit of another session chosen in the search (its id, turn, text): the command line
        attaches it once this app has left (`tui.commands.attach`)."""

    def on_mount(self) -> None:
        if self._saved_theme in self.available_themes:
            self.theme = self._saved_theme
        self._theme_read = True
        self.push_screen(self.session)

    def watch_theme(self, theme: str) -> None:
        """A theme chosen (in the palette) is kept in ``config.toml`` for the next attach: once the
        choice settled (the palette previews each theme it passes)."""
        if not self._theme_read or self.keep_theme is None:
            return
        if self._keep_timer is not None:
            self._keep_timer.stop()
        self._keep_timer = self.set_timer(KEEP_THEME_AFTER, self._keep_theme)

    def _keep_theme(self) -> None:
        self._keep_timer = None
        theme = self.theme
        if self.keep_theme is None or theme == self._saved_theme:
            return
        try:
            where = self.keep_theme(theme)
        except TuiError as exc:
            self.notify(str(exc), title="The theme is not kept", severity="warning", markup=False)
            return
        self._saved_theme = theme
        self.notify(f"Kept in {where}.", title=f"Theme {theme}", timeout=3, markup=False)

    async def on_unmount(self) -> None:
        await self.link.close()

    def copy_to_clipboard(self, text: str) -> None:
        """Copy `text` (OSC 52, through SSH). Inside tmux, whose default `set-clipboard external`
        drops a program's OSC 52, it is also handed to tmux (`load-buffer -w`), which puts it in
        its buffer and sends it to the outer terminal's clipboard itself."""
        super().copy_to_clipboard(text)
        if os.environ.get("TMUX"):
            self.run_worker(self._copy_in_tmux(text), group="clipboard", exit_on_error=False)

    async def _copy_in_tmux(self, text: str) -> None:
        try:
            tmux = await asyncio.create_subprocess_exec(
                "tmux",
                "load-buffer",
                "-w",
                "-",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
            _, err = await tmux.communicate(text.encode())
            why = err.decode(errors="replace").strip() if tmux.returncode else ""
        except OSError as exc:
            why = exc.strerror or str(exc)
        if why:
            self.notify(
                f"tmux did not take the copy ({why}); `{TMUX_SETTING}` in ~/.tmux.conf lets OSC 52 through.",
                title="The clipboard may not have it",
                severity="warning",
                markup=False,
            )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        session = self.session
        if action == "hide_keys":
            return bool(self.screen.query("HelpPanel"))
        if (
            action in ("close", "leave_reading", "dismiss", "interrupt", "escape", "ctrl_c", "help")
            and self.screen is not session
        ):
            return False  # over the command palette or another modal, its keys are its own
        completing = session.prompt_box.completing if session.is_mounted else False
        may = session.principal.may("write")
        reading = session.reading  # Esc leaves the selection or the search first
        if action == "close":
            return completing and not reading
        if action == "leave_reading":
            return reading
        if action == "retry":
            return isinstance(session.link_state, Reconnecting)
        if action == "dismiss":
            return not completing and not reading and may and session.question is not None
        if action == "interrupt":
            return not completing and not reading and may and session.question is None and session.busy
        return True

    def action_hide_keys(self) -> None:
        self.action_hide_help_panel()

    def action_close(self) -> None:
        self.session.prompt_box.close()

    def action_leave_reading(self) -> None:
        self.session.leave_reading()

    def action_dismiss(self) -> None:
        self.session.escape()

    def action_interrupt(self) -> None:
        self.session.interrupt()

    def action_escape(self) -> None:
        self.session.escape()

    def action_retry(self) -> None:
        self.session.retry_now()

    def action_help(self) -> None:
        self.session.run_command("/help")

    def action_ctrl_c(self) -> None:
        self.session.ctrl_c()

    def action_detach(self) -> None:
        self.session.leave(0)

    def _open_elsewhere(self, hit: FoundHit, text: str) -> None:
        self.next_open = (hit.session_id, hit.turn, text)
        self.session.leave(0)

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        session = self.session
        may = session.principal.may
        # What this client may not do is not offered (asked anyway, the session refuses in one line).
        if may("write"):
            yield SystemCommand("Session: interrupt the running turn", "End the turn now", session.interrupt)
        yield SystemCommand("Session: detach", "Leave; the worker keeps running", self.action_detach)
        if may("owner"):
            yield SystemCommand(
                "Session: exit", "Stop the worker and leave (/exit)", lambda: session.run_command("/exit")
            )
            yield SystemCommand(
                "Session: exit and delete",
                "Stop the worker, delete the session (/exit --delete)",
                lambda: session.run_command("/exit --delete"),
            )
            yield SystemCommand(
                "Session: archive",
                "Hide it from `tui sessions` (/archive)",
                lambda: session.run_command("/archive"),
            )
        yield SystemCommand(
            "Session: stats",
            "Turns, tokens, uptime, who is attached (/stats)",
            lambda: session.run_command("/stats"),
        )
        yield SystemCommand(
            "Session: show the queue", "The prompts waiting (/queue)", lambda: session.run_command("/queue")
        )
        if may("write"):
            yield SystemCommand("Session: take back the last queued prompt", "/unqueue", session.unqueue)
        yield SystemCommand("Session: load older turns", "Page further back", session.transcript.load_older)
        if self.session.searcher is not None:
            yield SystemCommand(
                "Search: every session",
                "Find text in every session and open a hit where it was (/search TEXT)",
                lambda: session.search_sessions(""),
            )
        yield SystemCommand(
            "Session: help", "Commands and keys (/help)", lambda: session.run_command("/help")
        )
        for command in super().get_system_commands(screen):
            if command.title != "Quit":
                yield command
