"""The transcript: ended turns as one cheap widget each, the running turn live at the bottom.

Only a window of the loaded turns is mounted (at most `WINDOW`): scrolling to the top mounts
older ones (asking the screen to fetch them from the link when none are loaded) and unmounts the
newest; scrolling back to the bottom does the reverse. The view stays anchored to the bottom
while the user has not scrolled away.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.containers import VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from tui.protocol import TurnRecord
from tui.ui.widgets.turn import LiveTurn, Part, TurnView

__all__ = ["TranscriptView"]

WINDOW = 120
"""The most ended turns mounted at once."""
PAGE = 40
"""How many turns are mounted (or fetched) at a time when scrolling."""


@dataclass
class Item:
    """One entry of the transcript: an ended turn, or a line (a note, an unknown event)."""

    record: TurnRecord | None = None
    parts: list[Part] | None = None
    line: str = ""


class NoteLine(Static):
    """A line between turns: a note for the agent, an event this version does not know."""

    DEFAULT_CSS = """
    NoteLine { height: auto; color: $text-muted; padding: 0 0 1 0; }
    """


class TranscriptView(VerticalScroll, can_focus=False):
    """Every turn of the session, newest at the bottom."""

    DEFAULT_CSS = """
    TranscriptView { height: 1fr; padding: 0 1 0 1; scrollbar-size-vertical: 1; }
    TranscriptView > #older { color: $text-muted; height: auto; text-align: center; }
    TranscriptView > #hello { color: $text-muted; height: auto; display: none; }
    """

    class NeedOlder(Message):
        """The view reached the top and no older turn is loaded: fetch some."""

        def __init__(self, before: str | None) -> None:
            super().__init__()
            self.before = before
            """The oldest loaded turn's id."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.items: list[Item] = []
        self.has_more = False
        """Whether the session has turns older than the loaded ones."""
        self._lo = 0
        self._hi = 0
        self._older = Static("", id="older", markup=False)
        self._hello = Static("", id="hello", markup=False)
        self.live: LiveTurn | None = None
        self._loading = False
        self.verbatim = False
        """Whether replies are program output (the python agent), shown as printed."""

    def compose(self):  # type: ignore[no-untyped-def]
        yield self._older
        yield self._hello

    def show_hello(self, text: str) -> None:
        """The line an empty session shows until its first turn: where it is, what to type."""
        self._hello.update(text)
        self._hello.display = True

    def on_mount(self) -> None:
        self.anchor()

    # --- what is mounted -----------------------------------------------------------------------
    @property
    def mounted_turns(self) -> int:
        """How many ended turns are mounted now."""
        return self._hi - self._lo

    def _widget(self, item: Item) -> Widget:
        if item.record is not None:
            return TurnView(item.record, item.parts, verbatim=self.verbatim)
        return NoteLine(item.line, markup=False)

    def _show_older(self) -> None:
        hidden = self._lo
        if hidden or self.has_more:
            count = f"{hidden} more" if hidden else "older turns"
            self._older.update(f"↑ {count}: scroll up to load")
            self._older.display = True
        else:
            self._older.display = False

    def _ended_widgets(self) -> list[Widget]:
        return [w for w in self.children if isinstance(w, TurnView | NoteLine)]

    async def load(self, records: list[TurnRecord], *, has_more: bool) -> None:
        """Show the session's last turns (a fresh attach)."""
        self.items = [Item(record=r) for r in records]
        self.has_more = has_more
        self._lo = max(0, len(self.items) - PAGE)
        self._hi = len(self.items)
        with self.app.batch_update():
            await self.remove_children(self._ended_widgets())
            await self.mount_all([self._widget(i) for i in self.items[self._lo :]], after=self._older)
            self._show_older()
        self.scroll_end(animate=False, immediate=True)

    async def prepend(self, records: list[TurnRecord], *, has_more: bool) -> None:
        """Older turns fetched from the session: mount them above, keeping the view still."""
        self._loading = False
        self.has_more = has_more
        if not records:
            self._show_older()
            return
        self.items[:0] = [Item(record=r) for r in records]
        self._lo += len(records)
        self._hi += len(records)
        await self._mount_older()

    async def _mount_older(self) -> None:
        start = max(0, self._lo - PAGE)
        new = [self._widget(i) for i in self.items[start : self._lo]]
        if not new:
            return
        before_height = self.virtual_size.height
        with self.app.batch_update():
            await self.mount_all(new, after=self._older)
            self._lo = start
            excess = self._hi - self._lo - WINDOW
            if excess > 0 and self.live is None:
                ended = self._ended_widgets()
                await self.remove_children(ended[-excess:])
                self._hi -= excess
            self._show_older()
        self.call_after_refresh(self._keep_place, before_height)

    def _keep_place(self, before_height: int) -> None:
        grown = self.virtual_size.height - before_height
        if grown > 0:
            self.scroll_to(y=self.scroll_y + grown, animate=False, immediate=True)

    async def _mount_newer(self) -> None:
        end = min(len(self.items), self._hi + PAGE)
        new = [self._widget(i) for i in self.items[self._hi : end]]
        if not new:
            return
        with self.app.batch_update():
            ended = self._ended_widgets()
            await self.mount_all(new, after=ended[-1] if ended else self._older)
            self._hi = end
            excess = self._hi - self._lo - WINDOW
            if excess > 0:
                await self.remove_children(self._ended_widgets()[:excess])
                self._lo += excess
            self._show_older()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if (new <= 0 and old > 0) or (new <= 0 and self.max_scroll_y == 0):
            self._reached_top()
        elif new >= self.max_scroll_y and self._hi < len(self.items):
            self.run_worker(
                self._mount_newer(), group="transcript-window", exclusive=True, exit_on_error=False
            )

    def _reached_top(self) -> None:
        if self._lo > 0:
            self.run_worker(
                self._mount_older(), group="transcript-window", exclusive=True, exit_on_error=False
            )
        elif self.has_more and not self._loading:
            self._loading = True
            oldest = next((i.record.turn_id for i in self.items if i.record is not None), None)
            self.post_message(self.NeedOlder(oldest))

    def load_older(self) -> None:
        """Mount or fetch older turns, as scrolling to the top does."""
        self._reached_top()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Mounting turns failed unexpectedly: say so; what is shown stays, and the app runs on."""
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            self.notify(
                f"{type(error).__name__}: {error}", title="Could not show the turns", severity="error"
            )

    # --- what happens now ------------------------------------------------------------------------
    async def _append(self, item: Item) -> None:
        self._hello.display = False
        self.items.append(item)
        if self._hi == len(self.items) - 1:
            self._hi += 1
            anchor = self.live if self.live is not None else None
            widget = self._widget(item)
            if anchor is not None:
                await self.mount(widget, before=anchor)
            else:
                await self.mount(widget)
            excess = self._hi - self._lo - WINDOW
            if excess > 0 and self.is_vertical_scroll_end:
                await self.remove_children(self._ended_widgets()[:excess])
                self._lo += excess
                self._show_older()

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
        if self._hi < len(self.items):
            await self._mount_newer()
        self.live = LiveTurn(record, verbatim=self.verbatim)
        await self.mount(self.live)
        return self.live

    async def end_live(self, record: TurnRecord) -> None:
        """The running turn ended: it becomes one cheap widget."""
        live = self.live
        if live is None:
            return
        await live.finish()
        self.live = None
        shown = {p.tool.call_id for p in live.parts if p.tool is not None}
        # attached in the middle of the turn: the calls made before are only in the record
        parts = live.parts if all(t.call_id in shown for t in record.tools) else None
        item = Item(record=record, parts=parts)
        with self.app.batch_update():
            self.items.append(item)
            self._hi = len(self.items)
            await self.mount(self._widget(item), before=live)
            await live.remove()
