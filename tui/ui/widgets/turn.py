"""One turn of the transcript: `TurnView` for an ended turn, `LiveTurn` for the one streaming.

An ended turn is a single `LinesView`: its prompt, tools, reply and outcome are blocks whose
lines are made once per width and kept, so laying it out again wraps nothing; a long program
output is folded to its first and last lines. Only the running turn is a live tree: a Textual
`Markdown` fed through `Markdown.get_stream` with writes throttled to every 50 ms, whose
finished blocks are rendered once into one `LinesView` above it (the live Markdown keeps only
the unfinished tail), and a `ToolBlock` for each call. When the turn ends, its `TurnView` takes
the blocks the live turn already made instead of rendering the reply again.

A session whose agent is the python one replies with what its program printed: such a reply is
shown verbatim (every space and line kept, nothing read as Markup or Markdown) by an
`OutputBlock`, which keeps only the output's first and last lines for the screen and counts the
rest, so a program printing a million lines costs the screen no more than one printing 300.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from rich.console import RenderableType
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.markup import escape
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Collapsible, Static

from tui.protocol import (
    By,
    Diff,
    PlanEntry,
    ToolEnded,
    ToolOutput,
    ToolRecord,
    ToolStarted,
    ToolUpdated,
    TurnRecord,
)
from tui.protocol.state import Step, steps, tool_record, update_tool
from tui.ui.markdown import parser
from tui.ui.pieces import outcome_text, prompt_block, tool_title
from tui.ui.widgets.diff import DiffView, diff_text
from tui.ui.widgets.lines import (
    Block,
    LinesView,
    MarkdownBlock,
    OutputBlock,
    RichBlock,
    StyleOf,
    fold_markdown,
    markdown_blocks,
)
from tui.ui.widgets.plan import PlanView, plan_text
from tui.ui.widgets.thinking import ThinkingBlock

if TYPE_CHECKING:
    from textual.widgets._markdown import MarkdownStream

__all__ = [
    "LiveTurn",
    "ReplySegment",
    "ToolBlock",
    "TurnView",
    "VerbatimSegment",
    "safe_cut",
]

FLUSH_EVERY = 0.05
"""Seconds between writes into the streaming Markdown (writing every chunk is 7x slower)."""
FREEZE_AT = 2_000
"""Characters of live Markdown source past which its finished blocks are frozen."""
ASKING = frozenset({"ask", "ask_user"})
"""Tools that put a question to the people attached: an answered line goes under them."""


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


class TurnView(LinesView):
    """An ended turn as one widget: who asked what, the tools it called, the reply, its outcome.

    Click (or Enter when focused) shows the tools' output. `highlight` marks a text wherever it
    occurs in the turn.
    """

    BINDINGS = [("enter", "toggle_tools", "Tool output")]

    DEFAULT_CSS = """
    TurnView { height: auto; padding: 0 0 1 0; }
    TurnView:focus { background: $boost; }
    TurnView > .turn--prompt { color: $text; text-style: bold; }
    TurnView > .turn--who { color: $text-muted; }
    TurnView > .turn--mark { color: $accent; text-style: bold; }
    TurnView > .turn--tool { color: $text-secondary; }
    TurnView > .turn--output { color: $text-muted; }
    TurnView > .turn--failed { color: $text-error; text-style: bold; }
    TurnView > .turn--interrupted { color: $text-warning; text-style: bold; }
    """
    COMPONENT_CLASSES = LinesView.COMPONENT_CLASSES | {
        "turn--prompt",
        "turn--who",
        "turn--mark",
        "turn--tool",
        "turn--output",
        "turn--failed",
        "turn--interrupted",
    }

    expanded: reactive[bool] = reactive(False)
    """Whether the tools' output is shown."""

    def __init__(
        self,
        record: TurnRecord,
        parts: list[Part] | None = None,
        *,
        expanded: bool = False,
        verbatim: bool = False,
    ) -> None:
        super().__init__()
        self.can_focus = True
        self.record = record
        self.verbatim = verbatim
        """Whether the reply is program output, shown as printed (not Markdown)."""
        self.parts = parts if parts is not None else parts_of(record)
        self._outputs: dict[str, OutputBlock] = {}
        self._built = False
        self.set_reactive(TurnView.expanded, expanded)

    def _measure(self, width: int) -> None:
        if not self._built:
            self._built = True
            self.blocks = self._blocks()
        super()._measure(width)

    def _blocks(self) -> list[Block]:
        """The turn's blocks, made when first drawn (a turn scrolled past costs nothing)."""
        record = self.record
        blocks: list[Block] = [
            RichBlock(
                lambda style: prompt_block(
                    record.prompt, record.by, style, record.client_id, python=self.verbatim
                )
            )
        ]
        if record.plan:
            blocks.append(RichBlock(lambda _: plan_text(record.plan), indent=2))
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

        def title(style: StyleOf) -> Text:
            mark = "▾ " if expanded else "▸ "
            line = Text(
                mark + tool_title(tool.name, tool.args, tool.status, title=tool.title, kind=tool.kind),
                style=style("turn--tool"),
            )
            if tool.error:
                line.append(f"  {tool.error}", style=style("turn--failed"))
            return line

        blocks: list[Block] = [RichBlock(title, indent=2)]
        if expanded and tool.output:
            output = self._outputs.get(tool.call_id)
            if output is None:
                output = self._outputs[tool.call_id] = OutputBlock(
                    tool.output, style_name="turn--output", indent=4, right=0
                )
            blocks.append(output)
        blocks.extend(_diff_block(diff) for diff in tool.diffs)
        return blocks

    def watch_expanded(self) -> None:
        if self._built:
            self.set_blocks(self._blocks())

    def on_click(self, event: events.Click) -> None:
        if any(p.kind == "tool" for p in self.parts):
            self.expanded = not self.expanded

    def action_toggle_tools(self) -> None:
        self.expanded = not self.expanded


