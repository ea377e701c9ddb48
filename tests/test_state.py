"""The one reducer (`tui.protocol.state`): properties over random, plausible sessions.

A small simulator plays a worker: turns start (now or from the queue) and end, replies stream in
chunks, tools run, questions are asked and resolved, the queue changes, workers restart in the
middle of a turn (with or without writing the orphan's end), and events of unknown types come
by. Whatever the sequence, what a user would notice holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tui.protocol import (
    AgentCommand,
    AgentInfo,
    By,
    Diff,
    Event,
    ModelChanged,
    Note,
    Option,
    Plan,
    PlanEntry,
    Presence,
    QuestionAsked,
    QuestionResolved,
    QueueChanged,
    QueueItem,
    Status,
    TextChunk,
    Thinking,
    ToolEnded,
    ToolOutput,
    ToolStarted,
    Transcript,
    TurnEnded,
    TurnRecord,
    TurnStarted,
    UnknownEvent,
    WorkerLeaving,
    WorkerStarted,
)
from tui.protocol.events import ShareChanged
from tui.protocol.state import RESTARTED, SessionState, apply
from tui.protocol.wording import unshared_transcript

T0 = datetime(2026, 1, 1, tzinfo=UTC)

ACTIONS = (
    "send",
    "queue",
    "unqueue",
    "text",
    "text",
    "text",
    "thinking",
    "plan",
    "tool_start",
    "tool_output",
    "tool_end",
    "ask",
    "resolve",
    "end",
    "end",
    "restart",
    "status",
    "model",
    "agent_info",
    "note",
    "unknown",
)


@dataclass
class Simulator:
    """A worker's side of a session, as plausible as the real one (and sometimes killed)."""

    events: list[Event] = field(default_factory=list)
    epoch: int = 0
    turn: str | None = None
    question: str | None = None
    queue: list[QueueItem] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    chunks: dict[str, list[str]] = field(default_factory=dict)
    """Every turn's text chunks, as streamed."""
    ids: int = 0

    def emit(self, event: Event) -> None:
        seq = len(self.events) + 1
        self.events.append(event.model_copy(update={"seq": seq, "at": T0 + timedelta(seconds=seq)}))

    def new_id(self, prefix: str) -> str:
        self.ids += 1
        return f"{prefix}{self.ids}"

    @property
    def state(self) -> str:
        return "asking" if self.question else "working" if self.turn else "idle"

    def start(self, prompt: str, request_id: str | None, queue_id: str | None = None) -> None:
        self.turn = self.new_id("t")
        self.chunks[self.turn] = []
        self.calls = []
        origin = "queue" if queue_id else "user"
        self.emit(
            TurnStarted(
                turn_id=self.turn, prompt=prompt, request_id=request_id, queue_id=queue_id, origin=origin
            )
        )

    def end(self, outcome: str, *, error: str | None = None, full_reply: bool = True) -> None:
        assert self.turn is not None
        if self.question:
            self.emit(QuestionResolved(question_id=self.question, how="cancelled"))
            self.question = None
        reply = "".join(self.chunks[self.turn]) if full_reply else ""
        self.emit(
            TurnEnded(
                turn_id=self.turn,
                outcome=outcome,  # type: ignore[arg-type]
                reply=reply,
                error=error,
                usage={"input": 3, "output": 2},
            )
        )
        self.turn = None
        if self.queue:
            item, *self.queue = self.queue
            self.emit(QueueChanged(items=list(self.queue)))
            self.start(item.prompt, item.request_id, item.queue_id)

    def step(self, data: st.DataObject) -> None:
        action = data.draw(st.sampled_from(ACTIONS))
        text = data.draw(st.text(alphabet="ab\n✓", max_size=4))
        if action == "send" and self.turn is None:
            self.start(text, data.draw(st.sampled_from([None, self.new_id("r")])))
        elif action in ("send", "queue"):
            item = QueueItem(queue_id=self.new_id("q"), request_id=self.new_id("r"), prompt=text)
            self.queue.append(item)
            self.emit(QueueChanged(items=list(self.queue), held=data.draw(st.booleans())))
            if self.turn is None:
                self.end_queue_wait()
        elif action == "unqueue" and self.queue:
            del self.queue[data.draw(st.integers(0, len(self.queue) - 1))]
            self.emit(QueueChanged(items=list(self.queue)))
        elif action == "text" and self.turn:
            self.chunks[self.turn].append(text)
            self.emit(TextChunk(turn_id=self.turn, text=text))
        elif action == "thinking" and self.turn:
            self.emit(Thinking(turn_id=self.turn, text=text))
        elif action == "plan" and self.turn:
            self.emit(Plan(turn_id=self.turn, entries=[PlanEntry(content=text, status="in_progress")]))
        elif action == "tool_start" and self.turn:
            call = self.new_id("c")
            self.calls.append(call)
            self.emit(
                ToolStarted(turn_id=self.turn, call_id=call, name="run", args={"code": text}, title=text)
            )
        elif action == "tool_output" and self.turn and self.calls:
            diff = Diff(path="a.py", old=None, new=text) if data.draw(st.booleans()) else None
            self.emit(ToolOutput(turn_id=self.turn, call_id=self.calls[-1], text=text, diff=diff))
        elif action == "tool_end" and self.turn and self.calls:
            status = data.draw(st.sampled_from(["completed", "error", "terminated"]))
            self.emit(ToolEnded(turn_id=self.turn, call_id=self.calls.pop(), status=status, value=text))
        elif action == "ask" and self.turn and not self.question:
            self.question = self.new_id("ask")
            options = [Option(label="yes"), Option(label="no")]
            self.emit(QuestionAsked(turn_id=self.turn, question_id=self.question, text=text, options=options))
        elif action == "resolve" and self.question:
            how = data.draw(st.sampled_from(["answered", "dismissed", "cancelled"]))
            by = By(kind=data.draw(st.sampled_from(["owner", "participant"])), name="ana")
            self.emit(QuestionResolved(question_id=self.question, how=how, selected=["yes"], by=by))
            self.question = None
        elif action == "end" and self.turn:
            outcome = data.draw(st.sampled_from(["completed", "failed", "interrupted"]))
            self.end(
                outcome, error="boom" if outcome == "failed" else None, full_reply=data.draw(st.booleans())
            )
        elif action == "restart":
            self.restart(writes_orphan_end=data.draw(st.booleans()))
        elif action == "status":
            attached = [Presence(name="ana")] if data.draw(st.booleans()) else []
            self.emit(
                Status(
                    state=self.state,  # type: ignore[arg-type]
                    model=data.draw(st.sampled_from([None, "small", "big"])),
                    context_used=len(self.events),
                    context_limit=1000,
                    tokens_in=data.draw(st.sampled_from([0, 10])),
                    attached=attached,
                )
            )
        elif action == "model":
            self.emit(ModelChanged(model=data.draw(st.sampled_from(["small", "big"]))))
        elif action == "agent_info":
            self.emit(AgentInfo(commands=[AgentCommand(name="/plan")], mode=text or None))
        elif action == "note":
            self.emit(Note(text=text, source="cron"))
        elif action == "unknown":
            self.emit(UnknownEvent(type="hologram", shape=text))  # type: ignore[call-arg]

    def end_queue_wait(self) -> None:
        # A worker starts a queued prompt at once when no turn runs.
        item, *self.queue = self.queue
        self.emit(QueueChanged(items=list(self.queue)))
        self.start(item.prompt, item.request_id, item.queue_id)

    def restart(self, *, writes_orphan_end: bool) -> None:
        if self.turn is None:
            self.emit(WorkerLeaving(reason="stopped"))
        self.epoch += 1
        orphan, question = self.turn, self.question
        self.emit(WorkerStarted(epoch=self.epoch, pid=100 + self.epoch, version="1", agent="python"))
        self.question = None
        if orphan is not None:
            if writes_orphan_end:
                if question:
                    self.emit(QuestionResolved(question_id=question, how="cancelled"))
                reply = "".join(self.chunks[orphan])
                self.emit(TurnEnded(turn_id=orphan, outcome="failed", reply=reply, error=RESTARTED))
            self.turn = None
            if self.queue:
                self.end_queue_wait()


