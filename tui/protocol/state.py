"""A session's state as a pure function of its events: the one reducer.

The worker (which the test link `WorkerLink` runs in-process too), `SessionWatch` and the app
all keep a `SessionState` and feed it every event in order (`apply`); none of them keeps the
turn, the question, the queue or the status in bookkeeping of its own. The state is a pydantic
model with a `schema_version`, so it can be checkpointed (`model_dump_json`) and resumed
(`model_validate_json`) at any event.

Rules it follows (protocol.md):
- events apply strictly in order; one whose ``seq`` was already applied changes nothing;
- ``asking`` while a question is pending, ``working`` while a turn runs, else ``idle``;
- the pending question belongs to the running turn, or, while none runs, is the session's own
  (the worker asks whether to raise a budget a turn stopped at: it names that turn);
- a `worker_started` (or another `turn_started`) while a turn runs ends that turn ``failed``
  here at once, since its worker will never end it; the `turn_ended` a new worker writes for it
  afterwards amends that record;
- an event of a type this version does not know changes nothing but the cursor.

A reply is kept as its chunks and joined when read, so a reply of many chunks costs O(1) per
chunk.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from tui.protocol import children
from tui.protocol.events import (
    EVENT_TYPES,
    AgentChoice,
    AgentCommand,
    AgentInfo,
    AgentSetting,
    Budget,
    BudgetSet,
    ChildAsking,
    ChildEnded,
    ChildStarted,
    ContextSourceSet,
    ContextValue,
    Event,
    FilesChanged,
    ModelChanged,
    Note,
    Notified,
    Plan,
    PlanEntry,
    Presence,
    QuestionAsked,
    QuestionResolved,
    QueueChanged,
    QueueItem,
    Rewound,
    SettingChanged,
    ShareChanged,
    Status,
    StopReason,
    TextChunk,
    Thinking,
    ToolEnded,
    ToolOutput,
    ToolStarted,
    ToolUpdated,
    TurnEnded,
    TurnStarted,
    WorkerLeaving,
    WorkerStarted,
)
from tui.protocol.messages import (
    ChildView,
    ContextEntry,
    PendingQuestion,
    ToolRecord,
    Transcript,
    TurnAccepted,
    TurnLine,
    TurnRecord,
)
from tui.protocol.output import KeptOutput
from tui.protocol.wording import (
    RUNNING,
    Step,
    agent_mode,
    agent_model,
    answered_line,
    child_line,
    files_line,
    note_line,
    rewound_line,
    share_line,
    steps,
    stop_said,
    tool_record,
    update_tool,
    who,
    worker_lines,
)

__all__ = [
    "RESTARTED",
    "RUNNING",
    "SCHEMA_VERSION",
    "SUPERSEDED",
    "RunningTurn",
    "SessionState",
    "State",
    "Step",
    "agent_mode",
    "agent_model",
    "apply",
    "child_line",
    "note_line",
    "rewound_line",
    "steps",
    "tool_record",
    "update_tool",
    "who",
]

SCHEMA_VERSION: Literal[1] = 1
"""The version of `SessionState`'s shape; a checkpoint of another version is not read back."""

RESTARTED = "the worker running this turn stopped before it ended (killed or crashed) and was restarted"
"""The error of a turn that was running when a new worker started (which writes the same)."""
SUPERSEDED = "another turn started before this one ended"
"""The error of a turn that was running when another one started."""

State = Literal["idle", "working", "asking"]

# Events that only matter inside the turn that is running when they are read.
_TURN_DETAIL = frozenset(
    {"text", "thinking", "plan", "tool_started", "tool_updated", "tool_output", "tool_ended"}
)
KEEP_NOTIFIED = 64
"""The most keys of `notified` kept (the newest): enough for what a new worker could tell again."""
KEEP_NOTES = 20
"""The most notes kept between two turns (a note said again while kept is not kept twice)."""


def _joined(chunks: list[str]) -> str:
    # Joined once and kept joined: reading a reply twice costs nothing more.
    if len(chunks) > 1:
        chunks[:] = ["".join(chunks)]
    return chunks[0] if chunks else ""


