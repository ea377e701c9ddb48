"""A model's reasoning in the running turn: dimmed and folded, unfolded by a click."""

from __future__ import annotations

from textual.widgets import Collapsible, Static

__all__ = ["ThinkingBlock"]


class ThinkingBlock(Collapsible):
    """The reasoning streamed between two parts of a reply (`thinking` events), folded."""

    DEFAULT_CSS = """
    ThinkingBlock { height: auto; border: none; padding: 0 0 0 1; margin: 0; background: transparent; }
    ThinkingBlock CollapsibleTitle { color: $text-muted; text-style: italic; }
    ThinkingBlock > Contents { padding: 0 0 0 3; }
    ThinkingBlock .thinking--text { color: $text-muted; text-style: italic; }
    """

    def __init__(self) -> None:
        self._body = Static("", classes="thinking--text", markup=False)
        super().__init__(self._body, title="thinking", collapsed=True)
        self.text = ""
        """The reasoning so far."""
        self._dirty = False

    def add(self, text: str) -> None:
        """Keep reasoning that arrived; it is shown at the next flush."""
        self.text += text
        self._dirty = True

    def flush(self) -> None:
        """Show the reasoning that arrived since the last flush (the title counts its words)."""
        if self._dirty:
            self._dirty = False
            self._body.update(self.text)
            self.title = f"thinking ({len(self.text.split())} words)"
