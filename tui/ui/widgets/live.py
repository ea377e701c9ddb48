"""The running turn, drawn as lines: `LiveTurn` and the blocks it is fed as the turn streams.

A call's title and output (`ToolBlock`), the reply's Markdown (`ReplySegment`: finished blocks
rendered once and kept, only the unfinished tail rendered again at each flush) or a python
agent's printed output (`VerbatimSegment`), and the model's thinking (`ThinkingBlock`). When the
turn ends, its `TurnView` (`tui/ui/widgets/turn.py`) takes the blocks already made.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

from rich.text import Text
from textual.strip import Strip

from tui.link.changes import Snapshot
from tui.protocol import (
    Diff,
    PlanEntry,
    ToolEnded,
    ToolOutput,
    ToolRecord,
    ToolStarted,
    ToolUpdated,
    TurnRecord,
)
from tui.protocol.output import KeptOutput
from tui.protocol.state import RUNNING, RunningTurn, tool_record
from tui.ui.pieces import prompt_block, tool_title
from tui.ui.widgets.lines import (
    Block,
    Host,
    MarkdownBlock,
    OutputBlock,
    RichBlock,
    fold_markdown,
)
from tui.ui.widgets.turn import (
    FREEZE_AT,
    LIVE_DIFF,
    Drawn,
    Part,
    _diff_block,
    _line,
    _plan_block,
    _title_block,
    safe_cut,
)

if TYPE_CHECKING:
    from textual.timer import Timer

__all__ = ["GAP", "Gap", "LiveTurn", "Piece", "ReplySegment", "ThinkingBlock", "ToolBlock", "VerbatimSegment"]


class ToolBlock:
    """A tool or program call of the running turn: its title (its outcome once ended), then, when
    open, its output (folded like a reply's) and its diffs.

    It keeps no fact of the call: it reads the call, its output and its diffs from the running
    turn the reducer keeps (`LiveTurn.turn`, from the attachment's `Snapshot`), and keeps only its
    lines (its output wrapped so far, fed what arrived since it last drew) and whether it is open.
    """

    def __init__(self, call_id: str, turn: Callable[[], RunningTurn | None]) -> None:
        self.call_id = call_id
        self._turn = turn
        self._collapsed = True
        self.on_change: Callable[[], None] | None = None
        """Called when it opens or closes (the turn draws it again)."""
        self._output = _output_block()
        self._source: KeptOutput | None = None
        """The output drawn (the reducer's: a new one when the agent said it again whole)."""
        self._taken = 0
        """How many characters of it are drawn."""
        self._title: RichBlock | None = None
        self._title_key: tuple[object, ...] = ()
        self._diffs: list[RichBlock] = []
        self._diff_source: list[Diff] | None = None

    def _call(self) -> ToolRecord | None:
        turn = self._turn()
        return turn.tools.get(self.call_id) if turn is not None else None

    @property
    def record(self) -> ToolRecord | None:
        """The call as the reducer keeps it, with its output as kept (None once its turn is gone)."""
        turn, tool = self._turn(), self._call()
        if turn is None or tool is None:
            return None
        return tool.model_copy(update={"output": turn.output_of(self.call_id)})

    @property
    def status(self) -> str | None:
        """How it ended (None while it runs)."""
        tool = self._call()
        return None if tool is None or tool.status == RUNNING else tool.status

    def has_class(self, name: str) -> bool:
        return name == "-failed" and self.status == "error"

    @property
    def collapsed(self) -> bool:
        """Whether its output is hidden (a diff opens it; so does the turn's expansion)."""
        return self._collapsed

    @collapsed.setter
    def collapsed(self, value: bool) -> None:
        if value != self._collapsed:
            self._collapsed = value
            if self.on_change is not None:
                self.on_change()

    @property
    def title(self) -> str:
        """Its title as shown: the call, its outcome and its error."""
        tool = self._call()
        if tool is None:
            return ""
        title = tool_title(tool.name, tool.args, self.status, title=tool.title, kind=tool.kind)
        return f"{title}  {tool.error}" if tool.error else title

    def flush(self) -> bool:
        """Take in the output and the diffs that arrived since it last drew; whether some did.
        An edit shows as its diff, open."""
        turn, tool = self._turn(), self._call()
        if turn is None or tool is None:
            return False
        changed = False
        kept = turn.output.get(self.call_id)
        if kept is not None and kept is not self._source:  # its first output, or said again whole
            self._source, self._taken, self._output = kept, 0, _output_block()
            changed = True
        if kept is not None and kept.received != self._taken:
            new = kept.since(self._taken)
            if new is None:  # some of what came since was left out: drawn again from what is kept
                self._output = _output_block()
                self._output.append(kept.head)
                self._output.fold_in(kept.left_out_lines)
                self._output.append(kept.tail_text())
            else:
                self._output.append(new)
            self._taken = kept.received
            changed = True
        diffs = tool.diffs
        if diffs is not self._diff_source or len(diffs) != len(self._diffs):
            if diffs is not self._diff_source:
                self._diff_source, self._diffs = diffs, []
            more = diffs[len(self._diffs) :]
            self._diffs.extend(_diff_block(diff, styled=True, indent=LIVE_DIFF) for diff in more)
            if more:
                self.collapsed = False
            changed = True
        return changed

    def blocks(self, expanded: bool) -> list[Block]:
        """Its blocks as drawn now."""
        tool = self._call()
        if tool is None:  # its turn ended in the batch being drawn: the ended turn draws it
            return []
        open = expanded or not self.collapsed
        status = self.status
        key = (open, status, tool.title, tool.error, repr(tool.args))
        if self._title is None or key != self._title_key:
            self._title, self._title_key = _title_block(tool, status, open=open, live=True), key
        blocks: list[Block] = [self._title]
        if open and self._output.line_count:
            blocks.append(self._output)
        if open:
            blocks.extend(self._diffs)
        return blocks


def _output_block() -> OutputBlock:
    return OutputBlock(style_name="transcript--output", indent=4, right=0)


class Gap(Block):
    """A blank line."""

    def make(self, view: Host, width: int) -> list[Strip]:
        return [Strip.blank(0)]


GAP = Gap()


class ReplySegment:
    """A stretch of Markdown reply as it streams: its finished blocks rendered once and kept, its
    unfinished tail rendered again when it grows."""

    def __init__(self) -> None:
        self._chunks: list[str] = []
        self._frozen: list[Block] = []
        self._tail = ""
        self._tail_block: MarkdownBlock | None = None

    @property
    def text(self) -> str:
        """The text written so far."""
        return "".join(self._chunks)

    async def write(self, text: str) -> None:
        """Append text to the reply."""
        self._chunks.append(text)
        self._tail += text
        self._tail_block = None
        if len(self._tail) > FREEZE_AT:
            cut = safe_cut(self._tail)
            if cut > 0:
                head, self._tail = self._tail[:cut], self._tail[cut:]
                self._frozen = fold_markdown([*self._frozen, MarkdownBlock(head, gap=bool(self._frozen))])

    async def finish(self) -> None:
        """Nothing is pending: every write is taken in at once."""

    def blocks(self) -> list[Block]:
        """The reply as drawn now."""
        if not self._tail.strip():
            return list(self._frozen)
        if self._tail_block is None:
            self._tail_block = MarkdownBlock(self._tail, gap=bool(self._frozen))
        return [*self._frozen, self._tail_block]

    def drawn(self) -> list[Block]:
        """The reply as blocks for the ended turn: the finished ones as already drawn, the tail."""
        return fold_markdown(self.blocks())


class VerbatimSegment:
    """A stretch of program output, drawn by an `OutputBlock`: each write wraps only its own
    lines, and past `HEAD` + `TAIL` lines the middle is counted, not kept."""

    def __init__(self) -> None:
        self._block = OutputBlock()
        self._chunks: list[str] = []

    @property
    def text(self) -> str:
        """The text written so far."""
        return "".join(self._chunks)

    async def write(self, text: str) -> None:
        """Append text."""
        self._chunks.append(text)
        self._block.append(text)

    async def finish(self) -> None:
        """Nothing is pending: every write is shown at once."""

    def blocks(self) -> list[Block]:
        return [self._block]

    def drawn(self) -> list[Block]:
        """The output as drawn, for the ended turn."""
        return [self._block]


class ThinkingBlock:
    """The reasoning streamed between two parts of a reply (`thinking` events), folded to a line
    counting its words; the turn's expansion shows it."""

    def __init__(self) -> None:
        self.text = ""
        """The reasoning so far."""
        self._shown = -1
        self._blocks: list[Block] = []
        self._open = False

    def add(self, text: str) -> None:
        self.text += text

    @property
    def title(self) -> str:
        """Its title: how many words it has."""
        words = len(self.text.split())
        return f"thinking ({words} words)" if words else "thinking"

    @property
    def collapsed(self) -> bool:
        """Whether only its title shows (the turn's expansion shows it all)."""
        return not self._open

    def blocks(self, expanded: bool) -> list[Block]:
        if len(self.text) != self._shown or expanded != self._open:
            self._shown, self._open = len(self.text), expanded
            title = f"{'▾' if expanded else '▸'} {self.title}"
            self._blocks = [RichBlock(lambda style: Text(title, style=style("turn--thinking")), indent=2)]
            if expanded and self.text:
                body = self.text
                self._blocks.append(
                    RichBlock(lambda style: Text(body, style=style("turn--thinking")), indent=4)
                )
        return self._blocks


Piece = (
    tuple[Literal["text"], Part, "ReplySegment | VerbatimSegment"]
    | tuple[Literal["tool"], Part, ToolBlock]
    | tuple[Literal["thinking"], None, ThinkingBlock]
    | tuple[Literal["plan"], None, list[PlanEntry]]
    | tuple[Literal["line"], Part, RichBlock]
)


class LiveTurn(Drawn):
    """The running turn: its prompt, then text and tool calls in the order they happen; its
    calls drawn from the reducer's running turn (`show`), the reply as it streams.

    What arrives is kept and taken in at the next flush (every `FLUSH_EVERY` seconds, started by
    the transcript), which makes only the changed blocks' lines again and tells the transcript.
    """

    def __init__(self, record: TurnRecord, *, verbatim: bool = False) -> None:
        super().__init__()
        self.record = record
        self.verbatim = verbatim
        """Whether the reply is program output, shown as printed (not Markdown)."""
        self.parts: list[Part] = []
        self.expanded = False
        """Whether the calls' output and the reasoning are shown (a click on the turn)."""
        self._pending: list[str] = []
        self._segment: ReplySegment | VerbatimSegment | None = None
        self._segments: list[tuple[Part, ReplySegment | VerbatimSegment]] = []
        self._tools: dict[str, ToolBlock] = {}
        self._pieces: list[Piece] = []
        self._thinking: ThinkingBlock | None = None
        """The reasoning block being written (a new one after reply text or a tool call)."""
        self._plan_block: RichBlock | None = None
        self._prompt = RichBlock(
            lambda style: prompt_block(record.prompt, record.by, style, record.client_id, python=verbatim)
        )
        self.turn: RunningTurn | None = None
        """The turn as the reducer keeps it (`show`): its calls and their output are read there."""
        self.timer: Timer | None = None
        """The transcript's timer flushing it."""
        self._flushing = asyncio.Lock()
        """One flush at a time: the timer's and those before a tool, a line or the end."""
        self._dirty = False

    def show(self, snapshot: Snapshot) -> None:
        """The session as a batch left it (`Attachment.snapshot`, once per batch): the running
        turn, when it is this one, is where its calls are read."""
        turn = snapshot.turn
        if turn is not None and turn.turn_id == self.record.turn_id:
            self.turn = turn

    @property
    def tools(self) -> list[ToolBlock]:
        """Its calls, in the order they started."""
        return list(self._tools.values())

    @property
    def thinking(self) -> list[ThinkingBlock]:
        """Its stretches of reasoning, in order."""
        return [what for kind, _, what in self._pieces if isinstance(what, ThinkingBlock)]

    @property
    def segments(self) -> list[ReplySegment | VerbatimSegment]:
        """Its stretches of reply, in order."""
        return [segment for _, segment in self._segments]

    def blocks_now(self) -> list[Block]:
        blocks: list[Block] = [self._prompt]
        for kind, _, what in self._pieces:
            if kind == "text":
                assert isinstance(what, ReplySegment | VerbatimSegment)
                blocks.extend(what.blocks())
                if isinstance(what, ReplySegment):
                    blocks.append(GAP)  # the streaming reply's last paragraph ends with a blank line
            elif kind == "tool":
                assert isinstance(what, ToolBlock)
                blocks.extend(what.blocks(self.expanded))
            elif kind == "thinking":
                assert isinstance(what, ThinkingBlock)
                blocks.extend(what.blocks(self.expanded))
            elif kind == "plan":
                if self._plan_block is not None:
                    blocks.append(self._plan_block)
            else:
                assert isinstance(what, RichBlock)
                blocks.append(what)
        return blocks

    def action_toggle_tools(self) -> None:
        self.expanded = not self.expanded
        self.changed()

    def has_tools(self) -> bool:
        return bool(self._tools) or any(kind == "thinking" for kind, _, _ in self._pieces)

    def add_text(self, text: str) -> None:
        """A chunk of the reply: shown at the next flush."""
        self._pending.append(text)

    async def flush(self) -> None:
        """Take in what arrived since the last flush (the reply, the calls' output, the
        reasoning) and draw the turn again if any came."""
        async with self._flushing:
            await self._flush()
        if self._dirty:
            self._dirty = False
            self.changed()

    async def _flush(self) -> None:
        for block in self._tools.values():
            if block.flush():
                self._dirty = True
        if self._thinking is not None and len(self._thinking.text) != self._thinking._shown:
            self._dirty = True
        if not self._pending:
            return
        text, self._pending = "".join(self._pending), []
        if self._segment is None:
            self._segment = VerbatimSegment() if self.verbatim else ReplySegment()
            self.parts.append(Part("text"))
            self._segments.append((self.parts[-1], self._segment))
            self._pieces.append(("text", self.parts[-1], self._segment))
        self._thinking = None
        await self._segment.write(text)
        self._dirty = True

    async def add_thinking(self, text: str) -> None:
        """A chunk of the model's reasoning, in a folded block of its own (shown at the next flush)."""
        if self._thinking is None:
            await self.flush()
            self._segment = None
            self._thinking = ThinkingBlock()
            self._pieces.append(("thinking", None, self._thinking))
        self._thinking.add(text)

    async def tool_started(self, event: ToolStarted) -> None:
        """A call began: text before it is written first, the block goes after it."""
        await self.flush()
        self._segment = None
        self._thinking = None
        block = ToolBlock(event.call_id, lambda: self.turn)
        block.on_change = self.changed
        self._tools[event.call_id] = block
        tool = self.turn.tools.get(event.call_id) if self.turn is not None else None
        self.parts.append(Part("tool", tool=tool or tool_record(event)))
        self._pieces.append(("tool", self.parts[-1], block))
        block.flush()
        self.changed()

    def call_changed(self, event: ToolUpdated | ToolOutput | ToolEnded) -> None:
        """A call was said again, its output grew or it ended: the reducer keeps what it says,
        which its block reads (output at the next flush, the rest, and a diff, at once)."""
        block = self._tools.get(event.call_id)
        if block is None or (isinstance(event, ToolOutput) and event.diff is None):
            return
        block.flush()
        self.changed()

    async def plan(self, entries: Sequence[PlanEntry]) -> None:
        """The agent's plan: shown once, then updated in place."""
        if self._plan_block is None:
            await self.flush()
            self._segment = None
            self._pieces.append(("plan", None, list(entries)))
        self._plan_block = _plan_block(entries, styled=True)
        self.changed()

    async def add_line(self, text: str) -> None:
        """A line in the turn: an answered question, a note (where it happened)."""
        await self.flush()
        self._segment = None
        self.parts.append(Part("line", text))
        self._pieces.append(("line", self.parts[-1], _line(text, "transcript--note")))
        self.changed()

    async def finish(self) -> None:
        """The turn ended: take in everything pending and stop the timer."""
        async with self._flushing:
            # Stopped only between flushes.
            if self.timer is not None:
                self.timer.stop()
                self.timer = None
            await self._flush()
        for part, segment in self._segments:
            await segment.finish()
            # kept whole only now: joining them at each flush would cost the length of the reply
            part.text, part.blocks = segment.text, segment.drawn()
        self.record.reply = "".join(part.text for part, _ in self._segments)
