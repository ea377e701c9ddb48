"""`OutputPager`: a turn's whole reply, or one tool call's whole output, on a screen of its own.

The app shows a huge output folded; this screen streams the whole of it from the worker
(`AttachLink.turn_output`) into a Textual `Log`, which draws only the lines in view, so a
100,000-line output opens without freezing: each piece's whole lines are added at once as it
arrives, and the screen keeps taking keys in between. The header says what it shows and, once
all of it arrived, how many lines it has. The usual keys scroll (arrows, PageUp/PageDown,
Home/End); Esc or q closes it.
"""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Log, Static

from tui.errors import TuiError
from tui.link.base import AttachLink
from tui.terminal import visible

__all__ = ["OutputPager"]


class OutputPager(Screen[None]):
    """One turn's whole reply (or one of its tool call's whole output), scrollable.

    Args:
        link: the session's link.
        turn_id: the turn.
        call_id: one of its tool calls: that call's output instead of the turn's reply.
        title: what the header calls it (``turn 14 · reply``).
    """

    DEFAULT_CSS = """
    OutputPager { layout: vertical; }
    OutputPager #pager-header { height: 1; padding: 0 1; background: $panel; color: $text; }
    OutputPager #pager-log { height: 1fr; }
    """

    BINDINGS = [
        Binding("escape", "close", "Close", id="pager.close"),
        Binding("q", "close", "Close", show=False, id="pager.close-q"),
        Binding("home", "top", "Top", id="pager.top"),
        Binding("end", "bottom", "End", id="pager.bottom"),
    ]

    def __init__(
        self,
        link: AttachLink,
        turn_id: str,
        call_id: str | None = None,
        title: str = "the whole output",
        *,
        files: bool = False,
    ) -> None:
        super().__init__()
        self.files = files
        """What the turn did to the session's files (its diff) instead of its output."""
        self.link = link
        self.turn_id = turn_id
        self.call_id = call_id
        self.title = title
        self.done = False
        """Set once the whole output arrived (or the worker refused it)."""
        self.line_count = 0

    def compose(self) -> ComposeResult:
        yield Static(f"{self.title} · loading…", id="pager-header", markup=False)
        yield Log(id="pager-log", highlight=False, auto_scroll=False)
        yield Footer()

    @property
    def log_view(self) -> Log:
        return self.query_one("#pager-log", Log)

    def on_mount(self) -> None:
        self.log_view.focus()
        self._load()

    @work(exclusive=True, exit_on_error=False)
    async def _load(self) -> None:
        header = self.query_one("#pager-header", Static)
        view = self.log_view
        rest = ""
        try:
            pieces = (
                self.link.turn_files(self.turn_id)
                if self.files
                else self.link.turn_output(self.turn_id, call_id=self.call_id)
            )
            async for piece in pieces:
                # Whole lines at once (a blank one too): the log measures them in a thread.
                text = rest + visible(piece)
                cut = text.rfind("\n") + 1
                if cut:
                    view.write_lines([text[:cut]], scroll_end=False)
                rest = text[cut:]
            if rest:
                view.write_lines([rest], scroll_end=False)
        except TuiError as exc:
            self.done = True
            header.update(visible(f"{self.title} · could not be read: {exc}"))
            return
        self.line_count = view.line_count
        self.done = True
        lines = f"{self.line_count:,} line{'s' if self.line_count != 1 else ''}"
        header.update(f"{self.title} · {lines} · Home/End, PageUp/PageDown scroll · Esc closes")
        if view.scroll_y == 0 and not self.files:
            # Like `less +G`: the end of an output (a traceback, a total) is what is read first.
            view.scroll_end(animate=False)

    def action_close(self) -> None:
        self.dismiss()

    def action_top(self) -> None:
        self.log_view.scroll_home(animate=False)

    def action_bottom(self) -> None:
        self.log_view.scroll_end(animate=False)