@st.composite
def sessions(draw: st.DrawFn) -> Simulator:
    sim = Simulator()
    sim.emit(WorkerStarted(epoch=1, pid=100, version="1", agent="python", model="small"))
    sim.epoch = 1
    data = draw(st.data())
    for _ in range(draw(st.integers(0, 60))):
        sim.step(data)
    return sim


def reduce(events: list[Event], state: SessionState | None = None) -> SessionState:
    state = state if state is not None else SessionState(keep_turns=None)
    for event in events:
        apply(state, event)
    return state


def worker_side(events: list[Event]) -> tuple[SessionState, dict[str, TurnRecord]]:
    """What a worker keeps: its state (the last ended turn only) and its turn store."""
    state, store = SessionState(), {}
    for event in events:
        ended = state.apply(event).ended_by(event)
        if ended is not None:
            store[ended.turn_id] = ended
    return state, store


def transcript(events: list[Event]) -> Transcript:
    """`GET /transcript` of a worker that has written `events`."""
    state, store = worker_side(events)
    return Transcript(
        turns=list(store.values()),
        current=state.current.record() if state.current is not None else None,
        question=state.question,
        queue=list(state.queue),
        state=state.state,
        model=state.model,
        cursor=state.last_seq,
        attached=list(state.attached),
        turns_started=state.turns_started,
        notes=list(state.notes),
    )


SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(sessions())
def test_invariants_hold_after_every_event(sim: Simulator) -> None:
    state = SessionState(keep_turns=None)
    for event in sim.events:
        running = state.current.turn_id if state.current is not None else None
        apply(state, event)
        question = state.question
        assert question is None or (state.current is not None and question.turn_id == state.current.turn_id)
        if isinstance(event, TurnEnded) and event.turn_id == running and not state.queue:
            assert state.state == "idle"
        if isinstance(event, TurnStarted):
            assert state.state == "working"
    for turn_id, record in state.turns.items():
        assert record.outcome is not None
        assert record.reply == "".join(sim.chunks[turn_id])
    assert state.last_seq == len(sim.events)


@SETTINGS
@given(sessions())
def test_turns_are_numbered_one_by_one_in_the_order_they_started(sim: Simulator) -> None:
    state = SessionState(keep_turns=None)
    numbers: dict[str, int] = {}
    for event in sim.events:
        apply(state, event)
        if isinstance(event, TurnStarted):
            assert state.current is not None
            numbers[event.turn_id] = state.current.record().number
    assert list(numbers.values()) == list(range(1, len(numbers) + 1))
    assert all(record.number == numbers[turn_id] for turn_id, record in state.turns.items())


@SETTINGS
@given(sessions())
def test_applying_the_same_events_again_changes_nothing(sim: Simulator) -> None:
    once = reduce(sim.events)
    assert reduce(sim.events, reduce(sim.events)).model_dump() == once.model_dump()
    twice = SessionState(keep_turns=None)
    for event in sim.events:
        apply(apply(twice, event), event)
    assert twice.model_dump() == once.model_dump()


@SETTINGS
@given(sessions(), st.data())
def test_a_checkpoint_at_any_event_resumes_to_the_same_state(sim: Simulator, data: st.DataObject) -> None:
    split = data.draw(st.integers(0, len(sim.events)))
    whole = reduce(sim.events)
    saved = reduce(sim.events[:split]).model_dump_json()
    resumed = reduce(sim.events[split:], SessionState.model_validate_json(saved))
    assert resumed.model_dump() == whole.model_dump()


