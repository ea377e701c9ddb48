"""Text drawn a line at a time: pieces of a turn wrapped once per width and kept as strips.

A turn (`tui/ui/widgets/turn.py`) is a list of `Block`s (a prompt line, a tool's title, a
stretch of Markdown, program output). Each block makes its lines for a width once and keeps
them, so a layout asks a block its height without wrapping anything again, and adding to a block
(program output streaming in) wraps only what was added. Program output is folded
(`OutputBlock`): the screen keeps its first `HEAD` and last `TAIL` lines and counts the rest,
whatever arrives.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.cache import FIFOCache
from textual.strip import Strip

from tui.terminal import visible
from tui.ui.pieces import traceback_spans, verbatim_text

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from textual.app import App

__all__ = [
    "HEAD",
    "TAIL",
    "Block",
    "FoldBlock",
    "Host",
    "KeptStrip",
    "MarkdownBlock",
    "OutputBlock",
    "RichBlock",
    "fold_line",
    "fold_markdown",
    "mark_matches",
    "markdown_blocks",
]

HEAD = 20
"""The first lines of a long program output kept on screen."""
TAIL = 200
"""The last lines of a long program output kept on screen."""
LINE_LIMIT = 4_000
"""Characters of one output line kept on screen; the rest is counted."""
MARKDOWN_HEAD = 4_000
"""Characters of a long Markdown reply shown before its fold (up to the end of a block)."""
MARKDOWN_TAIL = 16_000
"""Characters of a long Markdown reply shown after its fold (from the start of a block)."""

StyleOf = Callable[[str], Style]
"""A component class's Rich style, by name (``turn--tool``)."""


_PROBE = Strip([])
_CACHES = {
    name: cache._maxsize
    for name in Strip.__slots__
    if isinstance(cache := getattr(_PROBE, name, None), FIFOCache)
}
"""The caches each Textual `Strip` makes as it is made, by attribute, with their sizes."""
_EMPTY = [name for name in Strip.__slots__ if name not in _CACHES and getattr(_PROBE, name, 0) is None]
"""The rest of a `Strip`'s slots that start empty (its cell length, its other caches)."""


class KeptStrip(Strip):
    """A line kept while its turn is (made once per width): a Textual `Strip` that makes each of
    its caches only when Textual first uses it.

    A `Strip` makes seven caches as it is made, each an object the garbage collector walks at
    every full collection. A kept line is mostly only drawn, which uses none of them: a session
    of turns printing 300 lines each kept half a million such objects, and a full collection
    then stopped the app for 100 to 390 ms (`bench/transcript.py`, `paging-big`).
    """

    __slots__ = ()

    def __init__(self, segments: Any, cell_length: int | None = None) -> None:
        for name in _EMPTY:
            setattr(self, name, None)
        self._segments = list(segments)
        self._cell_length = cell_length

    def __getattr__(self, name: str) -> Any:
        size = _CACHES.get(name)
        if size is None:
            raise AttributeError(name)
        cache: FIFOCache[Any, Any] = FIFOCache(size)
        setattr(self, name, cache)
        return cache


def fold_line(hidden: int, session_id: str | None) -> str:
    """The line between the head and the tail of a folded output: how much is hidden and how to
    see it all."""
    where = f"tui transcript {session_id}" if session_id else "tui transcript ID"
    plural = "" if hidden == 1 else "s"
    return f"… {hidden:,} line{plural} hidden · o on the selected turn opens the whole output · {where}"


def mark_matches(strip: Strip, needle: str, style: Style) -> Strip:
    """`strip` with each case-insensitive occurrence of `needle` (lower case) restyled."""
    text = strip.text
    low = text.lower()
    if not needle or needle not in low or len(low) != len(text):
        return strip
    cuts: list[int] = []
    at = low.find(needle)
    while at >= 0:
        start = cell_len(text[:at])
        cuts += [start, start + cell_len(text[at : at + len(needle)])]
        at = low.find(needle, at + len(needle))
    pieces = list(strip.divide([*cuts, strip.cell_length]))  # the last cut: the rest of the line
    out = []
    for i, piece in enumerate(pieces):
        if i % 2:
            piece = Strip([Segment(s.text, (s.style or Style()) + style, s.control) for s in piece])
        out.append(piece)
    return Strip.join(out)


