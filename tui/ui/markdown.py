"""How replies are read as Markdown: one parser for the live view and the rendered-once one.

A reply is often program output, so a line break is kept as a line break, as a terminal would
show it. markdown-it and Rich's Markdown are imported on first use: an empty session's first
frame does not pay for them.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from rich.console import ConsoleRenderable

__all__ = ["parser", "reply_markdown"]


@cache
def _parser_class() -> type[MarkdownIt]:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

    class KeepBreaks(MarkdownIt):
        def parse(self, src: str, env: Any = None) -> list[Token]:
            tokens = super().parse(src, env)
            for token in tokens:
                for child in token.children or ():
                    if child.type == "softbreak":
                        child.type = "hardbreak"
            return tokens

    return KeepBreaks


def parser() -> MarkdownIt:
    """The reply parser: GitHub-flavoured, line breaks kept."""
    return _parser_class()("gfm-like")


def reply_markdown(source: str) -> ConsoleRenderable:
    """A reply rendered once with Rich (cheap to keep, cached by Textual per width)."""
    from rich.markdown import Markdown

    markdown = Markdown("", code_theme="ansi_dark", hyperlinks=False)
    markdown.markup = source
    markdown.parsed = parser().parse(source)
    return markdown