@SETTINGS
@given(sessions(), st.data())
def test_a_client_attached_at_any_point_sees_the_workers_transcript(
    sim: Simulator, data: st.DataObject
) -> None:
    split = data.draw(st.integers(0, len(sim.events)))
    worker, store = worker_side(sim.events)
    client = reduce(
        sim.events[split:], SessionState.from_transcript(transcript(sim.events[:split]), keep_turns=None)
    )
    assert client.turns_started == worker.turns_started
    assert [t.model_dump() for t in client.turns.values()] == [t.model_dump() for t in store.values()]
    assert (client.current.record() if client.current else None) == (
        worker.current.record() if worker.current else None
    )
    assert (client.question, client.queue, client.state, client.last_seq) == (
        worker.question,
        worker.queue,
        worker.state,
        worker.last_seq,
    )


def test_a_reply_of_many_chunks_costs_the_same_per_chunk() -> None:
    state = SessionState()
    apply(state, TurnStarted(seq=1, turn_id="t1", prompt="go"))
    current = state.current
    assert current is not None
    for seq in range(2, 100_002):
        kept = len(current.chunks)
        apply(state, TextChunk(seq=seq, turn_id="t1", text="0123456789"))
        # bounded by work, not by a clock: a chunk is appended, nothing already kept is copied
        assert state.current is current and len(current.chunks) == kept + 1
        if seq % 1000 == 0:
            assert len(current.reply) == (seq - 1) * 10
    apply(state, TurnEnded(seq=100_002, turn_id="t1", outcome="completed"))
    assert len(state.turns["t1"].reply) == 1_000_000


def test_an_unknown_event_moves_the_cursor_and_nothing_else() -> None:
    state = SessionState()
    before = state.model_dump()
    apply(state, UnknownEvent(seq=1, type="hologram"))
    assert state.last_seq == 1
    assert {**state.model_dump(), "last_seq": 0} == before


def test_a_new_worker_ends_the_turn_its_predecessor_left_running() -> None:
    state = SessionState()
    apply(state, TurnStarted(seq=1, turn_id="t1", prompt="while True: pass"))
    apply(state, QuestionAsked(seq=2, turn_id="t1", question_id="q1", text="Go?"))
    apply(state, WorkerStarted(seq=3, epoch=2, pid=2, version="1", agent="python"))
    assert state.state == "idle" and state.question is None
    assert state.turns["t1"].outcome == "failed" and state.turns["t1"].error == RESTARTED


def test_a_note_left_during_a_turn_is_the_next_turns_and_an_agents_own_note_is_nobodys() -> None:
    state = SessionState()
    owner = By(name="root")
    state.apply(Note(seq=1, text="early", by=owner))
    state.apply(TurnStarted(seq=2, turn_id="t-1", prompt="a"))
    assert state.unread == []  # the first turn took it
    state.apply(Note(seq=3, text="during", source="ci", by=owner))
    state.apply(Note(seq=4, text="the agent's own", source="tester"))
    state.apply(TurnEnded(seq=5, turn_id="t-1", outcome="completed"))
    assert [n.text for n in state.unread] == ["during"]
    assert "note from root via ci: during" in [line.text for line in state.turns["t-1"].lines]
    state.apply(TurnStarted(seq=6, turn_id="t-2", prompt="b"))
    assert state.unread == []


