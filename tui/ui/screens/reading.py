"""What the session screen does for reading its transcript: the keys that scroll it, select a
turn and copy from it, and finding text in the whole session (the search bar, ``/find``).

`ReadingScreen` is the base of `tui.ui.screens.session.SessionScreen`: the widgets it reads are
the session screen's; it asks the link only for search results and a turn's whole output.
"""

from __future__ import annotations

from collections.abc import Callable

from textual import on, work
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import TextArea

from tui.errors import TuiError
from tui.link.base import AttachLink
from tui.protocol import SearchHit, TurnRecord
from tui.protocol.web import FoundHit
from tui.terminal import visible, visible_data
from tui.ui.screens.finder import Finder, Searcher
from tui.ui.screens.pager import OutputPager
from tui.ui.widgets.prompt import PromptArea, PromptBox
from tui.ui.widgets.search import SearchBar
from tui.ui.widgets.status import StatusRows
from tui.ui.widgets.transcript import TranscriptView
from tui.ui.widgets.turn import TurnView

__all__ = ["ReadingScreen", "clip", "turn_numbered"]


class ReadingScreen(Screen[None]):
    """The session screen's reading keys and search."""

    link: AttachLink

    # Reading the transcript while the prompt keeps the typing: priority bindings, so that the
    # prompt's own (PageUp/PageDown move its cursor, Shift+Up/Down select) give way to them.
    BINDINGS = [
        Binding(
            "pageup",
            "scroll_page(-1)",
            "Scroll",
            priority=True,
            id="session.page-up",
            tooltip="Scroll the transcript a page up (older turns load past the first)",
        ),
        Binding(
            "pagedown",
            "scroll_page(1)",
            "Scroll",
            show=False,
            priority=True,
            id="session.page-down",
            tooltip="Scroll the transcript a page down",
        ),
        Binding("shift+up", "scroll_lines(-1)", "Line up", show=False, priority=True, id="session.line-up"),
        Binding(
            "shift+down", "scroll_lines(1)", "Line down", show=False, priority=True, id="session.line-down"
        ),
        Binding(
            "ctrl+home",
            "scroll_top",
            "Top",
            show=False,
            priority=True,
            id="session.top",
            tooltip="The first loaded turn; again: older turns",
        ),
        Binding(
            "ctrl+end",
            "scroll_bottom('new')",
            "New turns ↓",
            priority=True,
            id="session.bottom-new",
            tooltip="New turns arrived below: back to the live bottom",
        ),
        Binding(
            "ctrl+end",
            "scroll_bottom('away')",
            "Bottom",
            priority=True,
            id="session.bottom-away",
            tooltip="Back to the live bottom (new output shows as it comes)",
        ),
        Binding(
            "ctrl+end",
            "scroll_bottom",
            "Bottom",
            show=False,
            priority=True,
            id="session.bottom",
            tooltip="Back to the live bottom",
        ),
        Binding(
            "alt+up",
            "select(-1)",
            "Select",
            priority=True,
            id="session.select-up",
            tooltip="Select a turn (then p, y, t copy its prompt, reply, tool output)",
        ),
        Binding("alt+down", "select(1)", "Select", show=False, priority=True, id="session.select-down"),
        Binding(
            "ctrl+f",
            "find",
            "Find",
            priority=True,
            id="session.find",
            tooltip="Find text in the whole session (/find TEXT)",
        ),
        Binding("p", "copy('prompt')", "Copy prompt", id="session.copy-prompt"),
        Binding("y", "copy('reply')", "Copy reply", id="session.copy-reply"),
        Binding("t", "copy('tool')", "Copy output", id="session.copy-tool"),
        Binding("o", "open_output", "Open", id="session.open-output", tooltip="The whole reply in a pager"),
        Binding("enter", "toggle_tools", "Tool output", id="session.toggle-tools"),
        Binding(
            "d",
            "open_files",
            "Files",
            show=False,
            id="session.open-files",
            tooltip="What the selected turn did to the session's files (its diff) in a pager",
        ),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._hits: list[SearchHit] = []
        """The matches of the search shown."""
        self._hit = 0
        self._total = 0
        self.open_at: tuple[int, str] | None = None
        """The turn to show once attached, and the text to highlight in it
        (``tui attach ID --turn N --find TEXT``)."""
        self.searcher: Searcher | None = None
        """Searches every session of the machine (None: this app cannot, and /search says so)."""
        self.open_elsewhere: Callable[[FoundHit, str], None] | None = None
        """Opens a hit of another session (the app leaves this one for it)."""

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """A toast; its text is never read as Rich markup (it holds prompts, answers, reasons), and
        its control characters are shown, never sent to the terminal."""
        shown, title = visible(message), visible(title)
        super().notify(shown, title=title, severity=severity, timeout=timeout, markup=markup)

    # --- getters -------------------------------------------------------------------------------
    @property
    def transcript(self) -> TranscriptView:
        return self.query_one("#transcript", TranscriptView)

    @property
    def search_bar(self) -> SearchBar:
        return self.query_one("#search", SearchBar)

    @property
    def reading(self) -> bool:
        """Whether a turn is selected or the search bar is open (Esc leaves that first)."""
        if not self.is_mounted:
            return False
        return self.transcript.selected is not None or self.search_bar.is_open

    @property
    def prompt(self) -> PromptArea:
        return self.query_one("#prompt", PromptArea)

    @property
    def prompt_box(self) -> PromptBox:
        return self.query_one("#prompt-box", PromptBox)

    @property
    def status(self) -> StatusRows:
        return self.query_one("#status", StatusRows)

    def _failed(self, what: str, exc: TuiError) -> None:
        """Every failed request is shown here, in one way."""
        self.notify(str(exc), title=f"{exc.title}: {what}", severity="error")

    # --- reading the transcript ------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("copy", "open_output", "toggle_tools"):
            return self.is_mounted and self.transcript.selected is not None
        if action == "scroll_bottom" and parameters:  # shown only while away from the bottom
            if not self.is_mounted:
                return False
            transcript = self.transcript
            away, new = not transcript.following, transcript.unseen > 0
            return away and new if parameters[0] == "new" else away and not new
        return True

    def action_scroll_page(self, direction: int) -> None:
        if direction < 0:
            self.transcript.action_page_older()
        else:
            self.transcript.action_page_newer()

    def action_scroll_lines(self, lines: int) -> None:
        self.transcript.scroll_lines(lines)

    def action_scroll_top(self) -> None:
        self.transcript.action_top()

    def action_scroll_bottom(self, shown: str = "") -> None:
        self.transcript.action_bottom()

    def action_select(self, step: int) -> None:
        transcript = self.transcript
        transcript.move_selection(step)
        if transcript.selected is not None:
            transcript.focus()
        self.refresh_bindings()

    def leave_reading(self) -> None:
        """Esc while reading: close the search (and its highlights), leave the selection."""
        transcript = self.transcript
        if self.search_bar.is_open:
            self.search_bar.close()
            transcript.set_highlight("")
            self._hits = []
        transcript.select(None)
        if self.prompt_box.display:
            self.prompt.focus()
        else:
            transcript.focus()
        self.refresh_bindings()

    def _selected_record(self) -> TurnRecord | None:
        """The selected turn's record: the running one as the reducer keeps it (its reply and
        its calls' output so far), an ended one as drawn."""
        view = self.transcript.selected_turn
        if view is None:
            return None
        running = self.running_record()
        return running if running is not None and running.turn_id == view.record.turn_id else view.record

    def running_record(self) -> TurnRecord | None:
        """The running turn's record as the session's state keeps it (None: none runs)."""
        return None

    def action_copy(self, what: str) -> None:
        record = self._selected_record()
        if record is None:
            return
        if what == "prompt":
            text, name = record.prompt, "prompt"
        elif what == "reply":
            text, name = record.reply, "reply"
        else:
            text, name = "\n".join(t.output for t in record.tools if t.output), "tool output"
        number = getattr(record, "number", 0)
        turn = f"turn {number}" if number else "the selected turn"
        if not text:
            self.notify(f"{turn.capitalize()} has no {name}.", title="Nothing copied", severity="warning")
            return
        self.app.copy_to_clipboard(text)
        lines = len(text.splitlines())
        self.notify(
            f"The {name} of {turn}: {lines} line{'s' if lines != 1 else ''}, {len(text)} characters.",
            title="Copied",
        )

    def action_toggle_tools(self) -> None:
        view = self.transcript.selected_turn
        if view is None:
            return
        if not view.has_tools():  # Enter would do nothing: say why, as `t` does
            number = getattr(view.record, "number", 0)
            turn = f"Turn {number}" if number else "The selected turn"
            self.notify(f"{turn} has no tool output.", title="Nothing to show", severity="warning")
            return
        view.action_toggle_tools()

    def action_open_output(self) -> None:
        record = self._selected_record()
        if record is None:
            return
        title = clip(record.prompt, 60)
        self.app.push_screen(OutputPager(self.link, record.turn_id, call_id=None, title=title))

    def action_open_files(self) -> None:
        record = self._selected_record()
        if record is None:
            return
        title = f"turn {record.number} · files" if record.number else "files"
        self.app.push_screen(OutputPager(self.link, record.turn_id, title=title, files=True))

    @on(TextArea.Changed, "#prompt")
    def _typing(self) -> None:
        """Typing a prompt goes back to the live bottom (a prompt cleared by sending is not typing)."""
        transcript = self.transcript
        if not self.prompt.text:
            return
        if transcript.selected is not None:
            transcript.select(None)
        self.follow_bottom()

    def follow_bottom(self) -> None:
        """Back to the live bottom, following it (typing, sending a prompt), unless it does."""
        transcript = self.transcript
        if not transcript.following or transcript.scroll_y < transcript.max_scroll_y:
            self.run_worker(transcript.to_live_end(), group="transcript-window", exit_on_error=False)

    def action_find(self) -> None:
        self.open_search("")

    # --- search across sessions ----------------------------------------------------------------
    def search_sessions(self, text: str) -> None:
        """``/search TEXT``: find text in every session, and open the hit chosen where it was."""
        if self.searcher is None:
            self.notify("searching every session needs `tui search TEXT` here", severity="warning")
            return

        def chosen(picked: tuple[FoundHit, str] | None) -> None:
            if picked is None:
                return
            hit, searched = picked
            if hit.session_id == self.link.session_id:
                self.open_turn(hit.turn, searched)
            elif self.open_elsewhere is not None:
                self.open_elsewhere(hit, searched)

        self.app.push_screen(Finder(self.searcher, text), chosen)

    def opened(self) -> None:
        """Once attached: show the turn `open_at` asks for."""
        if self.open_at is not None:
            number, text = self.open_at
            self.open_at = None
            self.open_turn(number, text)

    @work(group="search", exclusive=True, exit_on_error=False)
    async def open_turn(self, number: int, text: str = "") -> None:
        """Select turn `number` and highlight `text` in it (the search bar open on its matches)."""
        try:
            turn_id = await turn_numbered(self.link, number)
        except TuiError as exc:
            self._failed("open that turn", exc)
            return
        if turn_id is None:
            self.notify(f"this session has no turn {number}", severity="warning")
            return
        if text.strip():
            bar = self.search_bar
            bar.open(text)
            bar.searched = text
            self.refresh_bindings()
            try:
                result = visible_data(await self.link.search(text))
            except TuiError:
                result = None
            hits = [] if result is None else list(result.hits)
            at = next((i for i, hit in enumerate(hits) if hit.turn_id == turn_id), None)
            self.transcript.set_highlight(text)
            if result is not None and at is not None:
                self._hits, self._hit, self._total = hits, at, result.total
                await self._go_to_hit()
                return
            bar.show_count(f"turn {number}")
        await self.transcript.go_to(turn_id)

    def open_search(self, text: str) -> None:
        """Open the search bar; with `text`, search for it at once (as Enter in the bar does)."""
        bar = self.search_bar
        bar.open(text)
        if text.strip():
            bar.searched = text
            self._search(text)
        self.refresh_bindings()

    @on(SearchBar.Find)
    def _find(self, message: SearchBar.Find) -> None:
        self._search(message.text)

    @on(SearchBar.Step)
    def _step(self, message: SearchBar.Step) -> None:
        if not self._hits:
            return
        self._hit = (self._hit + message.step) % len(self._hits)
        self._show_hit()

    @work(group="search", exclusive=True, exit_on_error=False)
    async def _search(self, text: str) -> None:
        bar = self.search_bar
        bar.show_count("searching…")
        try:
            result = visible_data(await self.link.search(text))
        except TuiError as exc:
            bar.show_count("")
            self._failed("search", exc)
            return
        self._hits, self._hit, self._total = list(result.hits), 0, result.total
        if not self._hits:
            self.transcript.set_highlight("")
            bar.show_count("no match")
            return
        self.transcript.set_highlight(text)
        await self._go_to_hit()

    @work(group="search", exclusive=True, exit_on_error=False)
    async def _show_hit(self) -> None:
        await self._go_to_hit()

    async def _go_to_hit(self) -> None:
        hit: SearchHit = self._hits[self._hit]
        more = "+" if self._total > len(self._hits) else ""
        count = f"{self._hit + 1} of {self._total}{more} · {hit.where}"
        self.search_bar.show_count(count)
        if not await self.transcript.go_to(hit.turn_id):
            self.search_bar.show_count(f"{self._hit + 1} of {self._total}{more} · not loaded")
            return
        view = self.transcript.selected_view
        if view is not None and hit.where == "tool" and not view.expanded:
            view.expanded = True  # the match is in a call: its output shows
        if view is not None:
            self.call_after_refresh(self._say_if_folded, view, hit, count)

    def _say_if_folded(self, view: TurnView, hit: SearchHit, count: str) -> None:
        """A match in the lines a long output folds away is not on the screen: the count says
        which line it is, so the reader knows where (the fold line says how to open it all)."""
        text = self.search_bar.searched.lower()
        if not text or hit.where == "prompt" or not view.is_attached or _draws(view, text):
            return
        record = view.record
        source = record.reply if hit.where == "reply" else "\n".join(t.output for t in record.tools)
        at = source.lower().find(text)
        if at < 0:
            return
        line = source.count("\n", 0, at) + 1
        self.search_bar.show_count(f"{count} line {line:,} (folded)")  # "1 of 2 · reply line 501 (folded)"


async def turn_numbered(link: AttachLink, number: int, page: int = 200) -> str | None:
    """The id of the session's turn `number` (1-based), read from its transcript's pages: the
    last page first, else from the first page on (None: the session has no such turn)."""
    last = await link.transcript(page)
    for record in [*last.turns, *([last.current] if last.current is not None else [])]:
        if record.number == number:
            return record.turn_id
    if last.turns and last.turns[0].number < number:
        return None
    transcript = await link.transcript(page, first=True)
    while True:
        for record in transcript.turns:
            if record.number == number:
                return record.turn_id
        if not transcript.turns or transcript.turns[-1].number > number or not transcript.has_newer:
            return None
        transcript = await link.transcript(page, after=transcript.turns[-1].turn_id)


def _draws(view: TurnView, text: str) -> bool:
    """Whether `view` draws `text` (lower case) on one of its lines at its width, below its
    prompt (a hit in the reply or a call is not the one a prompt shows)."""
    width = view.content_size.width
    return any(text in strip.text.lower() for block in view.blocks[1:] for strip in block.lines(view, width))


def clip(text: str, limit: int = 40) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
