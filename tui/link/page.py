"""`PageView`: an `Attachment`'s changes as the page of ``tui web`` draws them.

The web bridge keeps one attachment per session a page follows and one `PageView` on it: each
batch the attachment hands out becomes `PageChange`\\ s (`tui.protocol.page`), in words, made
once for every page that follows; `snapshot` is the session as the changes so far left it, for a
page that joins (or comes back too late to be given what it missed).

Each change type has one entry in `PAGE_CHANGES`, a function of the view and the change; a type
without one is not sent (what only the attachment's own client uses: its outbox, its principal).
The running turn's output is sent as steps by index (`at`): its reply text appended where the
last step is text, a call's view replaced (its output appended), a line inserted; the ended
turn's whole view replaces it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tui.link import changes as ch
from tui.link.base import Gone, LinkState, Live, Reconnecting
from tui.protocol import Plan, TextChunk, Thinking, ToolOutput
from tui.protocol.ids import short_id
from tui.protocol.messages import TurnRecord
from tui.protocol.page import (
    LineView,
    Notice,
    PageChange,
    StepView,
    TurnView,
    line_view,
    plan_lines,
    queue_view,
    status_view,
    tool_view,
    turn_view,
)
from tui.protocol.state import SessionState
from tui.protocol.wording import model_line, new_worker_line

if TYPE_CHECKING:
    from tui.link.attachment import Attachment

__all__ = ["KEEP_LINES", "PAGE_CHANGES", "PageView", "link_words"]

KEEP_LINES = 20
"""The most lines said between two turns that are kept to draw."""
KEEP_BEFORE = 64
"""The most turns whose lines said before them are kept (to draw them again with the turn)."""


def link_words(state: LinkState | None) -> str:
    """How the web bridge reaches the session's worker, in words ("" when live)."""
    if state is None or isinstance(state, Live):
        return "" if state is None or not state.disk_full else f"disk full: {state.disk_full}"
    if isinstance(state, Reconnecting):
        return f"reconnecting to the worker (try {state.attempt}): {state.reason}"
    return f"gone: {state.reason}"


