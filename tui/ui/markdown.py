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
    from rich.markdown import Markdown

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


@cache
def _markdown_class() -> type[Markdown]:
    from rich.markdown import CodeBlock, Markdown
    from rich.syntax import Syntax

    class FlushCode(CodeBlock):
        """A code block (a ``!`` line's output, say) starting in the column the text does: Rich's
        pads it one column in."""

        def __rich_console__(self, console: Any, options: Any) -> Any:
            code = str(self.text).rstrip()
            yield Syntax(code, self.lexer_name, theme=self.theme, word_wrap=True, padding=(1, 0))

    class ReplyMarkdown(Markdown):
        elements = {**Markdown.elements, "fence": FlushCode, "code_block": FlushCode}

    return ReplyMarkdown


def reply_markdown(source: str) -> ConsoleRenderable:
    """A reply rendered once with Rich (cheap to keep, cached by Textual per width)."""
    markdown = _markdown_class()("", code_theme="ansi_dark", hyperlinks=False)
    markdown.markup = source
    markdown.parsed = parser().parse(source)
    return markdown
