"""How a kept line becomes a row of the transcript: over the view's style, beside the bar of a
selected turn, or as the running turn's rows (whose margins are the view's background)."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from tui.ui.widgets.lines import KeptStrip

__all__ = ["live_row", "selected_row", "styled"]


def _plain(style: Style | None) -> bool:
    """Whether blank cells in `style` show nothing but the background."""
    return style is None or not (style.color or style.bgcolor or style.underline or style.reverse)


def live_row(strip: Strip, base: Style, blank: Style, width: int) -> Strip:
    """A line of the running turn: its text in the view's style, the blank cells after it (up to
    `width`) in its background only, as the widgets that drew it before left them."""
    pieces = list(strip)
    tail: list[Segment] = []
    while pieces and _plain(pieces[-1].style) and not pieces[-1].text.strip():
        tail.insert(0, Segment(pieces.pop().text, blank))
    if pieces and _plain(pieces[-1].style) and pieces[-1].text.endswith(" "):
        text, style, _ = pieces.pop()
        body = text.rstrip(" ")
        pieces.append(Segment(body, style))
        tail.insert(0, Segment(text[len(body) :], blank))
    head: list[Segment] = []
    while pieces and pieces[0].style is None and not pieces[0].text.strip():
        head.append(Segment(pieces.pop(0).text, blank))  # its indent
    segments = [*head, *(Segment(text, base + style if style else base) for text, style, _ in pieces)]
    segments += [*tail, Segment(" " * max(0, width - strip.cell_length), blank)]
    return Strip(segments, max(width, strip.cell_length))


def styled(strip: Strip, style: Style) -> Strip:
    """`strip` over `style`, as `Strip.apply_style` makes it, without keeping the result in the
    kept line's cache (every line drawn would keep a second one, twice the objects to collect)."""
    return KeptStrip(Segment.apply_style(strip, style), strip.cell_length)


def selected_row(strip: Strip, width: int, base: Style, selected: Style, bar: Style) -> Strip:
    """A line of the selected turn: the bar left of it, the selection's background to `width`."""
    mark = Segment("\u258c", base + selected + bar)
    if not strip.cell_length:  # the blank line closing it: its background only
        return Strip([mark, Segment(" " * width, Style(bgcolor=selected.bgcolor))], width + 1)
    rest = Segment(" " * max(0, width - strip.cell_length), Style(bgcolor=selected.bgcolor))
    strip = styled(styled(strip, selected), base)
    return Strip([mark, *strip, rest], max(width, strip.cell_length) + 1)
