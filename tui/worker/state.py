"""What a session is now, derived from its journal by applying events in order.

The worker replays the journal into a `SessionState` when it starts and applies every event it
appends afterwards, so the transcript, the pending question, the queue, the request ids already
answered and the status all come from the one truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from tui.protocol import (
    Event,
    ModelChanged,
    PendingQuestion,
    QuestionAsked,
    QuestionResolved,
    QueueChanged,
    QueueItem,
    TextChunk,
    ToolEnded,
    ToolOutput,
    ToolRecord,
    ToolStarted,
    TurnAccepted,
    TurnEnded,
    TurnRecord,
    TurnStarted,
    WorkerStarted,
)

__all__ = ["SessionState", "TurnBuilder"]

State = Literal["idle", "working", "asking"]

# Events whose content only matters inside the turn that is open when they are read.
TURN_DETAIL = frozenset({"text", "tool_output", "tool_started", "tool_ended"})
# Events that never change the state (it is computed, not read back).
NO_STATE = frozenset({"status", "note", "worker_leaving"})


@dataclass
class TurnBuilder:
    """The turn in progress, built up event by event (the reply kept as chunks: no quadratic joins)."""

    started: TurnStarted
    chunks: list[str] = field(default_factory=list)
    tools: dict[str, ToolRecord] = field(default_factory=dict)
    tool_output: dict[str, list[str]] = field(default_factory=dict)
    answered: list[str] = field(default_factory=list)

    @property
    def turn_id(self) -> str:
        return self.started.turn_id

    @property
    def reply(self) -> str:
        """The reply so far."""
        if len(self.chunks) > 1:
            self.chunks[:] = ["".join(self.chunks)]
        return self.chunks[0] if self.chunks else ""

    def record(self, ended: TurnEnded | None = None) -> TurnRecord:
        """The compact record of this turn (`ended`: how it ended, None while it runs)."""
        tools = [
            t.model_copy(update={"output": "".join(self.tool_output.get(t.call_id, []))})
            for t in self.tools.values()
        ]
        s = self.started
        return TurnRecord(
            turn_id=s.turn_id,
            prompt=s.prompt,
            by=s.by,
            client_id=s.client_id,
            request_id=s.request_id,
            origin=s.origin,
            started_seq=s.seq,
            ended_seq=ended.seq if ended else None,
            started_at=s.at.isoformat(),
            ended_at=ended.at.isoformat() if ended else None,
            reply=ended.reply if ended else self.reply,
            tools=tools,
            outcome=ended.outcome if ended else None,
            error=ended.error if ended else None,
            answered=list(self.answered),
        )


@dataclass
class SessionState:
    """A session as its journal says it is."""

    epoch: int = 0
    model: str | None = None
    last_seq: int = 0
    current: TurnBuilder | None = None
    question: PendingQuestion | None = None
    queue: list[QueueItem] = field(default_factory=list)
    requests: dict[str, TurnAccepted] = field(default_factory=dict)
    """Every request id seen, with the first answer it got (idempotent `/turn`)."""
    turns_ended: int = 0
    tokens_in: int = 0
    tokens_out: int = 0

    @property
    def state(self) -> State:
        """``asking`` while a question is pending, ``working`` while a turn runs, else ``idle``."""
        if self.question is not None:
            return "asking"
        return "working" if self.current is not None else "idle"

    def wants(self, typ: str) -> bool:
        """Whether replaying an event of type `typ` can change anything (skip decoding otherwise)."""
        if typ in NO_STATE:
            return False
        return typ not in TURN_DETAIL or self.current is not None

    def apply(self, event: Event) -> TurnRecord | None:
        """Apply one event; returns the turn's record when the event ended a turn."""
        self.last_seq = max(self.last_seq, event.seq)
        match event:
            case WorkerStarted():
                self.epoch = event.epoch
                if event.model is not None:
                    self.model = event.model
            case TurnStarted():
                self.current = TurnBuilder(event)
                if event.request_id and event.request_id not in self.requests:
                    self.requests[event.request_id] = TurnAccepted(turn_id=event.turn_id, seq=event.seq)
            case TextChunk() if self._in_turn(event.turn_id):
                assert self.current is not None
                self.current.chunks.append(event.text)
            case ToolStarted() if self._in_turn(event.turn_id):
                assert self.current is not None
                self.current.tools[event.call_id] = ToolRecord(
                    call_id=event.call_id, name=event.name, args=event.args, status="still_working"
                )
            case ToolOutput() if self._in_turn(event.turn_id):
                assert self.current is not None
                self.current.tool_output.setdefault(event.call_id, []).append(event.text)
            case ToolEnded() if self._in_turn(event.turn_id):
                assert self.current is not None
                tool = self.current.tools.get(event.call_id)
                if tool is not None:
                    self.current.tools[event.call_id] = tool.model_copy(
                        update={"status": event.status, "value": event.value, "error": event.error}
                    )
            case QuestionAsked():
                self.question = PendingQuestion(
                    turn_id=event.turn_id,
                    question_id=event.question_id,
                    text=event.text,
                    options=event.options,
                    multiple=event.multiple,
                    freeform=event.freeform,
                )
            case QuestionResolved():
                if self.question is not None and self.question.question_id == event.question_id:
                    if self.current is not None:
                        self.current.answered.append(_answered_line(self.question, event))
                    self.question = None
            case TurnEnded():
                ended: TurnRecord | None = None
                if self.current is not None and self.current.turn_id == event.turn_id:
                    ended = self.current.record(event)
                    self.current = None
                self.turns_ended += 1
                self.tokens_in += event.usage.get("input", 0)
                self.tokens_out += event.usage.get("output", 0)
                return ended
            case QueueChanged():
                self.queue = list(event.items)
                for item in event.items:
                    if item.request_id and item.request_id not in self.requests:
                        self.requests[item.request_id] = TurnAccepted(queue_id=item.queue_id, seq=event.seq)
            case ModelChanged():
                self.model = event.model
            case _:
                pass
        return None

    def _in_turn(self, turn_id: str) -> bool:
        return self.current is not None and self.current.turn_id == turn_id


def _answered_line(question: PendingQuestion, event: QuestionResolved) -> str:
    who = event.by.name or event.by.kind
    if event.how != "answered":
        return (
            f"{question.text} — {event.how} by {who}"
            if event.how == "dismissed"
            else f"{question.text} — {event.how}"
        )
    parts = [*event.selected, *([event.freeform] if event.freeform else [])]
    return f"{question.text} — {', '.join(parts)} ({who})"
