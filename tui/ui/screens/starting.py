"""The first screen, drawn before the session is reached: the empty transcript, the prompt's
row, a status row saying what is being reached, and the footer. It imports only Textual's
`Screen`, `Static` and `Footer`, as a bare app does: the wire models, the link and httpx, and the
session screen's own widgets load in a thread after it is on the terminal (`TuiApp`), and the
session screen takes its place once the session answers (once the command palette, if it is
open over the first screen, has closed: it is not taken away from under the keys).

What is typed meanwhile is shown and kept: the prompts sent with Enter (`entered`) are sent,
in order, once the session screen is there, and its prompt starts with the rest (`draft`)."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual.widgets._footer import FooterKey

__all__ = ["PLACEHOLDER", "StartingScreen"]

PLACEHOLDER = "Enter sends · Ctrl+J new line · / commands · F1 help"
"""What the empty prompt says (while a turn runs, that Enter queues)."""


class _Footer(Footer):
    """Textual's footer, which says when its keys are in (they come a refresh after the rest)."""

    async def recompose(self) -> None:
        await super().recompose()
        if self.query(FooterKey):
            self.post_message(StartingScreen.Drawn())


class StartingScreen(Screen[None]):
    """What the session screen looks like empty, until the session is reached."""

    DEFAULT_CSS = """
    StartingScreen { layout: vertical; background: $background; }
    StartingScreen > #starting-transcript { height: 1fr; }
    StartingScreen > #starting-prompt {
        height: 2; padding: 0 1; background: $surface; border-top: tall $primary;
    }
    StartingScreen > #starting-status { height: 2; padding: 0 1; background: $panel; color: $text-muted; }
    """

    class Drawn(Message):
        """The whole screen is in, its footer's keys too: the session may be reached now."""

    class Uncovered(Message):
        """The screen is in front again: what was over it (the command palette) has closed."""

    def __init__(self, reaching: str) -> None:
        super().__init__()
        self.reaching = reaching
        """What the status row says is being reached (``reaching session 36397ff8``)."""
        self.entered: list[str] = []
        """Prompts typed and sent with Enter before the session screen, oldest first."""
        self.draft = ""
        """What is typed after them (the session screen's prompt starts with it)."""

    def compose(self) -> ComposeResult:
        yield Static(id="starting-transcript")
        yield Static(id="starting-prompt")
        yield Static(f"\u25cb {self.reaching}\u2026", id="starting-status", markup=False)
        yield _Footer()

    def on_mount(self) -> None:
        self._echo()

    def on_screen_resume(self) -> None:
        self.post_message(self.Uncovered())

    def on_key(self, event: events.Key) -> None:
        event.stop()
        event.prevent_default()
        if event.key == "backspace":
            self.draft = self.draft[:-1]
        elif event.key == "enter":
            if self.draft.strip():
                self.entered.append(self.draft)
            self.draft = ""
        elif event.key in ("ctrl+j", "alt+enter"):
            self.draft += "\n"
        elif event.is_printable and event.character is not None:
            self.draft += event.character
        self._echo()

    def on_paste(self, event: events.Paste) -> None:
        event.stop()
        event.prevent_default()
        self.draft += event.text
        self._echo()

    def _echo(self) -> None:
        """Show what is typed on the prompt's row (the placeholder when nothing is)."""
        prompt = self.query_one("#starting-prompt", Static)
        if self.draft:
            prompt.update(Text.assemble(("\u276f ", "bold"), self.draft.replace("\n", " ")))
        else:
            prompt.update(f"[bold $accent]\u276f[/] [$text-muted]{PLACEHOLDER}")