def wrap_plain(line: str, width: int) -> list[str]:
    """A line of printable ASCII cut into rows of `width` at spaces (a word longer than a row
    is cut where the row ends), as Rich wraps text, without its cost."""
    rows = []
    while len(line) > width:
        cut = line.rfind(" ", 0, width + 1)
        if cut <= 0:
            rows.append(line[:width])
            line = line[width:]
        else:
            rows.append(line[:cut].rstrip(" ") or line[:cut])
            line = line[cut + 1 :]
    rows.append(line)
    return rows


class Host(Protocol):
    """What draws blocks: the app (its console), the styles of its component classes, and the
    session shown (named in fold lines)."""

    @property
    def app(self) -> App[Any]: ...

    @property
    def session_id(self) -> str | None: ...

    def style_of(self, name: str) -> Style: ...


class Block:
    """A piece of a turn drawn as lines: made once per width and kept.

    Args:
        indent: blank cells left of the lines.
        right: blank cells right of them.
    """

    def __init__(self, *, indent: int = 0, right: int = 0) -> None:
        self.indent = indent
        self.right = right
        self._made: dict[int, list[Strip]] = {}
        """Lines by width: the last two widths asked (a layout may try with and without a
        scrollbar)."""

    def lines(self, view: Host, width: int) -> list[Strip]:
        """The block's lines at `width` (the view's content width)."""
        made = self._made.get(width)
        if made is None:
            made = self.make(view, max(1, width - self.indent - self.right))
            if len(self._made) >= 2:
                del self._made[next(iter(self._made))]
            self._made[width] = made
        return made

    def make(self, view: Host, width: int) -> list[Strip]:
        """The lines at `width` (the width inside the block's indents), indented."""
        raise NotImplementedError

    def indented(self, lines: list[Strip]) -> list[Strip]:
        """`lines` after the block's indent."""
        if not self.indent:
            return lines
        pad = Segment(" " * self.indent)
        return [KeptStrip([pad, *line], line.cell_length + self.indent) for line in lines]

    def changed(self) -> None:
        """What the block shows changed: make its lines again when next asked."""
        self._made.clear()


def render_strips(console: Console, renderable: RenderableType, width: int) -> list[Strip]:
    """`renderable` rendered by Rich at `width` as strips."""
    options = console.options.update(width=width, max_width=width, height=None, highlight=False)
    return [KeptStrip(line) for line in console.render_lines(renderable, options, pad=False, new_lines=False)]


class RichBlock(Block):
    """Any Rich renderable, made by `make_renderable` from the view's styles when first drawn."""

    def __init__(
        self, make_renderable: Callable[[StyleOf], RenderableType], *, indent: int = 0, right: int = 0
    ) -> None:
        super().__init__(indent=indent, right=right)
        self._make = make_renderable
        self._renderable: RenderableType | None = None

    def make(self, view: Host, width: int) -> list[Strip]:
        if self._renderable is None:
            self._renderable = self._make(view.style_of)
        return self.indented(render_strips(view.app.console, self._renderable, width))


class MarkdownBlock(Block):
    """A stretch of Markdown (finished blocks of a reply, or a whole one), rendered with Rich.

    Args:
        source: the Markdown.
        gap: a blank line before it (it continues a reply cut at a blank line).
    """

    def __init__(self, source: str, *, gap: bool = False, indent: int = 2, right: int = 2) -> None:
        super().__init__(indent=indent, right=right)
        self.source = source
        self.gap = gap
        self._renderable: Any = None

    def make(self, view: Host, width: int) -> list[Strip]:
        if self._renderable is None:
            from tui.ui.markdown import reply_markdown

            self._renderable = reply_markdown(self.source)
        made = self.indented(render_strips(view.app.console, self._renderable, width))
        return [Strip.blank(0), *made] if self.gap and made else made


class FoldBlock(Block):
    """The line standing for the lines of a reply left out between its head and its tail."""

    def __init__(self, hidden: int, *, indent: int = 2, right: int = 2) -> None:
        super().__init__(indent=indent, right=right)
        self.hidden = hidden

    def make(self, view: Host, width: int) -> list[Strip]:
        fold = Text(fold_line(self.hidden, view.session_id), style=view.style_of("lines--fold"))
        return self.indented(render_strips(view.app.console, fold, width))