class RunningTurn(BaseModel):
    """The turn in progress, built up event by event."""

    model_config = ConfigDict(defer_build=True)

    head: TurnRecord
    """The record as the turn started: prompt, who, ids (no reply, tools or outcome yet)."""
    chunks: list[str] = []
    """The reply's chunks as they came (joined when read)."""
    thinking: list[str] = []
    plan: list[PlanEntry] = []
    tools: dict[str, ToolRecord] = {}
    """The calls by id, in the order they started (their output kept apart, in `output`)."""
    output: dict[str, KeptOutput] = {}
    """Each call's output: whole, or folded to its head and tail (`SessionState.keep_output`)."""
    answered: list[str] = []
    lines: list[TurnLine] = []
    """Its answered questions and notes (and those said before it), in order."""
    replied: int = 0
    """Characters of the reply so far (where a call or a line comes)."""

    @field_serializer("chunks", "thinking")
    def _compact(self, chunks: list[str]) -> list[str]:
        return [_joined(chunks)] if chunks else []

    @field_serializer("output")
    def _compact_output(self, output: dict[str, KeptOutput]) -> dict[str, KeptOutput]:
        for kept in output.values():
            kept.tail_text()  # its pieces joined: one string a call
        return output

    @classmethod
    def begin(cls, event: TurnStarted, number: int = 0, before: list[str] | None = None) -> RunningTurn:
        """The turn `event` started, the `number`th of its session, after the notes `before`."""
        return cls(
            lines=[TurnLine(kind="before", text=text) for text in before or []],
            head=TurnRecord(
                turn_id=event.turn_id,
                prompt=event.prompt,
                number=number,
                by=event.by,
                client_id=event.client_id,
                request_id=event.request_id,
                origin=event.origin,
                started_seq=event.seq,
                started_at=event.at.isoformat(),
            ),
        )

    @classmethod
    def resume(cls, record: TurnRecord, keep: tuple[int, int] | None = None) -> RunningTurn:
        """The turn a transcript says is running (`record`: its record so far; `keep`: how much
        of each call's output is kept)."""
        head = record.model_copy(
            update={"reply": "", "tools": [], "answered": [], "thinking": "", "plan": [], "lines": []}
        )
        return cls(
            head=head,
            chunks=[record.reply] if record.reply else [],
            thinking=[record.thinking] if record.thinking else [],
            plan=list(record.plan),
            tools={t.call_id: t.model_copy(update={"output": ""}) for t in record.tools},
            output={t.call_id: KeptOutput.of(t.output, keep) for t in record.tools if t.output},
            answered=list(record.answered),
            lines=list(record.lines),
            replied=len(record.reply),
        )

    @property
    def turn_id(self) -> str:
        return self.head.turn_id

    def add_line(self, kind: Literal["answered", "note"], text: str) -> None:
        """A line said now, placed after the calls started and the reply so far."""
        self.lines.append(TurnLine(kind=kind, text=text, tools=len(self.tools), at_reply=self.replied))

    @property
    def reply(self) -> str:
        """The reply so far."""
        return _joined(self.chunks)

    def output_of(self, call_id: str) -> str:
        """A call's output as kept (folded: its head, a line saying what was left out, its tail)."""
        kept = self.output.get(call_id)
        return kept.text() if kept is not None else ""

    def record(
        self,
        *,
        seq: int | None = None,
        at: str | None = None,
        outcome: Literal["completed", "failed", "interrupted"] | None = None,
        error: str | None = None,
        reply: str = "",
        stop_reason: StopReason | None = None,
    ) -> TurnRecord:
        """The turn's compact record: as it stands (no `outcome`), or ended at `seq`.

        Args:
            seq: the seq of the event that ended it.
            at: when it ended (ISO 8601).
            outcome: how it ended; None while it runs.
            error: why it failed, if it did.
            reply: the whole reply as the ending says it; empty: the chunks so far.
            stop_reason: why its agent stopped, when it said.
        """
        # A call the ended turn never closed (its worker stopped, or the agent did not say) ended with it.
        closed = RUNNING if outcome is None else "ended" if outcome == "completed" else "interrupted"
        tools = [
            t.model_copy(
                update={
                    "output": self.output_of(t.call_id),
                    "diffs": list(t.diffs),
                    "status": closed if t.status == RUNNING else t.status,
                }
            )
            for t in self.tools.values()
        ]
        return self.head.model_copy(
            update={
                "ended_seq": seq,
                "ended_at": at,
                "reply": reply or self.reply,
                "tools": tools,
                "outcome": outcome,
                "error": error,
                "stop_reason": stop_reason,
                "answered": list(self.answered),
                "lines": list(self.lines),
                "thinking": _joined(self.thinking),
                "plan": list(self.plan),
            }
        )


