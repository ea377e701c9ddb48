"""How replies are read as Markdown: one parser for the live view and the rendered-once one.

A reply is often program output, so a line break is kept as a line break (markdown-it's
``breaks``), as a terminal would show it.
"""

from __future__ import annotations

from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from rich.markdown import Markdown as RichMarkdown

__all__ = ["ReplyMarkdown", "parser"]


class _KeepBreaks(MarkdownIt):
    def parse(self, src: str, env: Any = None) -> list[Token]:
        tokens = super().parse(src, env)
        for token in tokens:
            for child in token.children or ():
                if child.type == "softbreak":
                    child.type = "hardbreak"
        return tokens


def parser() -> MarkdownIt:
    """The reply parser: GitHub-flavoured, line breaks kept."""
    return _KeepBreaks("gfm-like")


class ReplyMarkdown(RichMarkdown):
    """A reply rendered once with Rich (cheap to keep, cached by Textual per width)."""

    def __init__(self, markup: str) -> None:
        super().__init__("", code_theme="ansi_dark", hyperlinks=False)
        self.markup = markup
        self.parsed = parser().parse(markup)
