"""The transcript: one scroll view drawing the session's turns a line at a time.

The view is a Textual `ScrollView`: nothing inside it is a widget. It holds a stretch of the
session (at most `KEEP` records, `items`), each drawn by a `TurnView` (or a `NoteLine`) whose
lines are made once per width and kept, then the running turn (`LiveTurn`) at the bottom. Its
height is the sum of theirs; a turn not yet drawn counts what it last measured (or a guess) until
it is measured: what shows at once, on the loop; the rest (a page that arrived above the view,
every turn after a resize) in a thread, after which the view lays out again with true heights.

Every change keeps the reader's place: the entry at the top of the view (the *pin*) stays on its
row while others are measured, added or dropped above it; while the reader follows the bottom,
the view stays at the bottom instead. A running turn's new output makes only its own lines again
and moves the scroll offset; nothing else is laid out or drawn again.

Reaching the top of what is kept fetches older turns from the worker (`before=`), the bottom
newer ones (`after=`); records far from the view are dropped and fetched again when the reader
comes back, so memory stays flat however far the reader goes. Ctrl+Home goes to the session's
first turn at once, fetching what it needs; Ctrl+End back to the live bottom. What is kept and
how it is paged is `Paging`'s (`tui/ui/widgets/paging.py`), mixed into the view.

A turn can be selected from the keyboard (`select`, `move_selection`); the session screen copies
its pieces and opens its output. What the keys do is `Selecting`'s (`tui/ui/widgets/selecting.py`),
mixed into the view. `go_to` brings any turn of the session into view (fetching the page around
it), which is how a search jumps to a match.
"""

from __future__ import annotations

import asyncio
import threading
import time
from bisect import bisect_right
from typing import Any

from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget
from textual.worker import Worker, WorkerState

from tui.ui.widgets.lines import mark_matches
from tui.ui.widgets.live import LiveTurn
from tui.ui.widgets.paging import KEEP, PAGE, WINDOW, EdgeLine, Fetch, Item, Paging
from tui.ui.widgets.rows import live_row, selected_row, styled
from tui.ui.widgets.selecting import Selecting
from tui.ui.widgets.turn import Drawn, NoteLine, TurnView

__all__ = ["KEEP", "PAGE", "WINDOW", "Fetch", "NoteLine", "TranscriptView"]


MEASURE_FOR = 0.004
"""Seconds of measuring the entries above the view's top on the loop when a page arrives (the
rest are measured in a thread)."""
LIVE_SCREENS = 3
"""How many screens' worth of the running turn's rows are kept as drawn (a row that only moved is
not made again); then they are dropped and the rows in view made once more. Each drawn row is a
Textual `Strip` of about ten objects the garbage collector walks: 2,000 rows kept made its full
collections take 20 ms more while a turn streamed."""
WHOLE = ("transcript--", "diff--", "turn--thinking")
"""Component classes whose colours are blended with the view's background (as a widget's are)."""


def _guess(drawn: Drawn) -> int:
    """The height of an entry never drawn: a few lines for a turn, its lines for a note."""
    if isinstance(drawn, TurnView):
        record = drawn.record
        reply = record.reply.rstrip("\n")
        return 2 + (min(40, reply.count("\n") + 1) if reply else 0) + len(record.tools)
    return 2