class SessionState(BaseModel):
    """A session as its events say it is.

    Start from nothing (and apply the journal from seq 1) or `from_transcript` (and apply the
    events after its cursor).
    """

    model_config = ConfigDict(defer_build=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    keep_turns: int | None = 1
    """How many ended turns to keep in `turns` (None: all of them)."""
    keep_output: tuple[int, int] | None = None
    """Characters of each running call's output kept, its first and its last, the rest counted
    (`tui.protocol.output`; a client's, `KEEP_OUTPUT`); None: all of it (the worker's, whose
    ended turns' records hold it whole)."""
    last_seq: int = 0
    """The last event applied (the cursor)."""
    epoch: int = 0
    agent: str | None = None
    version: str | None = None
    """The running worker's version."""
    model: str | None = None
    current: RunningTurn | None = None
    question: PendingQuestion | None = None
    queue: list[QueueItem] = []
    queue_held: bool = False
    """Whether the queue waits (after an interrupt) until someone resumes it."""
    requests: dict[str, TurnAccepted] = {}
    """Every request id seen, with the first answer it got (a turn or a queue item)."""
    started: dict[str, str] = {}
    """Each request id whose turn started, and that turn's id (also for queued requests)."""
    turns: dict[str, TurnRecord] = {}
    """The last `keep_turns` ended turns by id, oldest first."""
    turns_ended: int = 0
    turns_started: int = 0
    """How many turns the session started: the last one's `TurnRecord.number`."""
    tokens_in: int = 0
    """Tokens sent to the model: the sum of the turns' usage, unless a `status` reports a total."""
    tokens_out: int = 0
    context_used: int = 0
    context_limit: int = 0
    activity: str = ""
    """What the running turn waits for, as the last `status` said (``retrying in 4 s``)."""
    children: dict[str, int] = {}
    """How many children stand how (``running``, ``waiting``, ``done``, ``failed``), as the last
    `status` said."""
    child_sessions: dict[str, ChildView] = {}
    """The sessions this one started, oldest first (`child_started` … `child_ended`)."""
    attached: list[Presence] = []
    """Who has an event stream open, as the last `status` said."""
    commands: list[AgentCommand] = []
    """The agent's own slash commands."""
    mode: str | None = None
    """The agent's mode, when it has modes."""
    chosen: dict[str, str] = {}
    """The agent's settings set from ``/mode`` (``mode`` its mode), by setting: what a new worker
    sets again in the agent's new process (`SettingChanged`)."""
    notes: list[str] = []
    """Notes said since the last turn ended while no turn ran: the next turn's ``before`` lines."""
    sources: dict[str, ContextEntry] = {}
    """The context sources and their latest values, by name, in the order they were added."""
    unread: list[Note] = []
    """Notes left for the agent (`Note.by` set) since the last turn started: the next turn's."""
    modes: list[AgentChoice] = []
    """The modes the agent offers."""
    settings: list[AgentSetting] = []
    """The agent's own settings (its model among them, when it says one)."""
    cost: str = ""
    """What the session cost so far, as the agent reported it."""
    notified: list[str] = []
    """The keys of what someone was told of (`Notified.key`), the last `KEEP_NOTIFIED`."""
    rewound: list[tuple[int, int]] = []
    """The turns rewinds undid, as ranges of turn numbers (first, last)."""
    budget: Budget = Field(default_factory=Budget)
    """The session's limits (the last `budget_set`)."""
    spent: float = 0.0
    """USD its ended turns cost, its children's too (`TurnEnded.cost`, `ChildEnded.cost`)."""
    worked: float = 0.0
    """Seconds its ended turns ran, together."""

    @classmethod
    def from_transcript(
        cls,
        transcript: Transcript,
        *,
        keep_turns: int | None = 1,
        keep_output: tuple[int, int] | None = None,
    ) -> SessionState:
        """The state a transcript describes, current to its cursor."""
        state = cls(
            keep_turns=keep_turns,
            keep_output=keep_output,
            last_seq=transcript.cursor,
            model=transcript.model,
            queue=list(transcript.queue),
            queue_held=transcript.queue_held,
            attached=list(transcript.attached),
            notes=list(transcript.notes),
            child_sessions={child.child_id: child for child in transcript.children},
        )
        state.children = state.children_counts()
        for record in transcript.turns:
            state._keep(record)
        current = transcript.current
        state.turns_started = max(
            [
                transcript.turns_started,
                *(r.number for r in transcript.turns),
                current.number if current else 0,
            ]
        )
        if current is not None and current.outcome is None:
            state.current = RunningTurn.resume(current, keep_output)
            if current.request_id:
                state.started[current.request_id] = current.turn_id
            question = transcript.question
            if question is not None and question.turn_id == current.turn_id:
                state.question = question
        elif transcript.question is not None:
            state.question = transcript.question  # the session's own, while no turn runs
        return state

    @property
    def state(self) -> State:
        """``asking`` while a question is pending, ``working`` while a turn runs, else ``idle``."""
        if self.question is not None:
            return "asking"
        return "working" if self.current is not None else "idle"

    def wants(self, typ: str) -> bool:
        """Whether an event of type `typ` can change anything now (else it need not be decoded)."""
        if typ not in EVENT_TYPES:
            return False
        return typ not in _TURN_DETAIL or self.current is not None

    def skip(self, seq: int) -> None:
        """Move the cursor past an event `wants` said changes nothing."""
        self.last_seq = max(self.last_seq, seq)

    def apply(self, event: Event) -> SessionState:
        """Apply one event (in place); an event already applied (by seq) changes nothing.

        Returns:
            This state.
        """
        if event.seq:
            if event.seq <= self.last_seq:
                return self
            self.last_seq = event.seq
        current = self.current
        match event:
            case TextChunk():
                if current is not None and current.turn_id == event.turn_id:
                    current.chunks.append(event.text)
                    current.replied += len(event.text)
            case ToolOutput():
                if current is not None and current.turn_id == event.turn_id:
                    if event.text:
                        output = current.output.get(event.call_id)
                        if output is None:
                            output = current.output[event.call_id] = KeptOutput()
                        output.add(event.text, self.keep_output)
                    tool = current.tools.get(event.call_id)
                    if event.diff is not None and tool is not None:
                        tool.diffs.append(event.diff)
            case Thinking():
                if current is not None and current.turn_id == event.turn_id:
                    current.thinking.append(event.text)
            case ToolStarted():
                if current is not None and current.turn_id == event.turn_id:
                    started = current.tools[event.call_id] = tool_record(event)
                    started.at_reply = current.replied
            case ToolUpdated():
                if current is not None and current.turn_id == event.turn_id:
                    tool = current.tools.get(event.call_id)
                    if tool is not None:
                        again = update_tool(tool, event)
                        if again is not None:  # said again whole: a new output replaces it
                            current.output[event.call_id] = KeptOutput.of("".join(again), self.keep_output)
            case ToolEnded():
                if current is not None and current.turn_id == event.turn_id:
                    tool = current.tools.get(event.call_id)
                    if tool is not None:
                        tool.status, tool.value, tool.error = event.status, event.value, event.error
            case Plan():
                if current is not None and current.turn_id == event.turn_id:
                    current.plan = list(event.entries)
            case TurnStarted():
                if current is not None and current.turn_id != event.turn_id:
                    self._end_here(SUPERSEDED, event.seq, event.at.isoformat())
                before: list[str] = []
                if current is None or current.turn_id != event.turn_id:
                    self.turns_started += 1
                    before, self.notes = self.notes, []
                    self.unread = []
                self.current = RunningTurn.begin(event, self.turns_started, before)
                self.question = None
                rid = event.request_id
                if rid:
                    self.started[rid] = event.turn_id
                    if rid not in self.requests:
                        self.requests[rid] = TurnAccepted(turn_id=event.turn_id, seq=event.seq)
            case QuestionAsked():
                if current is None or current.turn_id == event.turn_id:
                    self.question = PendingQuestion.model_validate(event, from_attributes=True)
            case QuestionResolved():
                if self.question is not None and self.question.question_id == event.question_id:
                    if current is not None:
                        line = answered_line(event)
                        current.answered.append(line)
                        current.add_line("answered", line)
                    self.question = None
            case TurnEnded():
                self.tokens_in += event.usage.get("input", 0)
                self.tokens_out += event.usage.get("output", 0)
                self.spent += event.cost
                at = event.at.isoformat()
                if current is not None and current.turn_id == event.turn_id:
                    if event.worked is not None:
                        self.worked += event.worked
                    elif current.head.started_at:
                        began = datetime.fromisoformat(current.head.started_at)
                        self.worked += max(0.0, (event.at - began).total_seconds())
                    if (cut := stop_said(event.stop_reason)) is not None:
                        current.add_line("note", cut)
                    self._keep(
                        current.record(
                            seq=event.seq,
                            at=at,
                            outcome=event.outcome,
                            error=event.error,
                            reply=event.reply,
                            stop_reason=event.stop_reason,
                        )
                    )
                    self.current = None
                    self.question = None
                    self.turns_ended += 1
                elif event.turn_id in self.turns:
                    # A new worker's ending of a turn already shown ended when that worker started.
                    ended = self.turns[event.turn_id]
                    self.turns[event.turn_id] = ended.model_copy(
                        update={
                            "outcome": event.outcome,
                            "error": event.error,
                            "reply": event.reply or ended.reply,
                            "ended_seq": event.seq,
                            "ended_at": at,
                        }
                    )
            case QueueChanged():
                self.queue = list(event.items)
                self.queue_held = event.held
                for item in event.items:
                    if item.request_id and item.request_id not in self.requests:
                        self.requests[item.request_id] = TurnAccepted(queue_id=item.queue_id, seq=event.seq)
            case Status():
                if event.model is not None:
                    self.model = event.model
                self.context_used = event.context_used
                self.context_limit = event.context_limit
                self.children = dict(event.children)
                self.activity = event.activity
                self.cost = event.cost
                self.attached = list(event.attached)
                # Totals a worker reports win over the sum of turn usages; a status without any keeps it.
                if event.tokens_in or event.tokens_out:
                    self.tokens_in, self.tokens_out = event.tokens_in, event.tokens_out
            case WorkerStarted():
                if current is not None:
                    self._end_here(event.lost or RESTARTED, event.seq, event.at.isoformat())
                # Where a new worker took over stays in the transcript (what it lost with it).
                for said in worker_lines(event, self.turns_started or len(self.turns)):
                    self._child_line(said, again=True)
                self.question = None
                self.epoch = event.epoch
                self.agent = event.agent
                self.version = event.version
                if event.model is not None:
                    self.model = event.model
            case WorkerLeaving():
                for said in worker_lines(event, self.turns_started):
                    self._child_line(said, again=True)
            case ModelChanged():
                self.model = event.model
            case SettingChanged():
                self.chosen = {**self.chosen, event.setting: event.value}
            case AgentInfo():
                self.commands = list(event.commands)
                self.mode = event.mode
                self.modes = list(event.modes)
                self.settings = list(event.settings)
            case Notified():
                if event.key not in self.notified:
                    self.notified = [*self.notified, event.key][-KEEP_NOTIFIED:]
            case ContextSourceSet():
                if event.removed:
                    self.sources.pop(event.name, None)
                else:
                    self.sources[event.name] = ContextEntry(
                        name=event.name,
                        kind=event.kind,
                        cmd=event.cmd,
                        path=event.path,
                        every=event.every,
                        why=event.why,
                    )
            case ContextValue():
                entry = self.sources.get(event.name)
                if entry is not None:
                    self.sources[event.name] = entry.model_copy(
                        update={
                            "value": event.value,
                            "error": event.error,
                            "size": event.size,
                            "at": event.at,
                        }
                    )
            case Note():
                if event.by is not None:
                    self.unread = [*self.unread, event][-KEEP_NOTES:]
                line = note_line(event)
                if current is not None:
                    current.add_line("note", line)
                elif line not in self.notes:
                    self.notes = [*self.notes, line][-KEEP_NOTES:]
            case FilesChanged():
                files = files_line(event)
                if current is not None and current.turn_id == event.turn_id and files is not None:
                    current.add_line("note", files)
            case Rewound():
                self.rewound = [*self.rewound, (event.to_turn, event.last_turn)]
                for turn_id, kept in self.turns.items():
                    if self.is_rewound(kept.number):
                        self.turns[turn_id] = kept.model_copy(update={"rewound": True})
                self._child_line(rewound_line(event))
            case ChildStarted():
                # The line where the child starts, with its id: in the running turn, else among
                # the lines said since the last turn (a child made from outside, to an idle parent).
                self._child_line(child_line(event))
                self.child_sessions = children.started(self.child_sessions, event)
            case ChildAsking():
                self.child_sessions = children.asking(self.child_sessions, event)
            case ChildEnded():
                self._child_line(child_line(event))
                # A child's tokens and cost count as this session's (its status, stats and budget
                # show the sum): what it spent since it last ended is added.
                self.child_sessions, tokens_in, tokens_out, cost = children.ended(self.child_sessions, event)
                self.tokens_in += tokens_in
                self.tokens_out += tokens_out
                self.spent += cost
            case BudgetSet():
                self.budget = event.budget
            case ShareChanged():
                self._child_line(share_line(event))
            case _:
                pass
        return self

    def _child_line(self, line: str, *, again: bool = False) -> None:
        """A line of the running turn, else one said since the last turn (not twice, unless
        `again`: a worker's boundary is said each time)."""
        if self.current is not None:
            self.current.add_line("note", line)
        elif again or line not in self.notes:
            self.notes = [*self.notes, line][-KEEP_NOTES:]

    def is_rewound(self, number: int) -> bool:
        """Whether a rewind undid turn `number`."""
        return any(first <= number <= last for first, last in self.rewound)

    def pending_question(self) -> PendingQuestion | None:
        """The question to show: the session's own, else its first child's waiting for a person."""
        return self.question or self.child_question()

    def child_question(self) -> PendingQuestion | None:
        """The first child's question waiting for a person (see `children.question`)."""
        return children.question(self.child_sessions)

    def children_counts(self) -> dict[str, int]:
        """How many children stand how, in the status row's words (see `children.counts`)."""
        return children.counts(self.child_sessions)

    def ended_by(self, event: Event) -> TurnRecord | None:
        """The record of the turn `event` ended (or amended), when applying it did so."""
        last = next(reversed(self.turns.values()), None)
        return last if last is not None and event.seq and last.ended_seq == event.seq else None

    def record(self, turn_id: str) -> TurnRecord | None:
        """The record of turn `turn_id`: running, or among the ended ones kept."""
        if self.current is not None and self.current.turn_id == turn_id:
            return self.current.record()
        return self.turns.get(turn_id)

    def _end_here(self, why: str, seq: int, at: str) -> None:
        """End the running turn ``failed``: no worker will end it."""
        assert self.current is not None
        self._keep(self.current.record(seq=seq or None, at=at, outcome="failed", error=why))
        self.current = None
        self.question = None
        self.turns_ended += 1

    def _keep(self, record: TurnRecord) -> None:
        self.turns.pop(record.turn_id, None)
        self.turns[record.turn_id] = record
        if self.keep_turns is not None:
            while len(self.turns) > self.keep_turns:
                del self.turns[next(iter(self.turns))]


def apply(state: SessionState, event: Event) -> SessionState:
    """Apply `event` to `state` (in place) and return it; see `SessionState.apply`."""
    return state.apply(event)