class PageView:
    """The page's view of one attachment: its changes in words, and a snapshot on demand.

    Args:
        attachment: the session followed (its `session` says what the changes so far say).
    """

    def __init__(self, attachment: Attachment) -> None:
        self.attachment = attachment
        self.reply_format = "verbatim"
        self.lines: list[LineView] = []
        """The lines said since the last turn started (the next turn takes them)."""
        self._before: dict[str, list[LineView]] = {}
        """The lines shown before each recent turn when it started."""
        self._turn: str | None = None
        """The running turn whose steps are being sent."""
        self._steps = 0
        self._text_last = False
        self._tools: dict[str, int] = {}
        self._status: Any = None

    @property
    def session(self) -> SessionState:
        return self.attachment.session

    # --- the snapshot ------------------------------------------------------------------------------
    def snapshot(self) -> PageChange:
        """The session as the changes made so far leave it: every turn kept, the running one, the
        lines said since, the question, the queue and the status."""
        s = self.session
        turns = [self._view(r) for r in s.turns.values()]
        if s.current is not None:
            record = s.current.record()
            self._track(record)
            turns.append(self._view(record))
        return PageChange(
            type="Snapshot",
            snapshot=True,
            has_more=min((int(t.number[1:]) for t in turns if t.number[1:].isdigit()), default=1) > 1,
            reply_format=self.reply_format,
            turns=turns,
            lines=list(self.lines),
            question=s.pending_question() if not isinstance(self.attachment.link_state, Gone) else None,
            queue=queue_view(s.queue, s.queue_held),
            status=self._status_view(),
            connection=link_words(self.attachment.link_state),
        )

    # --- changes -----------------------------------------------------------------------------------
    def changes(self, batch: list[ch.Change]) -> list[PageChange]:
        """What `batch` (as the attachment handed it out) changes on the page, in order; a status
        row that changed comes once, at the end."""
        out: list[PageChange] = []
        for change in batch:
            made = PAGE_CHANGES.get(type(change))
            if made is not None:
                out.extend(made(self, change))
        status = self._status_view()
        if status != self._status:
            self._status = status
            out.append(PageChange(type="StatusChanged", status=status))
        return out

    def _status_view(self) -> Any:
        s = self.session
        ended = isinstance(self.attachment.link_state, Gone)
        info = self.attachment.info
        return status_view(
            "ended" if ended else s.state,
            agent=s.agent or (info.agent if info else None),
            model=s.model or (info.model if info else None),
            tokens=(s.tokens_in, s.tokens_out),
            attached=s.attached,
            activity=s.activity,
            children=s.children,
        )

    def _view(self, record: TurnRecord) -> TurnView:
        return turn_view(record, self._before.get(record.turn_id))

    def _track(self, record: TurnRecord) -> None:
        """Send the running turn's steps from where `record` stands."""
        view = turn_view(record)
        self._turn = record.turn_id
        self._steps = len(view.steps)
        self._text_last = bool(view.steps) and view.steps[-1].kind == "text"
        self._tools = {step.tool.call_id: n for n, step in enumerate(view.steps) if step.tool is not None}

    def _untrack(self) -> None:
        self._turn, self._steps, self._text_last, self._tools = None, 0, False, {}

    def _new_step(self, step: StepView) -> PageChange:
        at = self._steps
        self._steps += 1
        self._text_last = step.kind == "text"
        return PageChange(type="Output", turn_id=self._turn, at=at, step=step)

    # --- one function a change type ----------------------------------------------------------------
    def _attached(self, change: ch.Attached) -> list[PageChange]:
        if change.info is not None:
            self.reply_format = change.info.reply_format
        self.lines = [line_view(text, "note") for text in change.transcript.notes][-KEEP_LINES:]
        self._before.clear()
        self._untrack()
        if self.session.current is not None:
            self._track(self.session.current.record())
        return [self.snapshot()]

    def _link(self, change: ch.LinkChanged) -> list[PageChange]:
        return [PageChange(type="LinkChanged", connection=link_words(change.state))]

    def _turn_started(self, change: ch.TurnStarted) -> list[PageChange]:
        record = change.record
        kept = [line for line in self.lines if line.style != "note"]
        if kept or not any(line.kind == "before" for line in record.lines):
            self._before[record.turn_id] = list(self.lines)
        else:
            self._before.pop(record.turn_id, None)
        while len(self._before) > KEEP_BEFORE:
            del self._before[next(iter(self._before))]
        self.lines = []
        self._track(record)
        return [PageChange(type="TurnStarted", turns=[self._view(record)], lines=[])]

    def _output(self, change: ch.Output) -> list[PageChange]:
        if change.turn_id != self._turn:
            return []
        event = change.event
        if isinstance(event, TextChunk):
            if self._text_last:
                step = StepView(kind="text", text=event.text)
                return [
                    PageChange(type="Output", turn_id=self._turn, at=self._steps - 1, step=step, append=True)
                ]
            return [self._new_step(StepView(kind="text", text=event.text))]
        if isinstance(event, Thinking):
            return [PageChange(type="Output", turn_id=self._turn, thinking=event.text)]
        if isinstance(event, Plan):
            return [PageChange(type="Output", turn_id=self._turn, plan=plan_lines(list(event.entries)))]
        current = self.session.current
        if current is None or current.turn_id != self._turn:
            return []
        if isinstance(event, ToolOutput) and event.diff is None and event.call_id in self._tools:
            view = StepView(
                kind="tool",
                tool=tool_view(current.tools[event.call_id]).model_copy(
                    update={"output": event.text, "diffs": []}
                ),
            )
            return [
                PageChange(
                    type="Output", turn_id=self._turn, at=self._tools[event.call_id], step=view, append=True
                )
            ]
        tool = current.tools.get(event.call_id)  # a call started, said again, its output or its end
        if tool is None:
            return []
        whole = tool.model_copy(update={"output": current.output_of(tool.call_id)})
        step = StepView(kind="tool", tool=tool_view(whole))
        if event.call_id in self._tools:
            return [PageChange(type="Output", turn_id=self._turn, at=self._tools[event.call_id], step=step)]
        self._tools[event.call_id] = self._steps
        return [self._new_step(step)]

    def _turn_ended(self, change: ch.TurnEnded) -> list[PageChange]:
        record = change.record
        if record.turn_id == self._turn:
            self._untrack()
        outcome = record.outcome or "ended"
        notice = Notice(
            title=f"Turn #{record.number} {outcome} in session {short_id(self.attachment.link.session_id)}",
            body=record.reply[-200:],
        )
        return [PageChange(type="TurnEnded", turns=[self._view(record)], notice=notice)]

    def _caught_up(self, change: ch.CaughtUp) -> list[PageChange]:
        if self._turn is not None and any(r.turn_id == self._turn for r in change.records):
            self._untrack()
        for record in change.records:  # the lines said before the first of them went with it
            if self.lines:
                self._before[record.turn_id] = self.lines
                self.lines = []
        current = self.session.current
        turns = [self._view(r) for r in change.records]
        if current is not None and current.turn_id != self._turn:
            record = current.record()
            self._track(record)
            turns.append(self._view(record))
        return [PageChange(type="CaughtUp", turns=turns, lines=list(self.lines))]

    def _question(self, change: ch.QuestionChanged) -> list[PageChange]:
        question = change.question
        sid = short_id(self.attachment.link.session_id)
        notice = Notice(title=f"A question waits in session {sid}", body=question.text) if question else None
        made = PageChange(type="QuestionChanged", question=question)
        if notice is not None:
            made.notice = notice
        return [made]

    def line(self, text: str, kind: str, typ: str, style: str = "") -> list[PageChange]:
        line = line_view(text, kind)
        if style:
            line.style = style
        if self._turn is not None:
            step = StepView(kind="line", text=line.text, style=line.style)
            made = self._new_step(step)
            made.type, made.words, made.style = typ, line.text, line.style
            return [made]
        self.lines = [*self.lines, line][-KEEP_LINES:]
        return [PageChange(type=typ, words=line.text, style=line.style, lines=list(self.lines))]

    def _resolved(self, change: ch.QuestionResolved) -> list[PageChange]:
        made = self.line(change.line, "answered", "QuestionResolved")
        made[-1].question = None  # the question shown was resolved: none waits
        return made

    def _queue(self, change: ch.QueueChanged) -> list[PageChange]:
        return [PageChange(type="QueueChanged", queue=queue_view(change.queue, change.held))]

    def _said(self, change: ch.Line) -> list[PageChange]:
        return self.line(change.text, "", "Line")

    def _model(self, change: ch.ModelChanged) -> list[PageChange]:
        return self.line(model_line(change.model), "", "ModelChanged", "model")

    def _rewound(self, change: ch.Rewound) -> list[PageChange]:
        # Every turn drawn of those numbers, older ones a page loaded since it joined too: the
        # page marks them by number (the line saying what the rewind did came just before).
        return [PageChange(type="Rewound", rewound=[change.first, change.last])]

    def _worker(self, change: ch.WorkerStarted) -> list[PageChange]:
        if self._turn is not None and self.session.current is None:
            self._untrack()  # the turn it ran ended with the worker (its TurnEnded came)
        return self.line(new_worker_line(change.version), "", "WorkerStarted", "worker")


PAGE_CHANGES: dict[type, Callable[[PageView, Any], list[PageChange]]] = {
    ch.Attached: PageView._attached,
    ch.LinkChanged: PageView._link,
    ch.TurnStarted: PageView._turn_started,
    ch.Output: PageView._output,
    ch.TurnEnded: PageView._turn_ended,
    ch.CaughtUp: PageView._caught_up,
    ch.QuestionChanged: PageView._question,
    ch.QuestionResolved: PageView._resolved,
    ch.QueueChanged: PageView._queue,
    ch.Line: PageView._said,
    ch.ModelChanged: PageView._model,
    ch.WorkerStarted: PageView._worker,
    ch.Rewound: PageView._rewound,
}
"""How each change type reaches the page. A new change type that says something is one entry
here (most are a line: `PageView._line` with its words); the page's code does not change."""