def _diff_block(diff: Diff) -> RichBlock:
    return RichBlock(lambda _: diff_text(diff), indent=4)


def _line(text: str, style_name: str) -> RichBlock:
    return RichBlock(lambda style: Text(text, style=style(style_name)), indent=2)


class ToolBlock(Collapsible):
    """A tool or program call of the running turn: its output streams inside (folded like a
    reply's), its outcome in the title."""

    DEFAULT_CSS = """
    ToolBlock { height: auto; border: none; padding: 0 0 0 1; margin: 0; background: transparent; }
    ToolBlock > Contents { padding: 0 0 0 3; }
    ToolBlock.-failed CollapsibleTitle { color: $text-error; }
    ToolBlock .tool--output { color: $text-muted; }
    """

    def __init__(self, event: ToolStarted) -> None:
        self.record = tool_record(event)
        self._block = OutputBlock(indent=0, right=0)
        self._output = LinesView([self._block], classes="tool--output")
        super().__init__(self._output, title=escape(self._summary(None)), collapsed=True)
        self._pending: list[str] = []

    def _summary(self, status: str | None) -> str:
        record = self.record
        return tool_title(record.name, record.args, status, title=record.title, kind=record.kind)

    def add_output(self, event: ToolOutput) -> None:
        """Keep output that arrived; it is shown at the next flush. An edit shows as its diff, open."""
        self.record.output += event.text
        if event.text:
            self._pending.append(event.text)
        if event.diff is not None:
            self.record.diffs.append(event.diff)
            self.query_one(Collapsible.Contents).mount(DiffView(event.diff))
            self.collapsed = False

    def update(self, event: ToolUpdated) -> None:
        """The agent described the call again: its title and arguments as it last said them; new
        output and diffs, when given, replace what was shown."""
        output = update_tool(self.record, event)
        if output is not None:
            self._pending = []
            self.record.output = "".join(output)
            self._block = OutputBlock(self.record.output, indent=0, right=0)
            self._output.set_blocks([self._block])
        if event.diffs is not None:
            contents = self.query_one(Collapsible.Contents)
            for view in list(contents.query(DiffView)):
                view.remove()
            for diff in event.diffs:
                contents.mount(DiffView(diff))
            if event.diffs:
                self.collapsed = False
        self.title = escape(self._summary(None))

    def flush(self) -> None:
        """Show the output that arrived since the last flush."""
        if self._pending:
            text, self._pending = "".join(self._pending), []
            self._block.append(text)
            self._output.changed()

    def end(self, event: ToolEnded) -> None:
        """Show the call's outcome."""
        self.flush()
        self.record.status, self.record.value, self.record.error = event.status, event.value, event.error
        title = self._summary(event.status)
        if event.error:
            title += f"  {event.error}"
        self.title = escape(title)
        self.set_class(event.status == "error", "-failed")


