"""A kept line (`KeptStrip`) is drawn exactly as a Textual `Strip` with the same segments."""

from __future__ import annotations

import pytest
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from tui.ui.widgets.lines import KeptStrip

SEGMENTS = [
    Segment("\u276f ", Style(bold=True)),
    Segment("print('hello, world')", Style(color="green")),
    Segment("  · alice", Style(dim=True, link="https://example.com")),
]


def pair() -> tuple[Strip, Strip]:
    return Strip(SEGMENTS, 32), KeptStrip(SEGMENTS, 32)


@pytest.mark.parametrize(
    "operation",
    [
        lambda s: s.crop(2, 12),
        lambda s: s.crop(2, 12),  # twice: the second comes from the cache made by the first
        lambda s: s.divide([3, 10, 32]),
        lambda s: s.apply_style(Style(bgcolor="blue")),
        lambda s: s.extend_cell_length(40, Style(bgcolor="red")),
        lambda s: s.crop_extend(4, 40, Style(bgcolor="red")),
        lambda s: s.adjust_cell_length(10),
        lambda s: s.simplify(),
        lambda s: s.apply_offsets(1, 2),
        lambda s: s.link_ids,
        lambda s: (s.text, s.cell_length, len(s), list(s)),
    ],
)
def test_a_kept_line_does_what_a_strip_does(operation: object) -> None:
    strip, kept = pair()
    assert operation(strip) == operation(kept)  # type: ignore[operator]


def test_a_kept_line_renders_the_same_escapes() -> None:
    strip, kept = pair()
    console = Console(color_system="truecolor", force_terminal=True)
    assert kept.render(console) == strip.render(console)


def test_every_part_of_a_textual_strip_can_be_read_on_a_kept_line() -> None:
    """A Textual that adds a part to its strips fails here, not while drawing."""
    kept = KeptStrip(SEGMENTS)
    for name in Strip.__slots__:
        getattr(kept, name)
    assert kept.cell_length == Strip(SEGMENTS).cell_length
