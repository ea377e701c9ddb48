"""What the transcript's keys do: scrolling and paging, Home and End, and the selected turn.

`Selecting` is the part of `TranscriptView` that answers the reader's keys: a line or a page up
or down (older or newer turns load past the kept ones), Home (the session's first turn) and End
(the live bottom), and the selection moved from turn to turn (`select`, `move_selection`), which
the session screen copies pieces of and opens the output of; `set_highlight` marks a search's text
in every turn shown. The keys are bound in `TranscriptView` (`transcript.py`); how the view
keeps the reader's place and brings a turn into view is its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tui.ui.widgets.live import LiveTurn
from tui.ui.widgets.turn import TurnView

if TYPE_CHECKING:
    from textual.scroll_view import ScrollView as _Host

    from tui.ui.widgets.turn import Drawn
else:
    _Host = object

__all__ = ["Selecting"]


class Selecting(_Host):
    """The reader's keys and the selected turn of `TranscriptView`; mixed into it."""

    if TYPE_CHECKING:  # what the view holds and does, used here
        selected: str | None
        highlight: str
        live: LiveTurn | None

        @property
        def at_live_end(self) -> bool: ...
        def turn_views(self) -> list[TurnView]: ...
        def load_older(self) -> None: ...
        def load_newer(self) -> None: ...
        async def to_first(self) -> None: ...
        async def to_live_end(self) -> None: ...
        def release_anchor(self) -> None: ...
        def _layout(self, *, quiet: bool = False) -> None: ...
        def _show_entry(self, drawn: Drawn, *, top: bool = False, centre: bool = False) -> bool: ...

    # --- keys ----------------------------------------------------------------------------------------
    def scroll_lines(self, lines: int) -> None:
        """Scroll by `lines` (negative: up); past the first kept turn, older ones load."""
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
        """The session's first turn, in one press."""
        self.release_anchor()
        self.run_worker(self.to_first(), group="transcript-window", exit_on_error=False)

    def action_bottom(self) -> None:
        self.run_worker(self.to_live_end(), group="transcript-window", exit_on_error=False)

    def action_select_move(self, step: int) -> None:
        if self.selected is None:
            self.scroll_lines(step)
        else:
            self.move_selection(step)

    # --- selection ---------------------------------------------------------------------------------
    @property
    def selected_view(self) -> TurnView | None:
        """The selected turn, when kept and ended."""
        return next((v for v in self.turn_views() if v.record.turn_id == self.selected), None)

    @property
    def selected_turn(self) -> TurnView | LiveTurn | None:
        """The selected turn, the running one too."""
        return next((v for v in self._selectable() if v.record.turn_id == self.selected), None)

    def _selectable(self) -> list[TurnView | LiveTurn]:
        """The turns a selection moves over: the ended ones kept, then the running one when drawn."""
        views: list[TurnView | LiveTurn] = [*self.turn_views()]
        if self.live is not None and self.at_live_end:
            views.append(self.live)
        return views

    def _select_class(self, turn_id: str | None) -> None:
        changed = False
        for view in self._selectable():
            was = view.classes
            view.classes = {"-selected"} if view.record.turn_id == turn_id else set()
            changed = changed or was != view.classes
        if changed:  # a selected turn is drawn one cell narrower, beside its bar
            self._layout()

    def select(self, turn_id: str | None) -> None:
        """Mark `turn_id` selected (None: no selection) and bring it into view."""
        self.selected = turn_id
        self._select_class(turn_id)
        view = self.selected_turn
        if view is not None:
            self._show_entry(view)

    def move_selection(self, step: int) -> None:
        """Select the turn `step` turns away (the last one in view when none is selected)."""
        views = self._selectable()
        if not views:
            return
        current = self.selected_turn
        if current is None:
            bottom = self.scroll_y + self.scrollable_content_region.height
            shown = [v for v in views if v.is_attached and v.virtual_region.y < bottom] or views
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
            view.highlight = text
        self.refresh()
