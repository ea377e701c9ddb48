"""One turn of the transcript: `TurnView` for an ended turn, `LiveTurn` for the one streaming.

An ended turn is a single cheap widget that renders its prompt, tools and reply once (Rich
renderables, cached by Textual per width); only the running turn is a live tree: a Textual
`Markdown` fed through `Markdown.get_stream` with writes throttled to every 50 ms, whose finished
blocks are frozen into `FrozenMarkdown` pieces so that a very long reply stays as fast as a short
one, and a `ToolBlock` for each call.

A session whose agent is the python one replies with what its program printed: such a reply is
shown verbatim (every space and line kept, nothing read as Markup or Markdown), streamed by
appending text and, past `FREEZE_AT` characters, freezing its finished lines the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from rich.console import ConsoleRenderable, Group, RenderableType
from rich.padding import Padding
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.markup import escape
from textual.reactive import reactive
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Collapsible, Static

from tui.protocol import By, PlanEntry, ToolEnded, ToolOutput, ToolRecord, ToolStarted, TurnRecord
from tui.protocol.state import tool_record
from tui.ui.markdown import parser, reply_markdown
from tui.ui.pieces import outcome_text, prompt_block, tool_title, verbatim_text
from tui.ui.widgets.diff import DiffView, diff_text
from tui.ui.widgets.plan import PlanView, plan_text
from tui.ui.widgets.thinking import ThinkingBlock

if TYPE_CHECKING:
    from textual.widgets._markdown import MarkdownStream

__all__ = [
    "FrozenMarkdown",
    "LiveTurn",
    "ToolBlock",
    "TurnView",
    "VerbatimSegment",
    "safe_cut",
]

FLUSH_EVERY = 0.05
"""Seconds between writes into the streaming Markdown (writing every chunk is 7x slower)."""
FREEZE_AT = 2_000
"""Characters of live Markdown source past which its finished blocks are frozen."""
OUTPUT_LINES = 200
"""The last lines of a tool's output a block shows."""


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
    """One piece of a turn, in the order it happened: text or a tool call."""

    kind: Literal["text", "tool"]
    text: str = ""
    tool: ToolRecord | None = None


def parts_of(record: TurnRecord) -> list[Part]:
    """A record's parts when the order is not known: its tools, then its reply."""
    parts = [Part("tool", tool=t) for t in record.tools]
    if record.reply:
        parts.append(Part("text", record.reply))
    return parts


class FrozenMarkdown(Widget):
    """Markdown rendered once, for a turn's finished blocks."""

    DEFAULT_CSS = """
    FrozenMarkdown { height: auto; padding: 0 2 0 2; }
    """

    def __init__(self, source: str) -> None:
        super().__init__()
        self.source = source
        self._markdown = reply_markdown(source)

    def render(self) -> RenderableType:
        return self._markdown