def test_a_share_is_a_line_of_the_owners_transcript_that_a_participants_leaves_out() -> None:
    state = SessionState()
    owner = By(name="root")
    until = datetime(2026, 1, 1, 18, 0).astimezone()  # 18:00 where the test runs, the same day
    made = ShareChanged(
        seq=1, at=until - timedelta(hours=2), change="made", participant="p1", name="ana",
        kind="collaborator", turns=3, expires_at=until, by=owner,
    )  # fmt: skip
    state.apply(made)
    assert state.notes == ["shared with ana as collaborator (3 turns, until 18:00) by root"]
    state.apply(TurnStarted(seq=2, turn_id="t-1", prompt="a"))
    viewer = ShareChanged(seq=3, change="made", participant="p2", name="vic", kind="viewer", by=owner)
    state.apply(viewer)
    state.apply(
        ShareChanged(seq=4, change="revoked", participant="p1", name="ana", kind="collaborator", by=owner)
    )
    state.apply(TurnEnded(seq=5, turn_id="t-1", outcome="completed"))
    lines = [line.text for line in state.turns["t-1"].lines]
    assert lines == [
        "shared with ana as collaborator (3 turns, until 18:00) by root",  # said before the turn
        "shared with vic as viewer by root",
        "share of ana revoked by root",
    ]
    state.apply(Note(seq=6, text="hello", by=owner))
    transcript = Transcript(turns=list(state.turns.values()), notes=[*state.notes])
    seen = unshared_transcript(transcript)
    assert seen.turns[0].lines == [] and seen.notes == ["note from root: hello"]
    assert transcript.turns[0].lines  # the owner's is unchanged


def test_a_running_calls_output_is_kept_by_the_reducer_folded_past_its_bound_with_words_whole() -> None:
    """A client's reducer holds a running call's output (what `t` copies), in bounded memory:
    its first and last lines and a count of those left out; a word cut between two pieces is
    kept whole, and the worker's reducer keeps every character."""
    lines = [f"line {n:03} alpha beta gamma\n" for n in range(200)]  # 26 characters a line
    whole = "".join(lines)
    pieces = [whole[i : i + 7] for i in range(0, len(whole), 7)]  # words cut between pieces
    client = SessionState(keep_output=(100, 300))
    worker = SessionState()
    for state in (client, worker):
        apply(state, TurnStarted(seq=1, turn_id="t1", prompt="make()"))
        apply(state, ToolStarted(seq=2, turn_id="t1", call_id="c1", name="run", args={"code": "make"}))
    seq = 3
    for n, piece in enumerate(pieces):
        for state in (client, worker):
            apply(state, ToolOutput(seq=seq, turn_id="t1", call_id="c1", text=piece))
        seq += 1
        kept = client.current.output["c1"] if client.current else None
        assert kept is not None and kept.received == 7 * n + len(piece)
        assert len(kept.head) + kept.tail_chars <= 100 + 2 * 300  # bounded, whatever arrived
        if n == 5:  # under the bound: all of it, before the turn ends
            record = client.record("t1")
            assert record is not None and record.tools[0].output == whole[: 7 * 6]
    kept = client.current.output["c1"] if client.current else None
    assert kept is not None and kept.folded
    record = client.record("t1")
    assert record is not None and record.tools[0].status == "running"
    head, marker, tail = record.tools[0].output.partition("[… ")
    marker, _, tail = (marker + tail).partition("\n")
    assert head == "".join(lines[:3])  # the whole lines within the first 100 characters
    # the last lines, from a line's start: at least 300 characters (folded again past 600)
    assert whole.endswith(tail) and 300 <= len(tail) <= 600 and tail.startswith("line ")
    left = 200 - 3 - tail.count("\n")
    assert marker == f"[… {left} lines ({left * 26:,} characters) left out …]"
    assert all(line in lines for line in (head + tail).splitlines(keepends=True))  # no word cut
    assert kept.since(kept.received - 30) == whole[-30:]
    assert kept.since(0) is None  # left out: a reader draws what is kept again
    # a checkpoint keeps it as it is
    again = SessionState.model_validate_json(client.model_dump_json())
    assert again.record("t1") == record
    apply(client, TurnEnded(seq=seq, turn_id="t1", outcome="completed"))
    apply(worker, TurnEnded(seq=seq, turn_id="t1", outcome="completed"))
    assert client.turns["t1"].tools[0].output == record.tools[0].output
    assert worker.turns["t1"].tools[0].output == whole  # the worker's record holds all of it