class ReplySegment(Vertical):
    """A stretch of reply text: a streaming `Markdown` under one `LinesView` of the finished
    blocks, each rendered once."""

    DEFAULT_CSS = """
    ReplySegment { height: auto; }
    ReplySegment > Markdown { padding: 0 2 0 2; margin: 0; }
    ReplySegment MarkdownFence > Label { padding: 1 0; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._chunks: list[str] = []
        self._live_source = ""
        from textual.widgets import Markdown  # on first use: most frames stream nothing

        self._markdown_class = Markdown
        self._frozen = LinesView()
        self._frozen.display = False
        self._markdown = Markdown(parser_factory=parser)
        self._stream: MarkdownStream | None = None

    @property
    def text(self) -> str:
        """The text written so far."""
        return "".join(self._chunks)

    def compose(self) -> ComposeResult:
        yield self._frozen
        yield self._markdown

    def on_mount(self) -> None:
        self._stream = self._markdown_class.get_stream(self._markdown)

    async def write(self, text: str) -> None:
        """Append text to the reply (the caller throttles and serializes calls)."""
        if self._stream is None:
            self._stream = self._markdown_class.get_stream(self._markdown)
        self._chunks.append(text)
        self._live_source += text
        await self._stream.write(text)
        if len(self._live_source) > FREEZE_AT:
            await self._freeze()

    async def _freeze(self) -> None:
        """Render the finished blocks once and keep streaming into a fresh, short Markdown."""
        cut = safe_cut(self._live_source)
        if cut <= 0:
            return
        head, tail = self._live_source[:cut], self._live_source[cut:]
        if self._stream is not None:
            await self._stream.stop()
        old = self._markdown
        self._markdown = self._markdown_class(parser_factory=parser)
        with self.app.batch_update():
            blocks = [*self._frozen.blocks, MarkdownBlock(head, gap=bool(self._frozen.blocks))]
            self._frozen.set_blocks(fold_markdown(blocks))
            self._frozen.display = True
            await self.mount(self._markdown, after=old)
            await old.remove()
        self._live_source = tail
        self._stream = self._markdown_class.get_stream(self._markdown)
        await self._stream.write(tail)

    async def finish(self) -> None:
        """Write what is pending and stop streaming."""
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None

    def drawn(self) -> list[Block]:
        """The reply as blocks for the ended turn: the finished ones as already drawn, the tail."""
        blocks = list(self._frozen.blocks)
        if self._live_source.strip():
            blocks.append(MarkdownBlock(self._live_source, gap=bool(blocks)))
        return fold_markdown(blocks)


class VerbatimSegment(LinesView):
    """A stretch of program output, drawn by an `OutputBlock`: each write wraps only its own
    lines, and past `HEAD` + `TAIL` lines the middle is counted, not kept."""

    def __init__(self) -> None:
        self._block = OutputBlock()
        super().__init__([self._block])
        self._chunks: list[str] = []

    @property
    def text(self) -> str:
        """The text written so far."""
        return "".join(self._chunks)

    async def write(self, text: str) -> None:
        """Append text (the caller throttles and serializes calls)."""
        self._chunks.append(text)
        self._block.append(text)
        self.changed()

    async def finish(self) -> None:
        """Nothing is pending: every write is shown at once."""

    def drawn(self) -> list[Block]:
        """The output as drawn, for the ended turn."""
        return [self._block]


class LiveTurn(Vertical):
    """The running turn: its prompt, then text and tool calls in the order they happen."""

    DEFAULT_CSS = """
    LiveTurn { height: auto; padding: 0 0 1 0; }
    LiveTurn > .live--line { padding: 0 0 0 2; color: $text-muted; }
    """

    def __init__(self, record: TurnRecord, *, verbatim: bool = False) -> None:
        super().__init__()
        self.record = record
        self.verbatim = verbatim
        """Whether the reply is program output, shown as printed (not Markdown)."""
        self.parts: list[Part] = []
        self._pending: list[str] = []
        self._segment: ReplySegment | VerbatimSegment | None = None
        self._segments: list[tuple[Part, ReplySegment | VerbatimSegment]] = []
        self._tools: dict[str, ToolBlock] = {}
        self._plan: PlanView | None = None
        self._thinking: ThinkingBlock | None = None
        """The reasoning block being written (a new one after reply text or a tool call)."""
        self._timer: Timer | None = None
        self._flushing = asyncio.Lock()
        """One flush at a time: the timer's and those before a tool, a line or the end."""

    def compose(self) -> ComposeResult:
        yield PromptLine(self.record.prompt, self.record.by, self.record.client_id, python=self.verbatim)

    def on_mount(self) -> None:
        self._timer = self.set_interval(FLUSH_EVERY, self.flush)

    def add_text(self, text: str) -> None:
        """A chunk of the reply: shown at the next flush."""
        self._pending.append(text)

    async def flush(self) -> None:
        """Write what arrived since the last flush into the reply and the tools' output."""
        async with self._flushing:
            await self._flush()

    async def _flush(self) -> None:
        for block in self._tools.values():
            block.flush()
        if self._thinking is not None:
            self._thinking.flush()
        if not self._pending:
            return
        text, self._pending = "".join(self._pending), []
        if self._segment is None:
            self._segment = VerbatimSegment() if self.verbatim else ReplySegment()
            self.parts.append(Part("text"))
            self._segments.append((self.parts[-1], self._segment))
            await self.mount(self._segment)
        self._thinking = None
        await self._segment.write(text)

    async def add_thinking(self, text: str) -> None:
        """A chunk of the model's reasoning, in a folded block of its own (shown at the next flush)."""
        if self._thinking is None:
            await self.flush()
            self._segment = None
            self._thinking = ThinkingBlock()
            await self.mount(self._thinking)
        self._thinking.add(text)

    async def tool_started(self, event: ToolStarted) -> None:
        """A call began: text before it is written first, the block goes after it."""
        await self.flush()
        self._segment = None
        self._thinking = None
        block = ToolBlock(event)
        self._tools[event.call_id] = block
        self.record.tools.append(block.record)
        self.parts.append(Part("tool", tool=block.record))
        await self.mount(block)

    def tool_output(self, event: ToolOutput) -> None:
        """A call's output: shown at the next flush."""
        block = self._tools.get(event.call_id)
        if block is not None:
            block.add_output(event)

    def tool_updated(self, event: ToolUpdated) -> None:
        """A call the agent described again."""
        block = self._tools.get(event.call_id)
        if block is not None:
            block.update(event)

    def tool_ended(self, event: ToolEnded) -> None:
        """A call ended."""
        block = self._tools.get(event.call_id)
        if block is not None:
            block.end(event)

    async def plan(self, entries: Sequence[PlanEntry]) -> None:
        """The agent's plan: shown once, then updated in place."""
        if self._plan is None:
            await self.flush()
            self._segment = None
            self._plan = PlanView(entries)
            await self.mount(self._plan)
        else:
            self._plan.show(entries)

    async def add_line(self, text: str) -> None:
        """A line in the turn: an answered question, a note (where it happened)."""
        await self.flush()
        self._segment = None
        self.parts.append(Part("line", text))
        await self.mount(Static(text, classes="live--line", markup=False))

    async def finish(self) -> None:
        """The turn ended: write everything pending and stop the timer."""
        async with self._flushing:
            # Stopped only between flushes: cancelling one midway would leave the Markdown
            # half-updated.
            if self._timer is not None:
                self._timer.stop()
                self._timer = None
            await self._flush()
        for part, segment in self._segments:
            await segment.finish()
            # kept whole only now: joining them at each flush would cost the length of the reply
            part.text, part.blocks = segment.text, segment.drawn()
        self.record.reply = "".join(part.text for part, _ in self._segments)


class PromptLine(Static):
    """The prompt of a running turn and who sent it."""

    DEFAULT_CSS = """
    PromptLine { height: auto; }
    PromptLine > .turn--prompt { color: $text; text-style: bold; }
    PromptLine > .turn--who { color: $text-muted; }
    PromptLine > .turn--mark { color: $accent; text-style: bold; }
    """
    COMPONENT_CLASSES = {"turn--prompt", "turn--who", "turn--mark"}

    def __init__(self, prompt: str, by: By, client_id: str | None = None, *, python: bool = False) -> None:
        super().__init__()
        self._prompt = prompt
        self._by = by
        self._client_id = client_id
        self._python = python

    def render(self) -> RenderableType:
        style = lambda n: self.get_component_rich_style(n, partial=True)  # noqa: E731
        return prompt_block(self._prompt, self._by, style, self._client_id, python=self._python)
