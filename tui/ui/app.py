"""`TuiApp`: the full-screen app attached to one session through an `AttachLink`.

Given the link, it opens on the session screen. Given a way to reach the session instead
(`Reach`, as `tui attach` does), it draws a first screen that needs nothing but Textual
(`StartingScreen`), then reaches the session and imports the session screen (the wire models,
the link, httpx) in a thread, and puts the session screen in its place: the first frame does not
wait for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.timer import Timer

from tui.errors import TuiError
from tui.ui.screens.starting import StartingScreen

if TYPE_CHECKING:
    from tui.link.base import AttachLink
    from tui.protocol.web import FoundHit
    from tui.ui.alerts import Alerts, Mode
    from tui.ui.screens.finder import Searcher
    from tui.ui.screens.session import SessionScreen
    from tui.ui.seen import SeenStore

__all__ = ["Reach", "Reached", "TuiApp"]

GONE_EXIT_AFTER = 3.0
"""Seconds the reason stays on screen before the app exits when the worker is gone."""


@dataclass
class Reached:
    """What a first screen waits for: the session's link and its folder, with the state dir
    (where the app keeps what was seen) and the desktop alerts' mode from ``config.toml``."""

    link: AttachLink
    folder: str
    state_dir: Path | None = None
    alerts: Mode = "auto"


_SESSION_ACTIONS = frozenset(
    {"hide_keys", "close", "leave_reading", "dismiss", "interrupt", "escape", "help", "retry"}
)
"""The app's actions that need the session screen: none is offered on the first screen."""

