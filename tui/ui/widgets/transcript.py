"""The transcript: ended turns as one cheap widget each, the running turn live at the bottom.

The app keeps a window of the session's turns (at most `KEEP` records, `items`) and mounts a
window of those (at most `WINDOW` widgets). Reaching the top of what is mounted mounts older
records, or fetches older turns from the worker (`before=`) when none are left; reaching the
bottom does the same with newer ones (`after=`). Records far from the view are dropped and
fetched again when the reader comes back, so memory stays flat however far the reader goes.

Paging in keeps the reader's place: the widget at the top of the view (one that stays mounted)
is measured before and after, and the view moves by what it moved. A line says when turns are
loading; the view is never left empty without one. The view stays anchored to the bottom while
the reader has not scrolled away.

A turn can be selected from the keyboard (`select`, `move_selection`); the session screen copies
its pieces and opens its output. `go_to` brings any turn of the session into view (fetching the
page around it), which is how a search jumps to a match.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from tui.errors import TuiError
from tui.protocol import Transcript, TurnRecord
from tui.ui.widgets.turn import LiveTurn, Part, TurnView, kept_lines

__all__ = ["KEEP", "PAGE", "WINDOW", "Fetch", "TranscriptView"]

WINDOW = 60
"""The most ended turns mounted at once."""
PAGE = 40
"""How many turns are mounted (or fetched) at a time when scrolling."""
KEEP = 200
"""The most turn records kept in the app; the others are fetched again when needed."""
FIRST = 12
"""Turns mounted first on attach (newest first), enough to fill a screen; the rest follow."""
CHUNK = 10
"""Turns mounted between two frames when paging, so that the loop never waits long for a page."""

Fetch = Callable[..., Awaitable[Transcript]]
"""`AttachLink.transcript`: ``fetch(limit, before=, after=, around=)``."""


@dataclass
class Item:
    """One entry of the transcript: an ended turn, or a line (a note, an unknown event)."""

    record: TurnRecord | None = None
    parts: list[Part] | None = None
    line: str = ""


def page_items(records: list[TurnRecord]) -> list[Item]:
    """The items of a page of turns: each turn after the notes said before it."""
    items: list[Item] = []
    for record in records:
        items += [Item(line=line.text) for line in record.lines if line.kind == "before"]
        items.append(Item(record=record))
    return items


class NoteLine(Static):
    """A line between turns: a note for the agent, an event this version does not know."""

    DEFAULT_CSS = """
    NoteLine { height: auto; color: $text-muted; padding: 0 0 1 0; }
    """


def set_highlight(view: TurnView, text: str) -> None:
    """Highlight `text` in `view` (`TurnView.highlight`; ``""`` for none)."""
    view.highlight = text


class TranscriptView(VerticalScroll):
    """Every turn of the session, newest at the bottom."""

    BINDINGS = [
        Binding("up", "select_move(-1)", "Previous turn", show=False),
        Binding("down", "select_move(1)", "Next turn", show=False),
        Binding("pageup", "page_older", "Page up", show=False),
        Binding("pagedown", "page_newer", "Page down", show=False),
        Binding("home", "top", "Top", show=False),
        Binding("end", "bottom", "Bottom", show=False),
    ]

    DEFAULT_CSS = """
    TranscriptView { height: 1fr; padding: 0 1 0 1; scrollbar-size-vertical: 1; }
    TranscriptView:focus { background-tint: $foreground 0%; }
    TranscriptView > #older, TranscriptView > #newer {
        color: $text-muted; height: auto; text-align: center;
    }
    TranscriptView > #hello { color: $text-muted; height: auto; display: none; }
    TranscriptView > TurnView.-selected { background: $boost; border-left: outer $accent; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.items: list[Item] = []
        """The turn records (and lines) the app keeps: a contiguous stretch of the session."""
        self.has_more = False
        """Whether the session has turns older than the kept ones."""
        self.has_newer = False
        """Whether the session has ended turns newer than the kept ones (dropped, or not fetched)."""
        self._lo = 0
        self._hi = 0
        self._older = Static("loading the transcript…", id="older", markup=False)
        self._hello = Static("", id="hello", markup=False)
        self._newer = Static("", id="newer", markup=False)
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
        """One change of what is mounted at a time."""
        self._fetching = False
        self._epoch = 0
        """Counts the times `items` was replaced: a page fetched for an earlier one is dropped."""

    def compose(self):  # type: ignore[no-untyped-def]
        yield self._older
        yield self._hello
        yield self._newer

    def on_mount(self) -> None:
        self._newer.display = False
        self.anchor()

    def show_hello(self, text: str) -> None:
        """The line an empty session shows until its first turn: where it is, what to type."""
        self._hello.update(text)
        self._hello.display = True

    # --- what is mounted -----------------------------------------------------------------------
    @property
    def mounted_turns(self) -> int:
        """How many ended turns are mounted now."""
        return self._hi - self._lo

    @property
    def at_live_end(self) -> bool:
        """Whether the newest ended turn is mounted (so the running turn follows it)."""
        return not self.has_newer and self._hi == len(self.items)

    def _widget(self, item: Item) -> Widget:
        if item.record is not None:
            view = TurnView(item.record, item.parts, verbatim=self.verbatim)
            if item.record.turn_id == self.selected:
                view.add_class("-selected")
            if self.highlight:
                set_highlight(view, self.highlight)
            return view
        return NoteLine(item.line, markup=False)

    def _ended_widgets(self) -> list[Widget]:
        return [w for w in self.children if isinstance(w, TurnView | NoteLine)]

    def turn_views(self) -> list[TurnView]:
        """The ended turns mounted now, oldest first."""
        return [w for w in self.children if isinstance(w, TurnView)]

    def _show_edges(self, *, older: str | None = None, newer: str | None = None) -> None:
        """The lines above and below the mounted turns: what more there is, or that it loads."""
        if older is None:
            hidden = self._lo
            if hidden or self.has_more:
                more = f"{hidden}{'+' if self.has_more else ''} older turns" if hidden else "older turns"
                older = f"↑ {more}: PgUp or scroll up to load"
        self._older.update(older or "")
        self._older.display = bool(older)
        if newer is None and not self.at_live_end:
            newer = "↓ newer turns: PgDn or scroll down to load · Ctrl+End: the live bottom"
        self._newer.update(newer or "")
        self._newer.display = bool(newer)
        if self.live is not None:
            self.live.display = self.at_live_end

    def _anchor(self) -> tuple[Widget, float] | None:
        """The first mounted turn reaching into the view, and how far its top is from the view's."""
        top = self.scroll_y
        for widget in self._ended_widgets():
            region = widget.virtual_region
            if region.bottom > top:
                return widget, region.y - top
        return None

    def _keep(self, anchor: tuple[Widget, float] | None) -> None:
        """Scroll so that `anchor`'s widget is where it was in the view."""
        if anchor is None:
            return
        widget, offset = anchor
        if widget.is_attached:
            self.scroll_to(y=widget.virtual_region.y - offset, animate=False, immediate=True)

    async def _refresh_then_keep(self, anchor: tuple[Widget, float] | None) -> None:
        done = asyncio.Event()

        def keep() -> None:
            self._keep(anchor)
            done.set()

        self.call_after_refresh(keep)
        await done.wait()

    @property
    def is_fetching(self) -> bool:
        """Whether turns are being fetched or mounted now."""
        return self._fetching or self._window.locked()

    # --- loading -------------------------------------------------------------------------------
    async def load(self, records: list[TurnRecord], *, has_more: bool, has_newer: bool = False) -> None:
        """Show a page of the session's turns (a fresh attach, or the live bottom again).

        The newest turns are mounted first, as many as fill a screen; the rest of the page follows.
        """
        async with self._window:
            self._epoch += 1
            self.items = page_items(records)
            self.has_more, self.has_newer = has_more, has_newer
            self._lo = max(0, len(self.items) - FIRST)
            self._hi = len(self.items)
            with self.app.batch_update():
                await self.remove_children(self._ended_widgets())
                await self.mount_all([self._widget(i) for i in self.items[self._lo :]], before=self._newer)
                self._show_edges()
            self.anchor()
        if self._lo > 0:
            self.call_after_refresh(self._more_after_load)

    def _more_after_load(self) -> None:
        self.run_worker(self._mount_older(PAGE - FIRST), group="transcript-window", exit_on_error=False)

    async def to_live_end(self) -> None:
        """Back to the live bottom: the newest turns, the running one, anchored."""
        if self.at_live_end:
            self.anchor()
            return
        if self.has_newer and self.fetch is not None:
            self._show_edges(newer="loading the newest turns…")
            try:
                page = await self.fetch(PAGE)
            except TuiError as exc:
                self._show_edges()
                self.notify(str(exc), title="Could not load the newest turns", severity="warning")
                return
            await self.load(page.turns, has_more=page.has_more)
            return
        async with self._window:
            self._lo = max(0, len(self.items) - PAGE)
            self._hi = len(self.items)
            with self.app.batch_update():
                await self.remove_children(self._ended_widgets())
                await self.mount_all([self._widget(i) for i in self.items[self._lo :]], before=self._newer)
                self._show_edges()
            self.anchor()

    async def _mount_older(self, count: int = PAGE) -> None:
        """Mount up to `count` kept records above the mounted ones, a chunk a frame, keeping the
        reader's place."""
        epoch = self._epoch
        while count > 0:
            async with self._window:
                if self._epoch != epoch:
                    return  # the kept records were replaced (a jump): what is mounted is theirs
                start = max(0, self._lo - min(count, CHUNK))
                new = [self._widget(i) for i in self.items[start : self._lo]]
                if not new:
                    return
                count -= len(new)
                anchor = self._anchor()
                with self.app.batch_update():
                    excess = self._hi - start - WINDOW  # made room for first: never more than WINDOW
                    if excess > 0:
                        await self.remove_children(self._ended_widgets()[-excess:])
                        self._hi -= excess
                    ended = self._ended_widgets()
                    await self.mount_all(new, before=ended[0] if ended else self._newer)
                    self._lo = start
                    self._show_edges()
                if not (self._anchored and not self._anchor_released and self.at_live_end):
                    await self._refresh_then_keep(anchor)  # else the anchor keeps the live bottom

    async def _mount_newer(self, count: int = PAGE) -> None:
        """Mount up to `count` kept records below the mounted ones, a chunk a frame, keeping the
        reader's place."""
        epoch = self._epoch
        while count > 0:
            async with self._window:
                if self._epoch != epoch:
                    return  # the kept records were replaced (a jump): what is mounted is theirs
                end = min(len(self.items), self._hi + min(count, CHUNK))
                new = [self._widget(i) for i in self.items[self._hi : end]]
                if not new:
                    return
                count -= len(new)
                anchor = self._anchor()
                with self.app.batch_update():
                    excess = end - self._lo - WINDOW
                    if excess > 0:
                        await self.remove_children(self._ended_widgets()[:excess])
                        self._lo += excess
                    await self.mount_all(new, before=self._newer)
                    self._hi = end
                    self._show_edges()
                await self._refresh_then_keep(anchor)

    def _oldest_id(self) -> str | None:
        return next((i.record.turn_id for i in self.items if i.record is not None), None)

    def _newest_id(self) -> str | None:
        return next((i.record.turn_id for i in reversed(self.items) if i.record is not None), None)

    async def _fetch_older(self) -> None:
        if self.fetch is None or self._fetching:
            return
        self._fetching = True
        self._show_edges(older="↑ loading older turns…")
        epoch, oldest = self._epoch, self._oldest_id()
        try:
            page = await self.fetch(PAGE, before=oldest)
        except TuiError as exc:
            self._show_edges()
            self.notify(str(exc), title="Could not load older turns", severity="warning")
            return
        finally:
            self._fetching = False
        async with self._window:
            if self._epoch != epoch or self._oldest_id() != oldest:
                self._show_edges()
                return  # the reader went elsewhere meanwhile: this page no longer joins on
            self.has_more = page.has_more
            older = page_items(page.turns)
            self.items[:0] = older
            self._lo += len(older)
            self._hi += len(older)
            drop = min(len(self.items) - KEEP, len(self.items) - self._hi)
            if drop > 0:  # the newest kept records, far below the view: fetched again when needed
                del self.items[-drop:]
                self.has_newer = True
        await self._mount_older()
        if not page.turns:
            self._show_edges()

    async def _fetch_newer(self) -> None:
        if self.fetch is None or self._fetching:
            return
        self._fetching = True
        self._show_edges(newer="↓ loading newer turns…")
        epoch, newest = self._epoch, self._newest_id()
        try:
            page = await self.fetch(PAGE, after=newest)
        except TuiError as exc:
            self._show_edges()
            self.notify(str(exc), title="Could not load newer turns", severity="warning")
            return
        finally:
            self._fetching = False
        async with self._window:
            if self._epoch != epoch or self._newest_id() != newest:
                self._show_edges()
                return
            self.has_newer = page.has_newer
            self.items.extend(page_items(page.turns))
            drop = min(len(self.items) - KEEP, self._lo)
            if drop > 0:  # the oldest kept records, far above the view
                del self.items[:drop]
                self._lo -= drop
                self._hi -= drop
                self.has_more = True
        await self._mount_newer()
        self._show_edges()

    def load_older(self) -> None:
        """Mount or fetch older turns, as scrolling to the top does."""
        if self._lo > 0:
            self.run_worker(self._mount_older(), group="transcript-window", exit_on_error=False)
        elif self.has_more:
            self.run_worker(self._fetch_older(), group="transcript-window", exit_on_error=False)

    def load_newer(self) -> None:
        """Mount or fetch newer turns, as scrolling to the bottom does."""
        if self._hi < len(self.items):
            self.run_worker(self._mount_newer(), group="transcript-window", exit_on_error=False)
        elif self.has_newer:
            self.run_worker(self._fetch_newer(), group="transcript-window", exit_on_error=False)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if self._window.locked():
            return
        if new <= 0 and (old > 0 or self.max_scroll_y == 0):
            self.load_older()
        elif new >= self.max_scroll_y and old < new and not self.at_live_end:
            self.load_newer()

    # --- keys ----------------------------------------------------------------------------------
    def scroll_lines(self, lines: int) -> None:
        """Scroll by `lines` (negative: up); past the first mounted turn, older ones load."""
        if lines < 0:
            self.release_anchor()
            if self.scroll_y <= 0:
                self.load_older()
                return
        elif self.scroll_y >= self.max_scroll_y and not self.at_live_end:
            self.load_newer()
            return
        self.scroll_to(y=self.scroll_y + lines, animate=False, immediate=True)

    def action_page_older(self) -> None:
        self.scroll_lines(-max(1, self.scrollable_content_region.height - 2))

    def action_page_newer(self) -> None:
        self.scroll_lines(max(1, self.scrollable_content_region.height - 2))

    def action_top(self) -> None:
        """The top of what is loaded; again, older turns."""
        self.release_anchor()
        if self.scroll_y <= 0:
            self.load_older()
        else:
            self.scroll_to(y=0, animate=False, immediate=True)

    def action_bottom(self) -> None:
        self.run_worker(self.to_live_end(), group="transcript-window", exit_on_error=False)

    def action_select_move(self, step: int) -> None:
        if self.selected is None:
            self.scroll_lines(step)
        else:
            self.move_selection(step)

    # --- selection -----------------------------------------------------------------------------
    @property
    def selected_view(self) -> TurnView | None:
        """The selected turn's widget, when mounted."""
        return next((v for v in self.turn_views() if v.record.turn_id == self.selected), None)

    def _select_class(self, turn_id: str | None) -> None:
        for view in self.turn_views():
            view.set_class(view.record.turn_id == turn_id, "-selected")

    def select(self, turn_id: str | None) -> None:
        """Mark `turn_id` selected (None: no selection) and bring it into view."""
        self.selected = turn_id
        self._select_class(turn_id)
        view = self.selected_view
        if view is not None:
            self.release_anchor()
            self.scroll_to_widget(view, animate=False, immediate=True)

    def move_selection(self, step: int) -> None:
        """Select the turn `step` turns away (the last one in view when none is selected)."""
        views = self.turn_views()
        if not views:
            return
        current = self.selected_view
        if current is None:
            bottom = self.scroll_y + self.scrollable_content_region.height
            shown = [v for v in views if v.virtual_region.y < bottom] or views
            self.select(shown[-1].record.turn_id)
            return
        index = views.index(current) + step
        if index < 0:
            self.load_older()
            return
        if index >= len(views):
            self.load_newer()
            return
        self.select(views[index].record.turn_id)

    def set_highlight(self, text: str) -> None:
        """Highlight `text` in every turn shown (``""``: none)."""
        self.highlight = text
        for view in self.turn_views():
            set_highlight(view, text)

    async def go_to(self, turn_id: str) -> bool:
        """Bring turn `turn_id` into view and select it, fetching the page around it if it is not
        kept. Returns whether it was found."""
        ids = [i.record.turn_id if i.record is not None else None for i in self.items]
        if turn_id not in ids:
            if self.fetch is None:
                return False
            self._show_edges(older="loading the turns around the match…")
            try:
                page = await self.fetch(PAGE, around=turn_id)
            except TuiError as exc:
                self._show_edges()
                self.notify(str(exc), title="Could not load that turn", severity="warning")
                return False
            async with self._window:
                self._epoch += 1
                self.items = page_items(page.turns)
                self.has_more, self.has_newer = page.has_more, page.has_newer
                self._lo = self._hi = 0
            ids = [i.record.turn_id if i.record is not None else None for i in self.items]
            if turn_id not in ids:
                return False
        index = ids.index(turn_id)
        if not self._lo <= index < self._hi:
            async with self._window:
                # what fills the screen around it; the rest is mounted as the reader scrolls
                self._lo = max(0, index - FIRST)
                self._hi = min(len(self.items), index + FIRST)
                self.release_anchor()
                with self.app.batch_update():
                    await self.remove_children(self._ended_widgets())
                    widgets = [self._widget(i) for i in self.items[self._lo : self._hi]]
                    await self.mount_all(widgets, before=self._newer)
                    self._show_edges()
        self.selected = turn_id
        self._select_class(turn_id)
        done = asyncio.Event()

        def show() -> None:
            view = self.selected_view
            if view is not None:
                self.release_anchor()
                self.scroll_to_center(view, animate=False, immediate=True)
            done.set()

        self.call_after_refresh(show)
        await done.wait()
        return True

    # --- what happens now ------------------------------------------------------------------------
    async def _append(self, item: Item) -> None:
        self._hello.display = False
        if self.has_newer:
            return  # kept records end before the newest: it is fetched with them
        self.items.append(item)
        if self._hi == len(self.items) - 1:
            self._hi += 1
            await self.mount(self._widget(item), before=self._newer)
            excess = self._hi - self._lo - WINDOW
            if excess > 0 and self.is_vertical_scroll_end:
                await self.remove_children(self._ended_widgets()[:excess])
                self._lo += excess
        self._trim_front()
        self._show_edges()

    def _trim_front(self) -> None:
        """Drop the oldest kept records beyond `KEEP` that are not mounted."""
        drop = min(len(self.items) - KEEP, self._lo)
        if drop > 0:
            del self.items[:drop]
            self._lo -= drop
            self._hi -= drop
            self.has_more = True

    async def add_ended(self, records: list[TurnRecord]) -> None:
        """Turns that started and ended while the app was behind (a script's quick turns): shown
        ended at once, in one mount, never as live turns; when more arrived than the window holds
        and the reader follows the bottom, only the newest are mounted."""
        if not records:
            return
        self._hello.display = False
        if self.has_newer:
            return  # kept records end before the newest: they are fetched with them
        following = self._hi == len(self.items)
        self.items.extend(Item(record=r) for r in records)
        # At the bottom, or anchored there with a layout still to come (the anchor is released
        # only when the reader scrolls away).
        at_bottom = self.is_vertical_scroll_end or (self.is_anchored and not self._anchor_released)
        if following and at_bottom:
            end = len(self.items)
            start = max(self._hi, end - WINDOW)
            with self.app.batch_update():
                if start > self._hi:
                    await self.remove_children(self._ended_widgets())
                    self._lo = start
                await self.mount_all([self._widget(i) for i in self.items[start:end]], before=self._newer)
                self._hi = end
                excess = self._hi - self._lo - WINDOW
                if excess > 0:
                    await self.remove_children(self._ended_widgets()[:excess])
                    self._lo += excess
        self._trim_front()
        self._show_edges()

    async def add_line(self, text: str) -> None:
        """A line between turns."""
        if self.live is not None:
            await self.live.add_line(text)
        else:
            await self._append(Item(line=text))

    async def start_live(self, record: TurnRecord) -> LiveTurn:
        """Show a turn that just started."""
        self._hello.display = False
        if self.live is not None:
            await self.end_live(self.live.record)
        self.live = LiveTurn(record, verbatim=self.verbatim)
        await self.mount(self.live)
        self._show_edges()
        return self.live

    async def end_live(self, record: TurnRecord) -> None:
        """The running turn ended: it becomes one cheap widget."""
        live = self.live
        if live is None:
            return
        await live.finish()
        self.live = None
        tools = {t.call_id: t for t in record.tools}
        lines = sum(1 for p in live.parts if p.kind == "line" and p.text in kept_lines(record))
        said = sum(1 for line in record.lines if line.kind != "before")
        # attached in the middle of the turn: the calls and lines that came before are only in the record
        whole = {p.tool.call_id for p in live.parts if p.tool is not None} >= tools.keys() and lines >= said
        parts = live.parts if whole else None
        for part in parts or []:
            if part.tool is not None:  # as the record ended it (a call never closed ended with the turn)
                part.tool = tools.get(part.tool.call_id, part.tool)
        with self.app.batch_update():
            await live.remove()
            await self._append(Item(record=record, parts=parts))
