"""One turn of the transcript, drawn as lines: `TurnView` for an ended turn, `LiveTurn` for the
one streaming (`tui/ui/widgets/live.py`, with the blocks it is fed).

Neither is a widget: the transcript (`TranscriptView`, one scroll view) asks each for its lines at
its width and draws them a line at a time. A turn is a list of blocks (its prompt, tools, reply,
outcome) whose lines are made once per width and kept, so drawing it again wraps nothing; a long
program output is folded to its first and last lines, a long reply to its first and last blocks.

The running turn is made of the same blocks, fed as the turn streams: its reply's finished
Markdown blocks are rendered once and kept (only the unfinished tail is rendered again at each
flush, every 50 ms), program output wraps only the lines added, and a call's title changes alone
when it ends. New output changes only the running turn's lines. When the turn ends, its `TurnView`
takes the blocks the live turn already made instead of rendering the reply again.

A session whose agent is the python one replies with what its program printed: such a reply is
shown verbatim (every space and line kept, nothing read as Markup or Markdown) by an
`OutputBlock`, which keeps only the output's first and last lines for the screen and counts the
rest, so a program printing a million lines costs the screen no more than one printing 300.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip

from tui.protocol import (
    Diff,
    PlanEntry,
    ToolRecord,
    TurnRecord,
)
from tui.protocol.state import Step, steps
from tui.protocol.wording import tool_error
from tui.ui.pieces import ASKING, outcome_text, prompt_text, tool_title
from tui.ui.widgets.diff import diff_text
from tui.ui.widgets.lines import (
    Block,
    Host,
    KeptStrip,
    OutputBlock,
    RichBlock,
    StyleOf,
    mark_matches,
    markdown_blocks,
    render_strips,
)
from tui.ui.widgets.plan import plan_text

if TYPE_CHECKING:
    from textual.app import App

__all__ = [
    "Drawn",
    "NoteLine",
    "TurnView",
    "safe_cut",
]

FLUSH_EVERY = 0.05
"""Seconds between draws of what streamed into the running turn."""
FREEZE_AT = 2_000
"""Characters of a streaming reply's unfinished tail past which its finished blocks are frozen
(rendered once and kept)."""
LIVE_TITLE = 2
"""Cells left of a running call's title."""
LIVE_DIFF = 5
"""Cells left of a running call's diff (under its title, as the call's output)."""
MAKING = threading.RLock()
"""Held while an entry makes its lines or forgets them: the transcript makes the lines of entries
out of view in a thread, and the app's loop may ask the same entry at the same time."""


def safe_cut(source: str) -> int:
    """Where `source` may be split into finished blocks and the rest: after its last blank line
    outside a code fence (0 when there is none)."""
    cut = 0
    fenced = False
    offset = 0
    lines = source.splitlines(keepends=True)
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        if stripped.startswith("```") or stripped.startswith("~~~"):
            fenced = not fenced
        offset += len(line)
        if not fenced and not line.strip() and i + 1 < len(lines):
            cut = offset
    return cut


@dataclass
class Part:
    """One piece of a turn, in the order it happened: text, a tool call, or a line (a question
    answered)."""

    kind: Literal["text", "tool", "line"]
    text: str = ""
    tool: ToolRecord | None = None
    blocks: list[Block] | None = field(default=None, repr=False)
    """The text as the running turn already drew it (reused by the ended turn)."""


def parts_of(record: TurnRecord) -> list[Part]:
    """A record's parts in the order they came, as far as it says (`steps`); a record that kept
    no places has its tools (each question's answer under the tool that asked it), then its reply."""
    if record.lines or any(tool.at_reply for tool in record.tools):
        return [_part(step) for step in steps(record)]
    parts: list[Part] = []
    answered = iter(record.answered)
    for tool in record.tools:
        parts.append(Part("tool", tool=tool))
        if tool.name in ASKING:
            line = next(answered, None)
            if line is not None:
                parts.append(Part("line", line))
    if record.reply:
        parts.append(Part("text", record.reply))
    return parts


def _part(step: Step) -> Part:
    if step[0] == "tool":
        return Part("tool", tool=step[1])
    return Part(step[0], step[1])


def kept_lines(record: TurnRecord) -> set[str]:
    """The lines an ended turn shows where they came: its answered questions and notes (not the
    other lines its live view showed, such as a model change, which the record does not keep)."""
    return {*record.answered, *(line.text for line in record.lines if line.kind != "before")}