Reach = Callable[[], Reached]
"""Reaches the session (it may start a worker, or make the session): run in a thread; a
`TuiError` it raises is the app's `failure`."""

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
    _reaching = False
    """Whether the session is being reached (or was)."""
    """Whether the theme given was applied (a change after that is the user's)."""

    def __init__(
        self,
        link: AttachLink | None = None,
        *,
        reach: Reach | None = None,
        reaching: str = "reaching the session",
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
        """Attached through `link`, or, without one, through what `reach` returns, while a first
        screen says `reaching`."""
        super().__init__()
        self._saved_theme = theme
        """The theme of ``config.toml`` (shown from the start), then the one last kept."""
        self.keep_theme = keep_theme
        """Keeps a theme chosen for the next attach (writes ``config.toml``); it may raise `TuiError`."""
        self.first_prompt = first_prompt
        self.clock = clock
        self.gone_exit_after = gone_exit_after
        self._search = search
        self._open_at = open_at
        self._reach = reach
        self._starting: StartingScreen | None = None if link is not None else StartingScreen(reaching)
        """The first screen while the session is reached (None once it is, or given a link)."""
        self._held: Reached | None = None
        """The session reached while the command palette is open over the first screen: shown
        once the palette closes."""
        self._session: SessionScreen | None = None
        self.failure: BaseException | None = None
        """Why the session could not be reached (raised again by `tui attach` once the app left)."""
        self.next_open: tuple[str, int, str] | None = None
        """A hit of another session chosen in the search (its id, turn, text): the command line
        attaches it once this app has left (`tui.commands.attach`)."""
        if link is not None:
            self._make_session(Reached(link, folder, state_dir, alerts))
        elif reach is None:
            raise ValueError("TuiApp needs a link or a way to reach the session")

    def _make_session(self, reached: Reached) -> SessionScreen:
        """Make the session screen of the session reached."""
        from tui.protocol.ids import short_id
        from tui.ui.alerts import Alerts
        from tui.ui.screens.session import SessionScreen
        from tui.ui.seen import SeenStore

        self.alerts: Alerts = Alerts(reached.alerts, label=f"tui {short_id(reached.link.session_id)}")
        """The desktop notification of a question or a turn's end while the terminal is not in front."""
        self.link: AttachLink = reached.link
        self.seen: SeenStore | None = SeenStore(reached.state_dir) if reached.state_dir is not None else None
        session = SessionScreen(
            reached.link,
            first_prompt=self.first_prompt,
            seen=self.seen,
            clock=self.clock,
            gone_exit_after=self.gone_exit_after,
            folder=reached.folder,
        )
        session.searcher = self._search
        session.open_at = self._open_at
        session.open_elsewhere = self._open_elsewhere
        self._session = session
        return session

    @property
    def session(self) -> SessionScreen:
        """The session screen (once the session is reached)."""
        if self._session is None:
            raise LookupError("the session is not reached yet")
        return self._session

    @property
    def reached(self) -> bool:
        """Whether the session screen is made: False while the first screen waits, or when the
        app left before the session was reached."""
        return self._session is not None

    def on_mount(self) -> None:
        if self._saved_theme in self.available_themes:
            self.theme = self._saved_theme
        self._theme_read = True
        if self._starting is None:
            self.push_screen(self.session)
            return
        self.push_screen(self._starting)

    def on_starting_screen_drawn(self, message: StartingScreen.Drawn) -> None:
        """Reach the session once the first screen is drawn whole: the thread's imports would
        otherwise share the interpreter with drawing it."""
        if self._reaching:
            return
        self._reaching = True
        self.call_after_refresh(
            self.run_worker, self._reach_session, thread=True, name="reach", exit_on_error=False
        )

    async def on_starting_screen_uncovered(self, message: StartingScreen.Uncovered) -> None:
        """The palette opened over the first screen closed: show the session reached meanwhile."""
        held = self._held
        if held is not None and not self._exit:
            await self._show_session(held)

    def _reach_session(self) -> None:
        """In a thread: reach the session and import the session screen, then show it."""
        assert self._reach is not None
        try:
            reached = self._reach()
            import tui.ui.screens.session  # noqa: F401 - its widgets and the wire models, here rather than on the loop
        except BaseException as exc:  # handed to the app's loop, which leaves with it
            self._from_thread(self._not_reached, exc)
            return
        self._from_thread(self._show_session, reached)

    def _from_thread(self, callback: Callable[..., object], *args: object) -> None:
        """Run `callback` on the app's loop, unless the app left meanwhile (Ctrl+D on the first screen)."""
        with contextlib.suppress(RuntimeError):
            self.call_from_thread(callback, *args)

    def _not_reached(self, exc: BaseException) -> None:
        self.failure = exc
        self.exit(1, return_code=1)

    async def _show_session(self, reached: Reached) -> None:
        starting = self._starting
        if starting is None:
            return
        if self._exit or self.screen is not starting:
            # Left (Ctrl+D) while the session was reached: its link is closed as the app leaves.
            # Or the palette is open over the first screen: the session is shown once it closes.
            self._held = reached
            return
        self._held = None
        session = self._make_session(reached)
        await self.switch_screen(session)
        self._starting = None
        session.hand_over(starting.entered, starting.draft)

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
        if self._session is not None:
            await self.link.close()
        elif self._held is not None:  # reached, but the app left before showing it
            await self._held.link.close()

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
        session = self._session
        if session is None:  # the first screen: only leaving, until the session is reached
            return action not in _SESSION_ACTIONS
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
            from tui.link.base import Reconnecting

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
        if self._session is None:
            self.exit(0)  # nothing runs yet: Ctrl+C leaves before the session is reached
            return
        self.session.ctrl_c()

    def action_detach(self) -> None:
        if self._session is None:
            self.exit(0)  # left before the session was reached
            return
        self.session.leave(0)

    def _open_elsewhere(self, hit: FoundHit, text: str) -> None:
        self.next_open = (hit.session_id, hit.turn, text)
        self.session.leave(0)

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        session = self._session
        if session is None:
            yield SystemCommand("Session: detach", "Leave; the worker keeps running", self.action_detach)
            yield from (c for c in super().get_system_commands(screen) if c.title != "Quit")
            return
        may = session.principal.may
        # What this client may not do is not offered (asked anyway, the session refuses in one line).
        if may("write") and session.busy:  # with no turn running it would do nothing
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