class TranscriptView(Paging, Selecting, ScrollView, can_focus=True):
    """Every turn of the session, newest at the bottom, drawn a line at a time."""

    BINDINGS = [
        Binding("up", "select_move(-1)", "Previous turn", show=False),
        Binding("down", "select_move(1)", "Next turn", show=False),
        Binding("pageup", "page_older", "Page up", show=False),
        Binding("pagedown", "page_newer", "Page down", show=False),
        Binding("home", "top", "Top", show=False),
        Binding("end", "bottom", "Bottom", show=False),
    ]

    DEFAULT_CSS = """
    TranscriptView { height: 1fr; padding: 0 1 0 1; scrollbar-size-vertical: 1; overflow-x: hidden; }
    TranscriptView:focus { background-tint: $foreground 0%; }
    TranscriptView > .transcript--edge { color: $text-muted; }
    TranscriptView > .transcript--hello { color: $text-muted; }
    TranscriptView > .transcript--note { color: $text-muted; }
    TranscriptView > .transcript--output { color: $text-muted; }
    TranscriptView > .transcript--selected { background: $boost; }
    TranscriptView > .transcript--bar { color: $accent; }
    TranscriptView > .turn--prompt { color: $text; text-style: bold; }
    TranscriptView > .turn--who { color: $text-muted; }
    TranscriptView > .turn--mark { color: $accent; text-style: bold; }
    TranscriptView > .turn--tool { color: $text-secondary; }
    TranscriptView > .turn--output { color: $text-muted; }
    TranscriptView > .turn--thinking { color: $text-muted; text-style: italic; }
    TranscriptView > .turn--failed { color: $text-error; text-style: bold; }
    TranscriptView > .turn--interrupted { color: $text-warning; text-style: bold; }
    TranscriptView > .lines--match { background: $warning 60%; color: $text; }
    TranscriptView > .lines--fold { color: $text-muted; text-style: italic; }
    TranscriptView > .diff--header { text-style: bold; }
    TranscriptView > .diff--hunk { color: $text-accent; }
    TranscriptView > .diff--removed { color: $text-error; }
    TranscriptView > .diff--added { color: $text-success; }
    TranscriptView > .plan--completed { color: $text-muted; }
    TranscriptView > .plan--in_progress { color: $text-warning; text-style: bold; }
    TranscriptView > .plan--pending { color: $text; }
    """
    COMPONENT_CLASSES = {
        "transcript--edge",
        "transcript--hello",
        "transcript--note",
        "transcript--output",
        "transcript--selected",
        "transcript--bar",
        "turn--prompt",
        "turn--who",
        "turn--mark",
        "turn--tool",
        "turn--output",
        "turn--thinking",
        "turn--failed",
        "turn--interrupted",
        "lines--match",
        "lines--fold",
        "diff--header",
        "diff--hunk",
        "diff--removed",
        "diff--added",
        "plan--completed",
        "plan--in_progress",
        "plan--pending",
    }

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.items: list[Item] = []
        """The turn records (and lines) the app keeps: a contiguous stretch of the session."""
        self.has_more = False
        """Whether the session has turns older than the kept ones."""
        self.has_newer = False
        """Whether the session has ended turns newer than the kept ones (dropped, or not fetched)."""
        self._older = EdgeLine("transcript--edge", centre=True)
        self._edge_says: tuple[str | None, str | None] = ("loading the transcript…", None)
        """What the edge lines say instead of what more there is (that it loads)."""
        self._hello = EdgeLine("transcript--hello", centre=False)
        self._newer = EdgeLine("transcript--edge", centre=True)
        self.live: LiveTurn | None = None
        self.verbatim = False
        """Whether replies are program output (the python agent), shown as printed."""
        self.fetch: Fetch | None = None
        """Where older and newer turns come from (the session's link)."""
        self.selected: str | None = None
        """The selected turn's id."""
        self.highlight = ""
        """The text highlighted in every turn shown (a search)."""
        self._window = asyncio.Lock()
        """One change of what is kept at a time."""
        self._fetching = False
        self._epoch = 0
        """Counts the times `items` was replaced: a page fetched for an earlier one is dropped."""
        self._arrived = 0
        """Counts what arrived at the session's end (ended turns, lines): a page fetched while it
        changed may lack the newest."""
        self._reaching_end = False
        """Whether `to_live_end` is on its way (typing asks for it at each key)."""
        self.unseen = 0
        """Turns that arrived while the reader was away from the bottom (the footer says so)."""
        self._away: tuple[bool, bool] = (False, False)
        """Whether the reader is away from the bottom, and new turns arrived: as the keys last said."""
        # what is drawn, and where
        self._entries: list[Drawn] = []
        self._index: dict[int, int] = {}
        """Each entry's position in `_entries`, by its id()."""
        self._heights: list[int] = []
        self._starts: list[int] = []
        self._total = 0
        self._width = 0
        self._follow = True
        """Whether the view stays at the bottom (the reader has not scrolled away)."""
        self._pin: tuple[Drawn, int] | None = None
        """The entry at the top of the view and how far into it the view starts."""
        self._placing = False
        self._measuring = False
        self._styles: dict[str, Style] = {}
        self._styles_for_thread: dict[str, Style] = {}
        """The styles as the thread making lines reads them (taken on the loop before it starts)."""
        self._base: Style | None = None
        self._live_lines: dict[int, tuple[Strip, int, Strip]] = {}
        """The running turn's rows as drawn, by the line they draw (kept with it and the width)."""
        self.draws = 0
        """How many lines were drawn (each `render_line`), for tests and benchmarks."""
        self.made_in_thread = 0
        """How many entries made their lines in a thread, not on the app's loop (for tests)."""

    # --- as a host of drawn entries --------------------------------------------------------------
    @property
    def session_id(self) -> str | None:
        """The session shown (named in the fold line), when the screen has a link."""
        link = getattr(self.screen, "link", None) if self.is_attached else None
        session = getattr(link, "session_id", None)
        return session if isinstance(session, str) else None

    def style_of(self, name: str) -> Style:
        """The Rich style of one of the view's component classes."""
        style = self._styles.get(name)
        if style is None and threading.current_thread() is not threading.main_thread():
            return self._styles_for_thread.get(name) or Style()  # Textual's styles are the loop's
        if style is None:
            if name.startswith(WHOLE):  # drawn by widgets of their own before: colours as blended
                whole = self.get_component_rich_style(name)
                if name == "transcript--selected":
                    style = Style(bgcolor=whole.bgcolor)
                else:
                    style = Style(color=whole.color, bold=whole.bold, italic=whole.italic, dim=whole.dim)
            else:
                style = self.get_component_rich_style(name, partial=True)
            self._styles[name] = style
        return style

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._base = None
        self._live_lines.clear()

    @property
    def line_width(self) -> int:
        """The width the entries' lines are made at (a selected turn's: one less, for its bar)."""
        return max(2, self.scrollable_content_region.width)

    def _w(self, entry: Drawn) -> int:
        return max(1, self._width - 1 if entry.classes else self._width)

    def place_of(self, drawn: Drawn) -> Region | None:
        """Where `drawn` is in the view's whole height; None when it is not drawn."""
        i = self._index.get(id(drawn))
        if i is None or self._entries[i] is not drawn or i >= len(self._starts):
            return None
        return Region(0, self._starts[i], self._w(drawn), self._heights[i])

    def screen_region_of(self, drawn: Drawn) -> Region:
        place = self.place_of(drawn)
        if place is None:
            return Region()
        content = self.scrollable_content_region
        return Region(
            content.x + self.line_width - place.width,
            content.y + self._pad + place.y - round(self.scroll_y),
            place.width,
            place.height,
        )

    def drawn_changed(self, drawn: Drawn) -> None:
        """An entry's lines changed (the running turn streamed, a turn's tools opened): measure it
        again and draw what shows of it; nothing else is made again."""
        i = self._index.get(id(drawn))
        if i is None or self._entries[i] is not drawn or not self._width:
            return
        height = len(drawn.lines(self._w(drawn)))
        if height != self._heights[i]:
            self._set_height(i, height)
            self._place()
            if self._pad:  # what is above moves down too
                self.refresh()
                return
        top = self._starts[i] - round(self.scroll_y)
        view = self.scrollable_content_region.height
        if top < view and top + height > 0:
            self.refresh(Region(0, max(0, top), self.size.width, min(view, top + height) - max(0, top)))

    def _set_height(self, i: int, height: int) -> None:
        delta = height - self._heights[i]
        self._heights[i] = height
        starts = self._starts
        for k in range(i + 1, len(starts)):
            starts[k] += delta
        self._total += delta
        self._set_virtual_height(self._total)

    def _set_virtual_height(self, total: int) -> None:
        """The whole height changed (the running turn grew, the view was resized): the scrollbar
        is told, and nothing is laid out or drawn again, unless the scrollbar appears or goes (as
        a `Log` does it lays out again only then; the width alone never needs it: nothing scrolls
        sideways)."""
        size = Size(self.line_width, total)
        view = self.container_size.height
        old = self.virtual_size
        if (old.height > view) != (total > view):
            self.virtual_size = size
            return
        self.set_reactive(Widget.virtual_size, size)
        self._placing = True
        try:
            self._scroll_update(size)
        finally:
            self._placing = False

    # --- what is drawn ------------------------------------------------------------------------------
    def _rebuild(self) -> None:
        """Put the entries in order again (the kept items, the edges, the running turn) and lay
        them out, keeping the reader's place."""
        self._show_edges_text()
        entries: list[Drawn] = []
        if self._older.text:
            entries.append(self._older)
        if self._hello.text and self.live is None and not any(i.record for i in self.items):
            entries.append(self._hello)
        for item in self.items:
            entries.append(self._drawn(item))
        if self._newer.text:
            entries.append(self._newer)
        if self.live is not None and self.at_live_end:
            entries.append(self.live)
        for entry in entries:
            entry.host = self
        self._entries = entries
        self._index = {id(e): i for i, e in enumerate(entries)}
        self._layout()

    def _drawn(self, item: Item) -> Drawn:
        if item.drawn is None:
            if item.record is not None:
                view = TurnView(item.record, item.parts, verbatim=self.verbatim)
                item.parts = None
                item.drawn = view
            else:
                item.drawn = NoteLine(item.line)
        drawn = item.drawn
        if isinstance(drawn, TurnView):
            drawn.classes = {"-selected"} if drawn.record.turn_id == self.selected else set()
            drawn.highlight = self.highlight
        return drawn

    def _height(self, entry: Drawn, width: int) -> int:
        width = self._w(entry)
        if entry.made_at(width):
            return len(entry.lines(width))
        made = list(entry._made.values())  # a copy: the thread measuring may add one meanwhile
        return len(made[0]) if made else _guess(entry)

    def _layout(self, *, quiet: bool = False) -> None:
        """Measure what the view shows (and a screen around it), set the whole height, and scroll
        so that the pinned entry stays on its row (or the bottom stays in view). `quiet`: only
        entries out of view changed (they were measured): nothing is drawn again unless the view
        moved."""
        if not self.is_mounted or self.scrollable_content_region.width <= 1:
            return
        width = self.line_width
        if width != self._width:
            self._width = width
        entries = self._entries
        view = max(1, self.scrollable_content_region.height)
        pin = None if self._follow else (self._pin or self._pin_at(round(self.scroll_y)))
        heights = [self._height(e, width) for e in entries]
        # measure exactly what will show: from the pin down (or the bottom up), and a screen around
        if pin is not None and id(pin[0]) in self._index and entries[self._index[id(pin[0])]] is pin[0]:
            at = self._index[id(pin[0])]
            reach = pin[1] + 2 * view
            k = at
            while k < len(entries) and reach > 0:
                heights[k] = len(entries[k].lines(self._w(entries[k])))
                reach -= heights[k]
                k += 1
            reach = view
            k = at - 1
            budget = time.perf_counter() + MEASURE_FOR  # the rest above: made in a thread
            while k >= 0 and reach > 0 and time.perf_counter() < budget:
                heights[k] = len(entries[k].lines(self._w(entries[k])))
                reach -= heights[k]
                k -= 1
        else:
            pin = None
            reach = 2 * view
            k = len(entries) - 1
            while k >= 0 and reach > 0:
                heights[k] = len(entries[k].lines(self._w(entries[k])))
                reach -= heights[k]
                k -= 1
        starts, y = [], 0
        for h in heights:
            starts.append(y)
            y += h
        self._heights, self._starts, self._total = heights, starts, y
        self._set_virtual_height(y)  # the screen is laid out again only when the scrollbar comes or goes
        self._place(pin)
        if not quiet:
            self.refresh()
        if not self._measuring and any(not e.made_at(self._w(e)) for e in entries):
            self._measuring = True
            self.call_after_refresh(self._measure_rest)

    def _measure_rest(self) -> None:
        """Make the lines of the entries not yet drawn in a thread (the loop stays free for keys
        and frames), then lay out again with their true heights, so that the scrollbar soon tells
        the true height of what is kept."""
        todo = [
            (e, self._w(e))
            for e in self._entries
            if not isinstance(e, LiveTurn) and not e.made_at(self._w(e))
        ]
        if not todo or not self.is_mounted:
            self._measuring = False
            return
        for name in self.COMPONENT_CLASSES:  # looked up here, on the loop: the thread only reads them
            self.style_of(name)
        self._styles_for_thread = dict(self._styles)
        _ = self.app.console  # made here too
        self.run_worker(self._measure_in_thread(todo), group="transcript-measure", exit_on_error=False)

    async def _measure_in_thread(self, todo: list[tuple[Drawn, int]]) -> None:
        try:
            await asyncio.to_thread(self._make_lines, todo)
        finally:
            self._measuring = False
        if self.is_mounted:
            self._layout(quiet=True)

    def _make_lines(self, todo: list[tuple[Drawn, int]]) -> None:
        """Make each entry's lines at its width (in a thread)."""
        for entry, width in todo:
            if not entry.made_at(width):
                entry.lines(width)
                if threading.current_thread() is not threading.main_thread():
                    self.made_in_thread += 1

    def _pin_at(self, y: int) -> tuple[Drawn, int] | None:
        if not self._entries or not self._starts:
            return None
        i = max(0, min(len(self._entries) - 1, bisect_right(self._starts, y) - 1))
        return self._entries[i], y - self._starts[i]

    def _place(self, pin: tuple[Drawn, int] | None = None) -> None:
        """Scroll to the bottom when following, else to where the pin is."""
        view = self.scrollable_content_region.height
        top = max(0, self._total - view)
        if not self._follow:
            pin = pin or self._pin
            i = self._index.get(id(pin[0])) if pin is not None else None
            if pin is not None and i is not None and self._entries[i] is pin[0]:
                top = min(top, self._starts[i] + min(pin[1], max(0, self._heights[i] - 1)))
            else:
                top = min(top, round(self.scroll_y))
        self._placing = True
        try:
            self.scroll_y = top
        finally:
            self._placing = False
        self._pin = self._pin_at(round(self.scroll_y))
        self._away_changed()

    @property
    def following(self) -> bool:
        """Whether the view follows the live bottom (new output shows as it comes)."""
        return self._follow and self.at_live_end

    def _away_changed(self) -> None:
        """The keys on offer say when the reader is away from the bottom (Ctrl+End goes back),
        and that new turns arrived meanwhile; worked out again only when that changes."""
        if self.following:
            self.unseen = 0
        away = (not self.following, self.unseen > 0)
        if away != self._away:
            self._away = away
            if self.is_attached:
                self.screen.refresh_bindings()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if self._placing:
            return
        if round(new) < round(old) and round(new) < self.max_scroll_y:  # not a clamp: the view grew
            self._follow = False
        elif new >= self.max_scroll_y and self.at_live_end:
            self._follow = True
        self._pin = self._pin_at(round(new))
        self._away_changed()
        if self._entries and self._unmeasured_in_view():
            self._layout()
        self._near_edges()

    def _unmeasured_in_view(self) -> bool:
        top = round(self.scroll_y)
        bottom = top + self.scrollable_content_region.height
        i = max(0, bisect_right(self._starts, top) - 1)
        while i < len(self._entries) and self._starts[i] < bottom:
            if not self._entries[i].made_at(self._w(self._entries[i])):
                return True
            i += 1
        return False

    def _near_edges(self) -> None:
        """Fetch the next page before the reader reaches an end of what is kept."""
        if self._window.locked() or self._fetching:
            return
        view = self.scrollable_content_region.height
        if self.scroll_y <= view and self.has_more:
            self.load_older()
        elif self.scroll_y >= self.max_scroll_y - view and self.has_newer:
            self.load_newer()

    def on_resize(self, event: events.Resize) -> None:
        self._layout()

    def render_lines(self, crop: Region) -> list[Strip]:
        if self._entries and self.line_width != self._width:
            # Resized: the frame that shows the new size is drawn before the view hears of it
            # (its Resize event comes after), so what shows is made at the new width now.
            self._layout(quiet=True)
        return super().render_lines(crop)

    def on_mount(self) -> None:
        self._rebuild()

    def render_line(self, y: int) -> Strip:
        self.draws += 1
        base = self._base
        if base is None:
            base = self._base = self.rich_style
        width = self._width or self.line_width
        at = y + round(self.scroll_y) - self._pad
        i = bisect_right(self._starts, at) - 1
        if i < 0 or at >= self._total:
            return Strip.blank(width, self._blank_style)  # the view's own background, as its padding
        entry = self._entries[i]
        width = self._w(entry)
        made = entry.made_at(width)
        lines = entry.lines(width)
        if not made and len(lines) != self._heights[i]:
            self.call_later(self._layout)  # measured only now: lay out again
        k = at - self._starts[i]
        strip = lines[k] if k < len(lines) else Strip.blank(0)
        if not strip.cell_length and not entry.classes:
            return Strip.blank(width, self._blank_style)  # a blank line between turns: as padding
        if entry.highlight:
            strip = mark_matches(strip, entry.highlight.lower(), self.style_of("lines--match"))
        if entry.classes:
            selected = self.style_of("transcript--selected")
            return selected_row(strip, width, base, selected, self.style_of("transcript--bar"))
        if isinstance(entry, LiveTurn):  # its margins are background, as its widgets' were
            kept = self._live_lines.get(id(strip))
            if kept is not None and kept[0] is strip and kept[1] == width:
                return kept[2]  # a row that only moved (the running turn grew below it)
            line = live_row(strip, base, self._blank_style, width)
            if len(self._live_lines) >= LIVE_SCREENS * max(1, self.size.height):
                self._live_lines.clear()
            self._live_lines[id(strip)] = (strip, width, line)
            return line
        return styled(strip, base)

    @property
    def _blank_style(self) -> Style:
        base = self._base or self.rich_style
        return Style(bgcolor=base.bgcolor)

    @property
    def _pad(self) -> int:
        """Blank lines above the entries when they do not fill the view (they sit at its bottom)."""
        return max(0, self.scrollable_content_region.height - self._total)

    def on_click(self, event: events.Click) -> None:
        at = event.y + round(self.scroll_y) - self._pad
        i = bisect_right(self._starts, at) - 1
        if 0 <= i < len(self._entries):
            entry = self._entries[i]
            if isinstance(entry, TurnView | LiveTurn) and entry.has_tools():
                entry.action_toggle_tools()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A page that failed in a way its code did not expect is said, as the screen says its
        own (a `TuiError` is said where it happens); the transcript keeps what it shows."""
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        what = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        self._show_edges()
        self.notify(what, title="Unexpected error (the session keeps running)", severity="error")

    def show_hello(self, text: str) -> None:
        """The line an empty session shows until its first turn: where it is, what to type."""
        self._hello.say(text)
        self._rebuild()

    # --- the reader's place ------------------------------------------------------------------
    def release_anchor(self) -> None:
        """Stop following the bottom (the reader scrolled or selected)."""
        self._follow = False
        self._pin = self._pin_at(round(self.scroll_y))
        self._away_changed()

    def scroll_to_widget(self, widget: Widget | Drawn, **kwargs: Any) -> bool:
        """Bring `widget` into view: an entry drawn here (a turn) or, as for any container, a
        widget."""
        if isinstance(widget, Drawn):
            return self._show_entry(widget, top=bool(kwargs.get("top")))
        return super().scroll_to_widget(widget, **kwargs)

    def _show_entry(self, drawn: Drawn, *, top: bool = False, centre: bool = False) -> bool:
        i = self._index.get(id(drawn))
        if i is None or self._entries[i] is not drawn:
            return False
        self.release_anchor()
        view = self.scrollable_content_region.height
        for step in (-1, 1):  # measured, with a screen's worth around it
            k, reach = i, view
            while 0 <= k < len(self._entries) and reach > 0:
                entry = self._entries[k]
                reach -= len(entry.lines(self._w(entry)))
                k += step
        self._layout()
        start, height = self._starts[i], self._heights[i]
        view = self.scrollable_content_region.height
        y = round(self.scroll_y)
        if centre:
            y = start - max(0, (view - height) // 2)
        elif top or start < y or height > view:
            y = start
        elif start + height > y + view:
            y = start + height - view
        self.scroll_to(y=y, animate=False, immediate=True)
        return True
