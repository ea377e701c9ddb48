"""The footer of keys, fitted to the width: a key that does not fit is left out whole (never cut
in the middle of its label), the least useful ones first."""

from __future__ import annotations

from textual.widgets import Footer
from textual.widgets._footer import FooterKey

__all__ = ["RANK", "FittingFooter"]

RANK = (
    "interrupt",
    "dismiss",
    "close",
    "leave_reading",
    "scroll_bottom('new')",
    "scroll_bottom('away')",
    "retry",
    "help",
    "copy('reply')",
    "copy('prompt')",
    "open_output",
    "toggle_tools",
    "copy('tool')",
    "detach",
    "find",
    "select(-1)",
    "newline",
)
"""The actions a narrow footer keeps first, most useful first (what Esc does now, the help);
the others follow in the order they are shown."""


def _rank(key: FooterKey, order: int) -> tuple[int, int]:
    return (RANK.index(key.action) if key.action in RANK else len(RANK), order)


class FittingFooter(Footer):
    """A `Footer` that shows only the keys that fit whole, keeping the most useful (`RANK`)."""

    async def recompose(self) -> None:
        await super().recompose()
        self.fit()

    def on_resize(self) -> None:
        self.fit()

    def fit(self) -> None:
        """Show the keys that fit whole in the width left by the command palette's key."""
        keys = [k for k in self.query(FooterKey) if not k.has_class("-command-palette")]
        if not keys or not self.size.width:
            return
        palettes = [k for k in self.query(FooterKey) if k.has_class("-command-palette")]
        room = self.size.width - sum(k.render().cell_len + 1 for k in palettes)  # docked right, its border
        kept: set[FooterKey] = set()
        used = 0
        for _, key in sorted(enumerate(keys), key=lambda pair: _rank(pair[1], pair[0])):
            width = key.render().cell_len + key.styles.margin.width
            if used + width <= room:
                kept.add(key)
                used += width
        for key in keys:
            if key.display != (key in kept):  # set only when it changes: each set lays out the screen
                key.display = key in kept
