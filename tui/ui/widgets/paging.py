"""What the transcript keeps: a stretch of the session's turn records, paged as data.

`Paging` is the part of `TranscriptView` that decides which records are kept (`items`): a page
loaded at attach, older turns fetched from the worker (`before=`) when the reader reaches the
top, newer ones (`after=`) at the bottom, records beyond `KEEP` dropped at the end away from the
view, the first turn reached in pages of `REACH`, a search's match fetched with the page around
it (`go_to`), and what arrives while the app runs (ended turns, lines, the running turn). The
lines above and below the kept turns (`EdgeLine`) say what more there is, or that it loads.
How the kept records are measured and drawn is `TranscriptView`'s (`transcript.py`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.strip import Strip

from tui.errors import TuiError
from tui.protocol import Transcript, TurnRecord
from tui.ui.widgets.lines import RichBlock
from tui.ui.widgets.live import LiveTurn
from tui.ui.widgets.turn import Drawn, Part, TurnView, kept_lines

if TYPE_CHECKING:
    import asyncio

    from rich.style import Style
    from textual.scroll_view import ScrollView as _Host
else:
    _Host = object

__all__ = ["KEEP", "PAGE", "REACH", "WINDOW", "EdgeLine", "Fetch", "Item", "Paging", "page_items"]

PAGE = 40
"""How many turns are fetched at a time when scrolling."""
KEEP = 60
"""The most turn records kept in the app; the others are fetched again when needed."""
WINDOW = KEEP
"""The most ended turns the view holds at once (all the kept ones)."""
REACH = 1_000
"""Turns fetched at a time on the way to the first turn (the most a worker gives at once)."""

Fetch = Callable[..., Awaitable[Transcript]]
"""`AttachLink.transcript`: ``fetch(limit, before=, after=, around=)``."""


@dataclass
class Item:
    """One entry of the transcript: an ended turn, or a line (a note, an unknown event)."""

    record: TurnRecord | None = None
    parts: list[Part] | None = None
    line: str = ""
    drawn: Drawn | None = None


def page_items(records: list[TurnRecord]) -> list[Item]:
    """The items of a page of turns: each turn after the notes said before it."""
    items: list[Item] = []
    for record in records:
        items += [Item(line=line.text) for line in record.lines if line.kind == "before"]
        items.append(Item(record=record))
    return items


class EdgeLine(Drawn):
    """A line above or below the kept turns (what more there is, that it loads), or the line an
    empty session shows."""

    def __init__(self, style_name: str, *, centre: bool) -> None:
        super().__init__()
        self.text = ""
        self.style_name = style_name
        self.centre = centre

    def set_text(self, text: str) -> None:
        if text != self.text:
            self.text = text
            self.changed()

    def say(self, text: str) -> None:
        """Say `text` from the next layout on (its lines made again)."""
        if text != self.text:
            self.text = text
            self.forget()

    def blocks_now(self) -> list[Any]:
        text, name, centre = self.text, self.style_name, self.centre
        return [RichBlock(lambda style: Text(text, style=style(name), justify="center" if centre else None))]

    def lines(self, width: int) -> list[Strip]:
        return super().lines(width)[:-1]  # no blank line after it


class Paging(_Host):
    """The records `TranscriptView` keeps, and how they are paged; mixed into it."""

    if TYPE_CHECKING:  # what the view holds and does, used here
        items: list[Item]
        has_more: bool
        has_newer: bool
        live: LiveTurn | None
        verbatim: bool
        fetch: Fetch | None
        selected: str | None
        _older: EdgeLine
        _newer: EdgeLine
        _hello: EdgeLine
        _edge_says: tuple[str | None, str | None]
        _window: asyncio.Lock
        _fetching: bool
        _epoch: int
        _entries: list[Drawn]
        _follow: bool
        _pin: tuple[Drawn, int] | None
        _arrived: int
        unseen: int
        _reaching_end: bool

        def _rebuild(self) -> None: ...
        def _layout(self, *, quiet: bool = False) -> None: ...
        def _pin_at(self, y: int) -> tuple[Drawn, int] | None: ...
        def release_anchor(self) -> None: ...
        def _away_changed(self) -> None: ...
        def _select_class(self, turn_id: str | None) -> None: ...
        def _show_entry(self, drawn: Drawn, *, top: bool = False, centre: bool = False) -> bool: ...
        @property
        def selected_view(self) -> TurnView | None: ...
        @property
        def session_id(self) -> str | None: ...
        def style_of(self, name: str) -> Style: ...

    # --- what is kept -------------------------------------------------------------------------------
    @property
    def mounted_turns(self) -> int:
        """How many ended turns the view holds now."""
        return sum(1 for i in self.items if i.record is not None)

    @property
    def at_live_end(self) -> bool:
        """Whether the newest ended turn is kept (so the running turn follows it)."""
        return not self.has_newer

    def turn_views(self) -> list[TurnView]:
        """The ended turns the view holds, oldest first."""
        return (
            [item.drawn for item in self.items if isinstance(item.drawn, TurnView)] if self._entries else []
        )

    def _show_edges_text(self) -> None:
        older, newer = self._edge_says
        if older is None:
            older = (
                "↑ older turns: PgUp or scroll up to load · Ctrl+Home: the first turn"
                if self.has_more
                else ""
            )
        if newer is None and not self.at_live_end:
            newer = "↓ newer turns: PgDn or scroll down to load · Ctrl+End: the live bottom"
        self._older.say(older)
        self._newer.say(newer or "")

    def _show_edges(self, *, older: str | None = None, newer: str | None = None) -> None:
        """The lines above and below the kept turns: what more there is, or that it loads (until
        said again without)."""
        self._edge_says = (older, newer)
        self._rebuild()

    @property
    def older_line(self) -> str:
        """The line above the kept turns (empty when none shows)."""
        return self._older.text

    @property
    def hello_line(self) -> str:
        """The line an empty session shows (empty when none shows)."""
        return self._hello.text if self._hello in self._entries else ""

    @property
    def is_fetching(self) -> bool:
        """Whether turns are being fetched now."""
        return self._fetching or self._window.locked()

    # --- loading -------------------------------------------------------------------------------
    async def load(self, records: list[TurnRecord], *, has_more: bool, has_newer: bool = False) -> None:
        """Show a page of the session's turns (a fresh attach, or the live bottom again), at the
        bottom."""
        async with self._window:
            self._epoch += 1
            self.items = page_items(records)
            self.has_more, self.has_newer = has_more, has_newer
            self._follow = True
            self._edge_says = (None, None)
            self._rebuild()

    async def to_live_end(self) -> None:
        """Back to the live bottom: the newest turns, the running one, followed.

        One at a time (each key typed asks for it; the first one's page serves them all). A turn
        that ends while the newest page is on its way may not be in it: the page is fetched again
        until none did, so the kept turns always reach the session's newest."""
        if self._reaching_end:
            return
        self._reaching_end = True
        try:
            while self.has_newer and self.fetch is not None:
                arrived = self._arrived
                self._show_edges(newer="loading the newest turns…")
                try:
                    page = await self.fetch(PAGE)
                except TuiError as exc:
                    self._show_edges()
                    self.notify(str(exc), title="Could not load the newest turns", severity="warning")
                    return
                await self.load(page.turns, has_more=page.has_more, has_newer=self._arrived != arrived)
            self._follow = True
            self._edge_says = (None, None)
            self._layout()
        finally:
            self._reaching_end = False

    async def to_first(self) -> None:
        """To the session's first turn: its first `KEEP` turns, in one request (a worker older
        than that request answers the last page; then the way there, in pages of `REACH`)."""
        if self.fetch is None or not self.has_more:
            self._follow = False
            self._pin = (self._entries[0], 0) if self._entries else None
            self._layout()
            return
        self._fetching = True
        self._show_edges(older="↑ loading the first turns…")
        epoch = self._epoch
        try:
            page = await self.fetch(KEEP, first=True)
            while page.has_more and page.turns:
                page = await self.fetch(REACH, before=page.turns[0].turn_id)
        except TuiError as exc:
            self._show_edges()
            self.notify(str(exc), title="Could not load the first turns", severity="warning")
            return
        finally:
            self._fetching = False
        self._edge_says = (None, None)
        async with self._window:
            if self._epoch != epoch:
                self._show_edges()
                return
            self._epoch += 1
            items = page_items(page.turns)
            self.items = items[:KEEP]
            self.has_more = False
            self.has_newer = True
            self._follow = False
            self._pin = None
            self._rebuild()
            self._pin = (self._entries[0], 0) if self._entries else None
            self._layout()

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
        self._edge_says = (None, None)
        async with self._window:
            if self._epoch != epoch or self._oldest_id() != oldest:
                self._show_edges()
                return  # the reader went elsewhere meanwhile: this page no longer joins on
            self.has_more = page.has_more
            self.items[:0] = page_items(page.turns)
            if self._follow and self.live is None:
                self._follow = False
            self._drop(newest=True)
            self._rebuild()

    async def _fetch_newer(self) -> None:
        if self.fetch is None or self._fetching:
            return
        self._fetching = True
        self._show_edges(newer="↓ loading newer turns…")
        epoch, newest, arrived = self._epoch, self._newest_id(), self._arrived
        try:
            page = await self.fetch(PAGE, after=newest)
        except TuiError as exc:
            self._show_edges()
            self.notify(str(exc), title="Could not load newer turns", severity="warning")
            return
        finally:
            self._fetching = False
        self._edge_says = (None, None)
        async with self._window:
            if self._epoch != epoch or self._newest_id() != newest:
                self._show_edges()
                return
            # A turn that ended while the page was on its way was not kept (the kept turns ended
            # before the newest): it may not be in the page either, so there is still more.
            self.has_newer = page.has_newer or self._arrived != arrived
            self.items.extend(page_items(page.turns))
            self._drop(newest=False)
            self._rebuild()
        if self.has_newer and self._arrived != arrived:
            self.load_newer()

    def _drop(self, *, newest: bool) -> None:
        """Drop kept records beyond `KEEP` at the end away from the view (newest: the bottom)."""
        turns = [n for n, i in enumerate(self.items) if i.record is not None]
        excess = len(turns) - KEEP
        if excess <= 0:
            return
        if newest:
            del self.items[turns[-excess] :]
            self.has_newer = True
        else:
            del self.items[: turns[excess - 1] + 1]
            self.has_more = True

    def load_older(self) -> None:
        """Fetch older turns, as scrolling to the top does."""
        if self.has_more and not self._fetching:
            self.run_worker(self._fetch_older(), group="transcript-window", exit_on_error=False)

    def load_newer(self) -> None:
        """Fetch newer turns, as scrolling to the bottom does."""
        if self.has_newer and not self._fetching:
            self.run_worker(self._fetch_newer(), group="transcript-window", exit_on_error=False)

    async def go_to(self, turn_id: str) -> bool:
        """Bring turn `turn_id` into view and select it, fetching the page around it if it is not
        kept. Returns whether it was found."""
        ids = [i.record.turn_id if i.record is not None else None for i in self.items]
        if turn_id not in ids:
            if self.fetch is None:
                return False
            self._show_edges(older="loading the turns around the match…")
            arrived = self._arrived
            try:
                page = await self.fetch(PAGE, around=turn_id)
            except TuiError as exc:
                self._show_edges()
                self.notify(str(exc), title="Could not load that turn", severity="warning")
                return False
            self._edge_says = (None, None)
            async with self._window:
                self._epoch += 1
                self.items = page_items(page.turns)
                self.has_more = page.has_more
                self.has_newer = page.has_newer or self._arrived != arrived
                self.release_anchor()
                self._pin = None
                self._rebuild()
            ids = [i.record.turn_id if i.record is not None else None for i in self.items]
            if turn_id not in ids:
                return False
        self.selected = turn_id
        self._select_class(turn_id)
        view = self.selected_view
        if view is not None:
            self._show_entry(view, centre=True)
        return True

    # --- what happens now ------------------------------------------------------------------------
    def _trim_front(self) -> None:
        """Drop the oldest kept records beyond `KEEP` (above the view while it follows)."""
        if self._follow:
            self._drop(newest=False)

    def _arrive(self, turns: int) -> None:
        """Something arrived at the session's end (`turns` of them ended turns): counted, so a
        page fetched meanwhile is known to maybe lack it; a reader away from the bottom is told."""
        self._arrived += 1
        if turns and not (self._follow and self.at_live_end):
            self.unseen += turns
        self._away_changed()

    async def _append(self, item: Item) -> None:
        self._hello.text = ""
        self._arrive(1 if item.record is not None else 0)
        if self.has_newer:
            self._rebuild()
            return  # kept records end before the newest: it is fetched with them
        self.items.append(item)
        self._trim_front()
        self._rebuild()

    async def add_ended(self, records: list[TurnRecord]) -> None:
        """Turns that started and ended while the app was behind (a script's quick turns): shown
        ended at once, never as live turns; when more arrived than the view keeps and the reader
        follows the bottom, only the newest are kept."""
        if not records:
            return
        self._hello.text = ""
        self._arrive(len(records))
        if self.has_newer:
            self._rebuild()
            return  # kept records end before the newest: they are fetched with them
        self.items.extend(Item(record=r) for r in records)
        if not self._follow and len(self.items) > KEEP:
            self.has_newer = True  # the reader is reading above: the newest are fetched when asked
            self._drop(newest=True)
        self._trim_front()
        self._rebuild()

    def mark_rewound(self, first: int, last: int) -> None:
        """Turns `first` … `last` were undone by a rewind: those kept are drawn again, saying so."""
        marked = False
        for item in self.items:
            record = item.record
            if record is not None and not record.rewound and first <= record.number <= last:
                item.record = record.model_copy(update={"rewound": True})
                item.drawn = item.parts = None
                marked = True
        if marked:
            self._rebuild()

    async def add_line(self, text: str) -> None:
        """A line between turns."""
        if self.live is not None:
            await self.live.add_line(text)
        else:
            await self._append(Item(line=text))

    async def start_live(self, record: TurnRecord) -> LiveTurn:
        """Show a turn that just started."""
        self._hello.text = ""
        if self.live is not None:
            await self.end_live(self.live.record)
        live = self.live = LiveTurn(record, verbatim=self.verbatim)
        live.host = self
        from tui.ui.widgets.turn import FLUSH_EVERY

        live.timer = self.set_interval(FLUSH_EVERY, live.flush)
        self._rebuild()
        return live

    async def end_live(self, record: TurnRecord) -> None:
        """The running turn ended: it becomes an ended turn, with the blocks it already made."""
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
        item = Item(record=record, parts=parts)
        if live.expanded and parts is not None:
            view = TurnView(record, parts, verbatim=self.verbatim, expanded=True)
            item.drawn, item.parts = view, None
        await self._append(item)