def block_ends(source: str) -> list[int]:
    """Where `source` may be cut between Markdown blocks: after each blank line outside a code
    fence."""
    ends = []
    fenced = False
    offset = 0
    for line in source.splitlines(keepends=True):
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
        offset += len(line)
        if not fenced and not line.strip():
            ends.append(offset)
    return ends


def markdown_blocks(source: str) -> list[Block]:
    """A Markdown reply as blocks: whole when short; else its first `MARKDOWN_HEAD` and last
    `MARKDOWN_TAIL` characters (cut between blocks) with a `FoldBlock` between."""
    if len(source) <= MARKDOWN_HEAD + MARKDOWN_TAIL:
        return [MarkdownBlock(source)]
    ends = block_ends(source)
    head = next((end for end in ends if end >= MARKDOWN_HEAD), 0)
    tail = next((end for end in reversed(ends) if end <= len(source) - MARKDOWN_TAIL), 0)
    if not head or tail <= head:
        return [MarkdownBlock(source)]
    hidden = source.count("\n", head, tail)
    return [MarkdownBlock(source[:head]), FoldBlock(hidden), MarkdownBlock(source[tail:], gap=True)]


def fold_markdown(blocks: list[Block]) -> list[Block]:
    """`blocks` of a reply (Markdown blocks and at most one fold) with those past the first
    `MARKDOWN_HEAD` and before the last `MARKDOWN_TAIL` characters folded into one line."""

    def size(block: Block) -> int:
        return len(block.source) if isinstance(block, MarkdownBlock) else 0

    total = sum(size(b) for b in blocks)
    if total <= MARKDOWN_HEAD + MARKDOWN_TAIL:
        return blocks
    head: list[Block] = []
    kept = 0
    for block in blocks:
        if kept >= MARKDOWN_HEAD or isinstance(block, FoldBlock):
            break
        head.append(block)
        kept += size(block)
    tail: list[Block] = []
    kept = 0
    for block in reversed(blocks[len(head) :]):
        if kept >= MARKDOWN_TAIL or isinstance(block, FoldBlock):
            break
        tail.insert(0, block)
        kept += size(block)
    middle = blocks[len(head) : len(blocks) - len(tail)]
    if not middle:
        return blocks
    hidden = 0
    for block in middle:
        if isinstance(block, FoldBlock):
            hidden += block.hidden
        elif isinstance(block, MarkdownBlock):
            hidden += block.source.count("\n")
    return [*head, FoldBlock(hidden), *tail]


