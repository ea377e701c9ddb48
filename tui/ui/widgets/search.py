"""The search bar (Ctrl+F, ``/find TEXT``): what to find in the whole session, and which match
of how many is shown. The session screen asks the worker and jumps between the matches."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Input, Static

__all__ = ["SearchBar"]


class SearchBar(Horizontal):
    """Find text in the session: Enter or Down goes to the next match, Shift+Enter or Up to the
    previous one, Esc closes."""

    BINDINGS = [
        Binding("down", "step(1)", "Next match", id="search.next", tooltip="The next match"),
        Binding("up", "step(-1)", "Previous match", id="search.previous", tooltip="The previous match"),
        Binding("shift+enter", "step(-1)", "Previous match", show=False, id="search.previous-enter"),
    ]

    DEFAULT_CSS = """
    SearchBar { height: 1; display: none; background: $boost; padding: 0 1; }
    SearchBar > .search--label { width: auto; color: $text-accent; padding: 0 1 0 0; }
    SearchBar > Input { width: 1fr; height: 1; border: none; padding: 0; background: $boost; }
    SearchBar > Input:focus { border: none; }
    SearchBar > #search-count { width: auto; color: $text-muted; padding: 0 0 0 1; }
    """

    class Find(Message):
        """Search the session for `text`."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class Step(Message):
        """Go `step` matches on (negative: back)."""

        def __init__(self, step: int) -> None:
            super().__init__()
            self.step = step

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.searched = ""
        """The text the matches shown are for."""
        self._input = Input(placeholder="text in the whole session", id="search-input")
        self._count = Static("", id="search-count", markup=False)

    def compose(self) -> ComposeResult:
        yield Static("Find:", classes="search--label")
        yield self._input
        yield self._count

    @property
    def is_open(self) -> bool:
        """Whether the bar is shown."""
        return bool(self.display)

    def open(self, text: str = "") -> None:
        """Show the bar with `text` typed, and take the keys."""
        self.display = True
        if text:
            self._input.value = text
        self._input.focus()

    def close(self) -> None:
        """Hide the bar and forget the matches."""
        self.display = False
        self.searched = ""
        self._count.update("")

    def show_count(self, text: str) -> None:
        """Say which match of how many is shown (or that none is)."""
        self._count.update(text)

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value
        if not text.strip():
            return
        if text == self.searched:
            self.post_message(self.Step(1))
        else:
            self.searched = text
            self.post_message(self.Find(text))

    def action_step(self, step: int) -> None:
        if self.searched:
            self.post_message(self.Step(step))