class Drawn:
    """Something the transcript draws as lines: an ended turn, the running one, a note.

    It is drawn by a `host` (the transcript), which gives it the app's console and styles and
    places it; `lines(width)` are kept per width until what it shows changes.
    """

    def __init__(self) -> None:
        self.host: Host | None = None
        self._made: dict[int, list[Strip]] = {}
        self.makes = 0
        """How many times its lines were made (at any width), for tests and benchmarks."""
        self.classes: set[str] = set()
        """Marks the transcript draws it with (``-selected``)."""
        self.highlight = ""
        """Text drawn highlighted wherever it occurs in it (any case); empty for none."""

    # --- as a host for its blocks ------------------------------------------------------------------
    @property
    def app(self) -> App[Any]:
        assert self.host is not None, "drawn before it was added to a transcript"
        return self.host.app

    @property
    def session_id(self) -> str | None:
        return self.host.session_id if self.host is not None else None

    def style_of(self, name: str) -> Style:
        return self.host.style_of(name) if self.host is not None else Style()

    # --- its lines ---------------------------------------------------------------------------------
    def blocks_now(self) -> list[Block]:
        """The blocks drawn now."""
        raise NotImplementedError

    def lines(self, width: int) -> list[Strip]:
        """Every line at `width`, the blank one closing it included."""
        made = self._made.get(width)
        if made is None:
            with MAKING:
                made = self._made.get(width)
                if made is None:
                    made = []
                    for block in self.blocks_now():
                        made.extend(block.lines(self, width))
                    made.append(Strip.blank(0))
                    if len(self._made) >= 2:
                        del self._made[next(iter(self._made))]
                    self._made[width] = made
                    self.makes += 1
        return made

    def made_at(self, width: int) -> bool:
        """Whether its lines at `width` are made (its height is known without making them)."""
        return width in self._made

    def forget(self) -> None:
        """Forget its lines: they are made again when next asked."""
        with MAKING:
            self._made.clear()

    def changed(self) -> None:
        """What it shows changed: make its lines again, and tell the transcript."""
        self.forget()
        changed = getattr(self.host, "drawn_changed", None)
        if changed is not None:
            changed(self)

    # --- where it is (asked of the transcript) ------------------------------------------------------
    def has_class(self, name: str) -> bool:
        return name in self.classes

    @property
    def is_attached(self) -> bool:
        """Whether the transcript draws it now."""
        placed: Callable[[Drawn], Region | None] | None = getattr(self.host, "place_of", None)
        return placed is not None and placed(self) is not None

    @property
    def virtual_region(self) -> Region:
        """Where it is in the transcript's whole height (empty when not drawn)."""
        placed: Callable[[Drawn], Region | None] | None = getattr(self.host, "place_of", None)
        return (placed(self) if placed is not None else None) or Region()

    @property
    def region(self) -> Region:
        """Where it is on the screen (it may reach outside the transcript's view)."""
        where: Callable[[Drawn], Region] | None = getattr(self.host, "screen_region_of", None)
        return where(self) if where is not None else Region()

    @property
    def content_size(self) -> Size:
        """Its width (the transcript's content width) and height (the blank line after it left
        out)."""
        width = self.virtual_region.width or int(getattr(self.host, "line_width", 0))
        return Size(width, len(self.lines(width)) - 1 if width else 0)  # not the blank line after it

    @property
    def size(self) -> Size:
        """Its width and height, the blank line after it left out."""
        return self.content_size

    def render_lines(self, crop: Region) -> list[Strip]:
        """Its lines in `crop` (its own coordinates), as the transcript draws them."""
        lines = self.lines(self.content_size.width)
        if self.highlight:
            match, needle = self.style_of("lines--match"), self.highlight.lower()
            lines = [mark_matches(line, needle, match) for line in lines]
        return [
            lines[y] if 0 <= y < len(lines) else Strip.blank(crop.width) for y in range(crop.y, crop.bottom)
        ]


class PromptBlock(Block):
    """A turn's prompt and who sent it, with a hanging indent: the mark alone in its column, so a
    long line wraps under the prompt's text (as `prompt_block` lays it out, without a table)."""

    def __init__(self, record: TurnRecord, *, python: bool = False) -> None:
        super().__init__()
        self.record = record
        self.python = python

    def make(self, view: Host, width: int) -> list[Strip]:
        record = self.record
        body = prompt_text(
            record.prompt, record.by, view.style_of, record.client_id, python=self.python, mark=False
        )
        lines = render_strips(view.app.console, body, max(1, width - 2))
        mark = Segment("\u276f ", view.style_of("turn--mark"))
        pad = Segment("  ")
        return [
            KeptStrip([mark if n == 0 else pad, *line], line.cell_length + 2) for n, line in enumerate(lines)
        ]