class TurnView(Widget):
    """An ended turn as one widget: who asked what, the tools it called, the reply, its outcome.

    Click (or Enter when focused) shows the tools' output.
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
    COMPONENT_CLASSES = {
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
        self._markdown: dict[int, ConsoleRenderable] = {}
        self.set_reactive(TurnView.expanded, expanded)

    def _style(self, name: str) -> Any:
        return self.get_component_rich_style(name, partial=True)

    def render(self) -> RenderableType:
        record = self.record
        pieces: list[RenderableType] = [
            prompt_block(record.prompt, record.by, self._style, record.client_id, python=self.verbatim)
        ]
        if record.plan:
            pieces.append(Padding(plan_text(record.plan), (0, 0, 0, 2)))
        for index, part in enumerate(self.parts):
            if part.kind == "tool" and part.tool is not None:
                tool = part.tool
                mark = "▾ " if self.expanded else "▸ "
                line = Text(
                    mark + tool_title(tool.name, tool.args, tool.status, title=tool.title, kind=tool.kind),
                    style=self._style("turn--tool"),
                )
                if tool.error:
                    line.append(f"  {tool.error}", style=self._style("turn--failed"))
                pieces.append(Padding(line, (0, 0, 0, 2)))
                if self.expanded and tool.output:
                    out = "\n".join(tool.output.splitlines()[-OUTPUT_LINES:])
                    pieces.append(Padding(Text(out, style=self._style("turn--output")), (0, 0, 0, 4)))
                pieces.extend(Padding(diff_text(diff), (0, 0, 0, 4)) for diff in tool.diffs)
            elif part.text:
                markdown = self._markdown.get(index)
                if markdown is None:
                    made = verbatim_text(part.text) if self.verbatim else reply_markdown(part.text)
                    markdown = self._markdown[index] = made
                pieces.append(Padding(markdown, (0, 2, 0, 2)))
        for answered in record.answered:
            pieces.append(Padding(Text(answered, style=self._style("turn--who")), (0, 0, 0, 2)))
        ending = outcome_text(record, self._style)
        if ending is not None:
            pieces.append(Padding(ending, (0, 0, 0, 2)))
        return Group(*pieces)

    def watch_expanded(self) -> None:
        self.refresh(layout=True)

    def on_click(self, event: events.Click) -> None:
        if any(p.kind == "tool" for p in self.parts):
            self.expanded = not self.expanded

    def action_toggle_tools(self) -> None:
        self.expanded = not self.expanded


class ToolBlock(Collapsible):
    """A tool or program call of the running turn: its output streams inside, its outcome in
    the title."""

    DEFAULT_CSS = """
    ToolBlock { height: auto; border: none; padding: 0 0 0 1; margin: 0; background: transparent; }
    ToolBlock > Contents { padding: 0 0 0 3; }
    ToolBlock.-failed CollapsibleTitle { color: $text-error; }
    ToolBlock .tool--output { color: $text-muted; }
    """

    def __init__(self, event: ToolStarted) -> None:
        self.record = tool_record(event)
        self._output = Static("", classes="tool--output", markup=False)
        super().__init__(self._output, title=escape(self._summary(None)), collapsed=True)
        self._dirty = False

    def _summary(self, status: str | None) -> str:
        record = self.record
        return tool_title(record.name, record.args, status, title=record.title, kind=record.kind)

    def add_output(self, event: ToolOutput) -> None:
        """Keep output that arrived; it is shown at the next flush. An edit shows as its diff, open."""
        self.record.output += event.text
        self._dirty = bool(self.record.output)
        if event.diff is not None:
            self.record.diffs.append(event.diff)
            self.query_one(Collapsible.Contents).mount(DiffView(event.diff))
            self.collapsed = False

    def flush(self) -> None:
        """Show the output that arrived since the last flush."""
        if self._dirty:
            self._dirty = False
            self._output.update("\n".join(self.record.output.splitlines()[-OUTPUT_LINES:]))

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
    """A stretch of reply text: a streaming `Markdown` behind frozen pieces of finished blocks."""

    DEFAULT_CSS = """
    ReplySegment { height: auto; }
    ReplySegment > Markdown { padding: 0 2 0 2; margin: 0; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.text = ""
        self._live_source = ""
        from textual.widgets import Markdown  # on first use: most frames stream nothing

        self._markdown_class = Markdown
        self._markdown = Markdown(parser_factory=parser)
        self._stream: MarkdownStream | None = None

    def compose(self) -> ComposeResult:
        yield self._markdown

    def on_mount(self) -> None:
        self._stream = self._markdown_class.get_stream(self._markdown)

    async def write(self, text: str) -> None:
        """Append text to the reply (the caller throttles and serializes calls)."""
        if self._stream is None:
            self._stream = self._markdown_class.get_stream(self._markdown)
        self.text += text
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
            await self.mount(FrozenMarkdown(head), before=old)
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


class VerbatimSegment(Vertical):
    """A stretch of program output: appended to a `Static`; past `FREEZE_AT` characters, its
    finished lines are frozen into a `Static` of their own so that each write stays short."""

    DEFAULT_CSS = """
    VerbatimSegment { height: auto; }
    VerbatimSegment > Static { padding: 0 2 0 2; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.text = ""
        self._live_source = ""
        self._live = Static("", markup=False)

    def compose(self) -> ComposeResult:
        yield self._live

    async def write(self, text: str) -> None:
        """Append text (the caller throttles and serializes calls)."""
        self.text += text
        self._live_source += text
        if len(self._live_source) > FREEZE_AT:
            cut = self._live_source.rfind("\n") + 1
            if cut > 0:
                head, self._live_source = self._live_source[:cut], self._live_source[cut:]
                await self.mount(Static(verbatim_text(head), markup=False), before=self._live)
        self._live.update(verbatim_text(self._live_source))
        self._live.display = bool(self._live_source)

    async def finish(self) -> None:
        """Nothing is pending: every write is shown at once."""


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
        self._pending = ""
        self._segment: ReplySegment | VerbatimSegment | None = None
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
        self.record.reply += text
        self._pending += text

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
        text, self._pending = self._pending, ""
        if self._segment is None:
            self._segment = VerbatimSegment() if self.verbatim else ReplySegment()
            self.parts.append(Part("text"))
            await self.mount(self._segment)
        self.parts[-1].text += text
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
        """A line in the turn: an answered question, a note."""
        await self.flush()
        self._segment = None
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
        for child in self.query(ReplySegment):
            await child.finish()


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