class OutputBlock(Block):
    """Program output as printed, folded: its first `head` and last `tail` lines are kept, the
    lines between only counted; appending wraps only the new lines.

    Args:
        text: the output so far.
        style_name: the component class styling it (none: the view's own style).
    """

    def __init__(
        self,
        text: str = "",
        *,
        head: int = HEAD,
        tail: int = TAIL,
        style_name: str | None = None,
        indent: int = 2,
        right: int = 2,
    ) -> None:
        super().__init__(indent=indent, right=right)
        self.head_max, self.tail_max = head, tail
        self.style_name = style_name
        self.head: list[str] = []
        self.tail: deque[str] = deque()
        self.hidden = 0
        """How many lines are between the head and the tail (not kept)."""
        self.partial = ""
        """The last line while it has no newline yet."""
        self._partial_more = 0
        self._wrapped: dict[int, dict[int, list[Strip]]] = {}
        """Each kept line's strips by its number, for the last two widths."""
        self._fold: tuple[tuple[int, int], list[Strip]] = ((-1, -1), [])
        self._traceback: dict[int, list[tuple[int, int, Style]]] = {}
        """The coloured spans of the kept lines that belong to a Python traceback, by line number."""
        self._inside = False
        """Whether the last complete line was inside a traceback."""
        if text:
            self.append(text)

    @property
    def line_count(self) -> int:
        """Every line of the output, shown or hidden."""
        return len(self.head) + self.hidden + len(self.tail) + (1 if self.partial else 0)

    def append(self, text: str) -> None:
        """Add output; only its last `tail` lines are kept past the head."""
        if not text:
            return
        lines = visible(text).split("\n")  # a program's escapes are shown, never sent on
        first, more = self.partial + lines[0], self._partial_more
        self.partial, self._partial_more = "", 0
        if len(lines) == 1:
            self._set_partial(first, more)
            self.changed()
            return
        self._set_partial(lines.pop(), 0)
        lines[0] = self._cut(first, more)

        def line(i: int) -> str:  # the first is cut already
            return lines[i] if i == 0 else self._cut(lines[i])

        n = len(lines)
        base = len(self.head) + self.hidden + len(self.tail)
        keep_from = n - self.tail_max
        for i in range(n):
            spans, self._inside = traceback_spans(lines[i], self._inside)
            if spans and (base + i < self.head_max or i >= keep_from):
                self._traceback[base + i] = spans
        start = min(n, max(0, self.head_max - len(self.head)))
        self.head.extend(line(i) for i in range(start))
        kept_from = max(start, n - self.tail_max)
        self.hidden += kept_from - start
        self.tail.extend(line(i) for i in range(kept_from, n))
        while len(self.tail) > self.tail_max:
            self.tail.popleft()
            self.hidden += 1
        if self._traceback:
            first_kept = len(self.head) + self.hidden
            for gone in [k for k in self._traceback if len(self.head) <= k < first_kept]:
                del self._traceback[gone]
        self.changed()

    def fold_in(self, lines: int) -> None:
        """`lines` more lines came that are not given (they were left out of what is kept): the
        lines kept past the head, and those, are hidden; later lines go after them."""
        if not lines:
            return
        if self.partial:
            self.append("\n")
        self.head_max = len(self.head)
        self.hidden += len(self.tail) + lines
        self.tail.clear()
        self._traceback = {k: v for k, v in self._traceback.items() if k < len(self.head)}
        self._inside = False
        self.changed()

    def _set_partial(self, line: str, more: int) -> None:
        if len(line) > LINE_LIMIT:
            more += len(line) - LINE_LIMIT
            line = line[:LINE_LIMIT]
        self.partial, self._partial_more = line, more

    def _cut(self, line: str, more: int = 0) -> str:
        more += max(0, len(line) - LINE_LIMIT)
        return f"{line[:LINE_LIMIT]} … ({more:,} more characters)" if more else line

    def _wrap(
        self,
        view: Host,
        line: str,
        width: int,
        style: Style | None,
        spans: list[tuple[int, int, Style]] | None = None,
    ) -> list[Strip]:
        if spans:
            text = Text(line, style=style or "", end="")
            for start, end, span_style in spans:
                text.stylize(span_style, start, end)
            strips = render_strips(view.app.console, text, width) or [Strip.blank(0)]
        elif line.isascii() and line.isprintable():
            strips = [KeptStrip([Segment(row, style)], len(row)) for row in wrap_plain(line, width)]
        else:
            text = verbatim_text(line)
            if style is not None:
                text.stylize(style)
            strips = render_strips(view.app.console, text, width) or [Strip.blank(0)]
        return self.indented(strips)

    def make(self, view: Host, width: int) -> list[Strip]:
        wrapped = self._wrapped.get(width)
        if wrapped is None:
            if len(self._wrapped) >= 2:
                del self._wrapped[next(iter(self._wrapped))]
            wrapped = self._wrapped[width] = {}
        style = view.style_of(self.style_name) if self.style_name else None
        out: list[Strip] = []
        colour = self._traceback.get
        for n, line in enumerate(self.head):
            got = wrapped.get(n)
            if got is None:
                got = wrapped[n] = self._wrap(view, line, width, style, colour(n))
            out.extend(got)
        if self.hidden:
            key = (self.hidden, width)
            if self._fold[0] != key:
                fold = Text(fold_line(self.hidden, view.session_id), style=view.style_of("lines--fold"))
                self._fold = (key, self.indented(render_strips(view.app.console, fold, width)))
            out.extend(self._fold[1])
        start = len(self.head) + self.hidden
        for n, line in enumerate(self.tail, start):
            got = wrapped.get(n)
            if got is None:
                got = wrapped[n] = self._wrap(view, line, width, style, colour(n))
            out.extend(got)
        if len(wrapped) > 2 * (self.head_max + self.tail_max):
            keep = set(range(len(self.head))) | set(range(start, start + len(self.tail)))
            for n in [n for n in wrapped if n not in keep]:
                del wrapped[n]
        if self.partial:
            partial = self.partial
            if self._partial_more:
                partial += f" … ({self._partial_more:,} more characters)"
            spans = traceback_spans(self.partial, self._inside)[0]
            out.extend(self._wrap(view, partial, width, style, spans))
        return out