class NoteLine(Drawn):
    """A line between turns: a note for the agent, an event this version does not know."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self._block = RichBlock(lambda style: Text(text, style=style("transcript--note")))

    def blocks_now(self) -> list[Block]:
        return [self._block]


class TurnView(Drawn):
    """An ended turn: who asked what, the tools it called, the reply, its outcome.

    A click on it (or Enter when selected) shows the tools' output. `highlight` marks a text
    wherever it occurs in the turn.
    """

    def __init__(
        self,
        record: TurnRecord,
        parts: list[Part] | None = None,
        *,
        expanded: bool = False,
        verbatim: bool = False,
    ) -> None:
        super().__init__()
        self.record = record
        self.verbatim = verbatim
        """Whether the reply is program output, shown as printed (not Markdown)."""
        self.parts = parts if parts is not None else parts_of(record)
        self._outputs: dict[str, OutputBlock] = {}
        self._blocks: list[Block] | None = None
        self._expanded = expanded

    @property
    def blocks(self) -> list[Block]:
        """The turn's blocks, made when first drawn (a turn scrolled past costs nothing)."""
        if self._blocks is None:
            self._blocks = self._make_blocks()
        return self._blocks

    def blocks_now(self) -> list[Block]:
        return self.blocks

    @property
    def expanded(self) -> bool:
        """Whether the tools' output is shown."""
        return self._expanded

    @expanded.setter
    def expanded(self, value: bool) -> None:
        if value != self._expanded:
            self._expanded = value
            if self._blocks is not None:
                self._blocks = self._make_blocks()
            self.changed()

    def action_toggle_tools(self) -> None:
        self.expanded = not self.expanded

    def has_tools(self) -> bool:
        return any(p.kind == "tool" for p in self.parts)

    def _make_blocks(self) -> list[Block]:
        record = self.record
        blocks: list[Block] = [PromptBlock(record, python=self.verbatim)]
        if record.plan:
            blocks.append(_plan_block(record.plan))
        shown: set[str] = set()
        kept = kept_lines(record)
        for part in self.parts:
            if part.kind == "tool" and part.tool is not None:
                blocks.extend(self._tool_blocks(part.tool))
            elif part.kind == "line":
                if part.text in kept and (part.text not in shown or part.text not in record.answered):
                    shown.add(part.text)
                    blocks.append(_line(part.text, "turn--who"))
            elif part.text:
                if part.blocks is None:
                    part.blocks = [OutputBlock(part.text)] if self.verbatim else markdown_blocks(part.text)
                blocks.extend(part.blocks)
        blocks.extend(_line(line, "turn--who") for line in record.answered if line not in shown)
        if outcome_text(record, lambda _: None) is not None:
            blocks.append(RichBlock(lambda style: outcome_text(record, style) or Text(), indent=2))
        return blocks

    def _tool_blocks(self, tool: ToolRecord) -> list[Block]:
        expanded = self.expanded
        blocks: list[Block] = [_title_block(tool, tool.status, open=expanded)]
        if expanded and tool.output:
            output = self._outputs.get(tool.call_id)
            if output is None:
                output = self._outputs[tool.call_id] = OutputBlock(
                    tool.output, style_name="turn--output", indent=4, right=0
                )
            blocks.append(output)
        if expanded:  # a collapsed ``▸`` hides its diffs as it hides its output
            blocks.extend(_diff_block(diff) for diff in tool.diffs)
        return blocks


def _title_block(tool: ToolRecord, status: str | None, *, open: bool, live: bool = False) -> RichBlock:
    """A call's title: ``▸``/``▾`` and the call in an ended turn; in the running one, ``▶``/``▼``
    in the text's colour (red when it failed), as a folded block is drawn."""

    def title(style: StyleOf) -> Text:
        if live:
            mark = "▼ " if open else "▶ "
            colour = style("turn--failed") if status == "error" else Style()
        else:
            mark = "▾ " if open else "▸ "
            colour = style("turn--tool")
        line = Text(
            mark + tool_title(tool.name, tool.args, status, title=tool.title, kind=tool.kind), style=colour
        )
        error = tool_error(tool.error)
        if error:
            line.append(f"  {error}", style=colour if live else style("turn--failed"))
        return line

    return RichBlock(title, indent=LIVE_TITLE if live else 2)


def _diff_block(diff: Diff, *, styled: bool = False, indent: int = 4) -> RichBlock:
    """A call's edit as a diff: the running turn's coloured by the view's styles, an ended
    turn's by the default ones."""
    names = ("header", "hunk", "removed", "added")
    return RichBlock(
        lambda style: diff_text(diff, _styles(style, "diff", names) if styled else None), indent=indent
    )


def _plan_block(entries: Sequence[PlanEntry], *, styled: bool = False) -> RichBlock:
    kept = list(entries)
    names = ("completed", "in_progress", "pending")
    return RichBlock(
        lambda style: plan_text(kept, _styles(style, "plan", names) if styled else None), indent=2
    )


def _styles(style: StyleOf, prefix: str, names: Sequence[str]) -> dict[str, Style | str]:
    return {name: style(f"{prefix}--{name}") for name in names}


def _line(text: str, style_name: str) -> RichBlock:
    return RichBlock(lambda style: Text(text, style=style(style_name)), indent=2)
