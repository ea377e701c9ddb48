"""Turn and question control of a session's worker: a turn started now or queued, the queue,
interrupting, the question a turn asks and its answer. Every change is an event written by the
session's `EventWriter` (`tui.worker.writer`); this module decides which, and when.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Literal

from tui.errors import (
    BudgetReached,
    Busy,
    DiskFull,
    InvalidAnswer,
    InvalidRequest,
    NotFound,
    NotPermitted,
    QuestionNotPending,
    ServerStopping,
)
from tui.protocol import (
    AnswerRequest,
    Budget,
    BudgetRequest,
    BudgetSet,
    BudgetView,
    By,
    ImageRef,
    Note,
    Noted,
    NoteRequest,
    Option,
    PendingQuestion,
    QuestionAsked,
    QuestionResolved,
    QueueChanged,
    QueueItem,
    TurnAccepted,
    TurnEnded,
    TurnRequest,
    TurnStarted,
)
from tui.protocol.state import SessionState
from tui.store import SessionPaths, SessionRecord
from tui.worker import budget as budgets
from tui.worker.agent import Agent, Answer, QuestionCancelled, QuestionDismissed, TurnOutcome
from tui.worker.children import Children
from tui.worker.files import TurnFiles
from tui.worker.turn import GO_ON, Turn, new_id
from tui.worker.writer import EventWriter

__all__ = ["INTERRUPT_GRACE", "TurnControl"]

log = logging.getLogger("tui.worker")

INTERRUPT_GRACE = 3.0
"""Seconds an interrupted turn gets to end by itself before its task is cancelled."""


def _limit_of(why: str) -> str:
    """The `tui budget` option of the limit `why` names."""
    for word, option in (("cost", "cost"), ("tokens", "tokens"), ("wall time", "time"), ("turns", "turns")):
        if word in why:
            return option
    return "time"


class TurnControl:
    """The running turn, the queue and the pending question of one session."""

    def __init__(self, writer: EventWriter, agent: Agent, record: SessionRecord, by: By) -> None:
        self.writer = writer
        self.agent = agent
        self.record = record
        self.by = by
        """Who a request comes from when nobody else is named: the machine's owner."""
        self.turn: Turn | None = None
        """The running turn, if any."""
        self.children: Children | None = None
        """Starts and follows this session's children (set by the worker)."""
        self.files: TurnFiles | None = None
        """The checkpoints of the session's folder at each turn's start and end (set by the
        worker's process; None: none are kept)."""
        self.paused = False
        """No turn starts (a rewind is putting the files back); the queue waits."""
        self._queued_images: dict[str, list[ImageRef]] = {}
        """The images sent with each queued prompt, by queue id, until it starts."""
        self._question_future: asyncio.Future[Answer] | None = None
        self._answered_by: By | None = None
        self._asking: asyncio.Task[None] | None = None
        """Asks, with no turn running, whether to raise the budget the last turn stopped at."""
        self._budget_question: str | None = None
        """That question's id: only the owner may answer it "raise" (as only the owner sets limits)."""
        writer.on_disk_full = self._disk_full
        writer.on_space_back = self._space_back

    @property
    def state(self) -> SessionState:
        return self.writer.state

    @property
    def paths(self) -> SessionPaths:
        return self.writer.paths

    def _disk_full(self) -> None:
        if self.turn is not None and not self.turn.interrupted:
            self.interrupt()

    def _space_back(self) -> None:
        with contextlib.suppress(DiskFull):
            self.kick_queue()

    @property
    def running(self) -> bool:
        return self.turn is not None

    def refuse_if_leaving(self) -> None:
        if self.writer.leaving:
            raise ServerStopping("this session's worker is stopping; attach again to start a new one")

    def submit(self, request: TurnRequest, by: By | None = None) -> TurnAccepted:
        """Start a turn now, or queue it. Idempotent by `request.request_id`.

        `delivery` ``auto`` is decided here alone: it starts now when no turn runs (and no rewind
        is putting files back), else it is queued; the answer's `turn_id` or `queue_id` says which.
        The choice and the start are one step of the event loop, so of two prompts sent at once to
        an idle session one starts and the other is queued behind it.

        `by` names a participant when the web bridge forwards their turn (the owner otherwise).

        Raises:
            Conflict: ``busy`` when delivery is ``now`` and a turn runs.
            InvalidRequest: an image it names is not in this session.
        """
        if request.request_id and request.request_id in self.state.requests:
            return self.state.requests[request.request_id]
        self.refuse_if_leaving()
        self.refuse_over_budget()
        for i, image in enumerate(request.images):
            if "/" in image.file or not (self.paths.images / image.file).is_file():
                raise InvalidRequest(
                    f"images[{i}].file: no image {image.file!r} in this session; upload it with POST /images"
                )
        free = not (self.running or self.paused)
        if request.delivery == "now" or (request.delivery == "auto" and free):
            if not free:
                raise Busy(
                    "a turn is running; queue this prompt (delivery queue) or wait for the turn to end"
                )
            started = self._start(
                request.prompt,
                request.client_id,
                request.request_id,
                None,
                "user",
                by=by,
                images=request.images,
            )
            return TurnAccepted(turn_id=started.turn_id, seq=started.seq)
        item = QueueItem(
            queue_id=new_id("q"),
            request_id=request.request_id,
            prompt=request.prompt,
            client_id=request.client_id,
            by=by or self.by,
        )
        if request.images:
            self._queued_images[item.queue_id] = list(request.images)
        changed = self.writer.emit(QueueChanged(items=[*self.state.queue, item], held=self.state.queue_held))
        accepted = TurnAccepted(queue_id=item.queue_id, seq=changed.seq)
        self.kick_queue()
        return accepted

    def unqueue(self, queue_id: str) -> None:
        """Take a queued prompt back.

        Raises:
            NotFound: it started already, or never was.
        """
        items = [i for i in self.state.queue if i.queue_id != queue_id]
        if len(items) == len(self.state.queue):
            raise NotFound(f"queue item {queue_id!r} is not queued: it started already, or never was")
        self._queued_images.pop(queue_id, None)
        # An empty queue holds nothing.
        self.writer.emit(QueueChanged(items=items, held=self.state.queue_held and bool(items)))

    def resume_queue(self) -> bool:
        """Let a queue held after an interrupt run again: its next prompt starts when no turn runs.

        Returns:
            False when the queue was not held.
        """
        self.refuse_if_leaving()
        if not self.state.queue_held:
            return False
        self.writer.emit(QueueChanged(items=list(self.state.queue), held=False))
        self.kick_queue()
        return True

    def kick_queue(self) -> None:
        """Start the next queued prompt when no turn runs and the queue is not held."""
        writer = self.writer
        if self.running or self.paused or writer.leaving or writer.holding:
            return
        if self.state.queue_held or not self.state.queue:
            return
        if budgets.reached(self.budget_view(), starting=True) is not None:
            return  # it waits until someone raises the budget
        item, *rest = self.state.queue
        self.writer.emit(QueueChanged(items=rest))
        images = self._queued_images.pop(item.queue_id, [])
        try:
            self._start(
                item.prompt,
                item.client_id,
                item.request_id,
                item.queue_id,
                "queue",
                by=item.by,
                images=images,
            )
        except DiskFull:
            # The prompt left the queue but did not start: put it back once space returns.
            if images:
                self._queued_images[item.queue_id] = images
            self.writer.hold(QueueChanged(items=[item, *rest]))

    def _start(
        self,
        prompt: str,
        client_id: str | None,
        request_id: str | None,
        queue_id: str | None,
        origin: Literal["user", "queue", "note"],
        by: By | None = None,
        images: Sequence[ImageRef] = (),
    ) -> TurnStarted:
        self.withdraw_question()  # the session's own question (a budget's) goes with a new turn
        notes = list(self.state.unread)  # the turn takes them: its TurnStarted clears them
        started = self.writer.emit(
            TurnStarted(
                turn_id=new_id("t"),
                prompt=prompt,
                client_id=client_id,
                request_id=request_id,
                queue_id=queue_id,
                by=by or self.by,
                origin=origin,
            )
        )
        assert isinstance(started, TurnStarted)
        if not self.record.title and prompt.strip():
            self._title_from(prompt)
        turn = Turn(self, started, images, notes, list(self.state.sources.values()))
        self.turn = turn
        turn.task = asyncio.create_task(self._run(turn), name=f"turn {started.turn_id}")
        return started

    def _title_from(self, prompt: str) -> None:
        from tui.errors import TuiError
        from tui.store import get_session, save_session
        from tui.store.paths import StatePaths

        first = next((ln.strip() for ln in prompt.splitlines() if ln.strip()), "")
        state = StatePaths(self.paths.root.parent.parent)
        # Re-read first: a command may have changed the record (archived it) since this worker read it.
        with contextlib.suppress(OSError, TuiError):
            current = get_session(state, self.record.id)
            if not current.title:
                self.record = current.model_copy(update={"title": first[:60]})
                save_session(state, self.record)

    # --- budget --------------------------------------------------------------------------------
    def budget_view(self) -> BudgetView:
        """The session's limits and what it spent of each, the running turn's spend too."""
        state, turn = self.state, self.turn
        cost, tokens, worked = state.spent, state.tokens_in + state.tokens_out, state.worked
        if turn is not None:
            cost += turn.cost
            tokens += turn.tokens_spent
            worked += turn.worked
        view = BudgetView(
            budget=state.budget, cost=round(cost, 6), tokens=tokens, turns=state.turns_started, time=worked
        )
        return view.model_copy(update={"reached": budgets.reached(view)})

    def set_budget(self, request: BudgetRequest, by: By | None = None) -> BudgetView:
        """Change the limits (0 takes one away); a queue waiting on them runs when none is reached."""
        update = {
            name: (value or None)
            for name, value in request.model_dump(exclude_none=True).items()
            if name in Budget.model_fields
        }
        self.writer.emit(BudgetSet(budget=self.state.budget.model_copy(update=update), by=by or self.by))
        if self.turn is not None:
            self._time_budget(self.turn)
        with contextlib.suppress(DiskFull, BudgetReached):
            self.kick_queue()
        return self.budget_view()

    def refuse_over_budget(self) -> None:
        """Raise `BudgetReached` when a new turn may not start."""
        view = self.budget_view()
        why = budgets.reached(view, starting=True)
        if why is not None:
            short = self.record.id[:8]
            raise BudgetReached(
                f"session {short} reached its budget ({why}): `tui budget {short}` shows it, "
                f"`tui budget {short} --{_limit_of(why)} …` raises it"
            )

    def check_budget(self, turn: Turn) -> bool:
        """Stop `turn` when the session reached a limit; True when it must stop (or did)."""
        if turn.over_budget:
            return True
        why = budgets.reached(self.budget_view())
        if why is None or self.turn is not turn:
            return False
        self._stop_at_budget(turn, why)
        return True

    def _stop_at_budget(self, turn: Turn, why: str) -> None:
        if turn.over_budget or turn.interrupted:
            return
        log.info("turn %s stopped at the session's budget: %s", turn.turn_id, why)
        turn.over_budget = True
        # tui's own line (as what the sandbox lets an agent reach is), not the agent's
        self.writer.emit_turn(
            Note(text=f"the session reached its budget ({why}); the turn stops here", source="tui")
        )
        self._cancel_question()
        self.agent.interrupt()
        asyncio.get_running_loop().call_later(INTERRUPT_GRACE, self._cut_off, turn)

    def _time_budget(self, turn: Turn) -> None:
        """Stop `turn` when the wall time limit passes while it runs."""
        if turn._timer is not None:
            turn._timer.cancel()
            turn._timer = None
        limit = self.state.budget.time
        if limit is None:
            return
        left = limit - self.budget_view().time
        turn._timer = asyncio.get_running_loop().call_later(max(0.0, left) + 0.05, self.check_budget, turn)

    async def _ask_budget(self, stopped: str) -> None:
        """Ask, as the session's question (no turn runs; it names the turn `stopped`), whether to
        raise the budget that turn stopped at; if raised, a turn goes on where it stopped."""
        view = self.budget_view()
        lifted = budgets.raised(view)
        raise_to = f"raise to {budgets.describe(lifted)}"
        options = [
            Option(label=raise_to, description="and go on where the turn stopped"),
            Option(label="stop", description="keep the limit: new turns are refused until it is raised"),
        ]
        why = view.reached or "a limit"
        try:
            answer = await self._ask_of(
                stopped,
                f"This session reached its budget ({why}). Raise it and go on?",
                options,
                multiple=False,
                freeform=False,
                budget=True,
            )
        except (QuestionDismissed, QuestionCancelled):
            return
        with contextlib.suppress(DiskFull):
            if answer.selected != [raise_to]:
                self.writer.emit(Note(text=f"the budget stays {budgets.describe(view.budget)}", source="tui"))
                return
            if budgets.reached(self.budget_view()) is not None:
                self.writer.emit(BudgetSet(budget=lifted, by=self.state_answerer()))
            if self.turn is None and not self.writer.leaving:
                self._start(GO_ON, None, None, None, "note", by=self.state_answerer())

    def withdraw_question(self) -> None:
        """Withdraw the session's own question (asked while no turn runs), if one is pending."""
        asking, self._asking = self._asking, None
        if asking is None or asking.done():
            return
        if asking is not asyncio.current_task():
            self._cancel_question()
            asking.cancel()

    def state_answerer(self) -> By | None:
        """Who answered the last question (the journal says it too)."""
        return self._answered_by

    async def _run(self, turn: Turn) -> None:
        files = self.files
        before = None
        self._time_budget(turn)
        try:
            if files is not None:
                before = await files.turn_started()
            result = await self.agent.run_turn(turn)
        except asyncio.CancelledError:
            result = TurnOutcome("interrupted", "the turn did not stop when asked and was cut off")
        except Exception as exc:
            log.exception("turn %s: the agent failed", turn.turn_id)
            result = TurnOutcome("failed", f"the worker failed running this turn: {exc!r}")
        usage = {**turn.spent, **result.usage}
        self.writer.activity = ""
        if turn._timer is not None:
            turn._timer.cancel()
        if turn.interrupted:
            result = TurnOutcome("interrupted", result.error)
        elif turn.over_budget:
            result = TurnOutcome("completed", stop_reason="budget")
        self._cancel_question()
        current = self.state.current
        reply = current.reply if current is not None and current.turn_id == turn.turn_id else ""
        if files is not None and before is not None:
            try:
                await files.turn_ended(turn.turn_id, before)
            except asyncio.CancelledError:  # cut off while the checkpoint was taken: the turn still ends
                log.warning("turn %s: cut off during its closing checkpoint", turn.turn_id)
        self.writer.emit_turn(
            TurnEnded(
                turn_id=turn.turn_id,
                outcome=result.outcome,
                reply=reply,
                error=result.error,
                usage=usage,
                stop_reason=result.stop_reason,
                cost=round(turn.cost, 6),
                worked=round(turn.worked, 3),
            )
        )
        # One line a turn, at its end (the journal says when it started): a script's turns are
        # many and short, and each line logged costs as much as one of its events.
        log.info(
            "turn %s (%s, %d characters) ended %s after %.3f s",
            turn.turn_id,
            turn.started.origin,
            len(turn.prompt),
            result.outcome,
            turn.worked,
        )
        self.turn = None
        if turn.over_budget and self.agent.name != "python" and not self.writer.leaving:
            # Someone is asked, from any client, whether to raise the limit and go on: the
            # session's question, not a turn of its own (it counts as none, shows as none).
            log.info("turn %s stopped at the budget: asking whether to raise it", turn.turn_id)
            self._asking = asyncio.create_task(self._ask_budget(turn.turn_id), name="asking for budget")
            return
        with contextlib.suppress(DiskFull):
            if turn.hold_queue and self.state.queue and not self.state.queue_held and not self.writer.leaving:
                # After an interrupt, what was queued behind the turn waits for someone to resume it.
                self.writer.emit(QueueChanged(items=list(self.state.queue), held=True))
            self.kick_queue()

    def interrupt(self, *, hold: bool = False) -> bool:
        """Ask the running turn to end ``interrupted``; False when none runs.

        Args:
            hold: someone asked (``POST /interrupt``): the queue then waits after the turn until
                someone resumes it (``POST /queue/resume``), instead of starting its next prompt.
        """
        turn = self.turn
        if turn is None:
            return False
        turn.hold_queue = turn.hold_queue or hold
        if not turn.interrupted:
            turn.interrupted = True
            self._cancel_question()
            self.agent.interrupt()
            asyncio.get_running_loop().call_later(INTERRUPT_GRACE, self._cut_off, turn)
        return True

    def _cut_off(self, turn: Turn) -> None:
        if self.turn is turn and turn.task is not None and not turn.task.done():
            log.warning("turn %s did not stop within %.0f s; cutting it off", turn.turn_id, INTERRUPT_GRACE)
            turn.task.cancel()

    # --- questions ---------------------------------------------------------------------------
    async def ask(
        self, turn: Turn, text: str, options: list[Option], *, multiple: bool, freeform: bool
    ) -> Answer:
        """Put a question to the people attached and wait for the first answer."""
        return await self._ask_of(turn.turn_id, text, options, multiple=multiple, freeform=freeform)

    async def _ask_of(
        self,
        turn_id: str,
        text: str,
        options: list[Option],
        *,
        multiple: bool,
        freeform: bool,
        budget: bool = False,
    ) -> Answer:
        if self._question_future is not None:
            raise Busy("a question is already pending in this session; ask the next one after its answer")
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._question_future = future
        question_id = new_id("ask")
        self._budget_question = question_id if budget else None
        self.writer.emit(
            QuestionAsked(
                turn_id=turn_id,
                question_id=question_id,
                text=text,
                options=options,
                multiple=multiple,
                freeform=freeform,
            )
        )
        try:
            return await future
        finally:
            if self._question_future is future:
                self._question_future = None
            if self.state.question is not None and self.state.question.question_id == question_id:
                self.writer.emit_turn(QuestionResolved(question_id=question_id, how="cancelled"))

    def _pending(self, question_id: str) -> PendingQuestion:
        question = self.state.question
        if question is None or question.question_id != question_id:
            raise QuestionNotPending(
                f"question {question_id!r} is not pending (already answered, dismissed or withdrawn)"
            )
        return question

    def answer(self, request: AnswerRequest, by: By | None = None) -> None:
        """Answer the pending question; the first answer wins.

        Raises:
            Conflict: ``question_not_pending``.
            InvalidRequest: ``invalid_answer``.
        """
        question = self._pending(request.question_id)
        labels = [o.label for o in question.options]
        for label in request.selected:
            if label not in labels:
                offered = ", ".join(repr(x) for x in labels) or "none"
                raise InvalidAnswer(f"{label!r} is not one of the options offered ({offered})")
        if len(request.selected) > 1 and not question.multiple:
            raise InvalidAnswer("this question takes one option, not several")
        if len(set(request.selected)) != len(request.selected):
            raise InvalidAnswer("an option was chosen twice")
        freeform = request.freeform if request.freeform else None
        if freeform is not None and not question.freeform:
            raise InvalidAnswer("this question takes only its options, not free text")
        if not request.selected and freeform is None:
            raise InvalidAnswer("an answer needs an option or some text")
        guest = (by or self.by).kind == "participant"
        if guest and question.question_id == self._budget_question and request.selected != [labels[-1]]:
            raise NotPermitted(
                f"only the session's owner raises its budget; answer {labels[-1]!r} to keep it, "
                "or ask the owner"
            )
        self.writer.emit(
            QuestionResolved(
                question_id=question.question_id,
                how="answered",
                selected=list(request.selected),
                freeform=freeform,
                client_id=request.client_id,
                by=by or self.by,
            )
        )
        self._answered_by = by or self.by
        self._settle(Answer(list(request.selected), freeform))

    def dismiss(self, question_id: str, client_id: str | None = None, by: By | None = None) -> None:
        """Dismiss the pending question (the program sees ``ToolError("dismissed")``)."""
        question = self._pending(question_id)
        self.writer.emit(
            QuestionResolved(
                question_id=question.question_id, how="dismissed", client_id=client_id, by=by or self.by
            )
        )
        self._settle(QuestionDismissed("dismissed"))

    def _cancel_question(self) -> None:
        question = self.state.question
        if question is not None:
            self.writer.emit_turn(QuestionResolved(question_id=question.question_id, how="cancelled"))
        self._settle(QuestionCancelled("cancelled"))

    def _settle(self, outcome: Answer | Exception) -> None:
        future, self._question_future = self._question_future, None
        if future is None or future.done():
            return
        if isinstance(outcome, Exception):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    def note(self, request: NoteRequest, by: By | None = None) -> Noted:
        """Keep a note for the agent's next turn (shown now to everyone attached); with
        `request.now` and no turn running or queued, start a turn of its own for it.

        Raises:
            ServerStopping: the worker is leaving.
            DiskFull: the note could not be kept.
        """
        self.refuse_if_leaving()
        event = Note(text=request.text, source=request.source, by=by or self.by)
        noted = self.writer.emit(event)
        turn_id = None
        idle = self.turn is None and not self.state.queue and not self.writer.holding
        if request.now and idle and not self.state.queue_held:
            started = self._start("", request.client_id, None, None, "note", by=by)
            turn_id = started.turn_id
        return Noted(seq=noted.seq, turn_id=turn_id)

    def agent_note(self, text: str) -> None:
        if self.writer.leaving:
            return
        if self.turn is not None:
            self.writer.emit_turn(Note(text=text, source=self.agent.name))
            return
        try:
            self.writer.emit(Note(text=text, source=self.agent.name))
        except DiskFull:
            log.warning("a note of the agent was not kept, the disk is full: %s", text)
