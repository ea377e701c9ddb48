"""The session as the worker runs it: every change is an event appended to the journal first,
then applied to the session's state (`tui.protocol.state`, the one reducer), then published to
the open streams.

`SessionWorker` owns the turn in progress, the queue, the pending question and leaving. The
bridge (`tui.worker.bridge`) only translates HTTP into calls of this class.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import hashlib
import logging
import os
import secrets
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from tui import __version__
from tui.errors import (
    Busy,
    DiskFull,
    InvalidAnswer,
    InvalidRequest,
    NotFound,
    QuestionNotPending,
    ServerStopping,
    UnknownCall,
    UnknownTurn,
)
from tui.protocol import (
    FEATURES,
    AgentChoice,
    AgentCommand,
    AgentInfo,
    AgentSetting,
    AnswerRequest,
    By,
    Diff,
    Event,
    ImageRef,
    Info,
    ModelChanged,
    Note,
    Option,
    PendingQuestion,
    Plan,
    PlanEntry,
    QuestionAsked,
    QuestionResolved,
    QueueChanged,
    QueueItem,
    SearchResult,
    Stats,
    Status,
    TextChunk,
    Thinking,
    ToolEnded,
    ToolOutput,
    ToolStarted,
    ToolUpdated,
    Transcript,
    TurnAccepted,
    TurnEnded,
    TurnRecord,
    TurnRequest,
    TurnStarted,
    WorkerLeaving,
    WorkerStarted,
)
from tui.protocol.events import EventBase
from tui.protocol.state import RESTARTED, SessionState
from tui.store import Journal, OwnerLock, SessionPaths, SessionRecord, TurnStore
from tui.store.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from tui.store.search import Finder
from tui.worker.agent import Agent, Answer, QuestionCancelled, QuestionDismissed, TurnOutcome
from tui.worker.hub import Hub
from tui.worker.images import image_suffix

__all__ = ["SessionWorker", "owner"]

log = logging.getLogger("tui.worker")

INTERRUPT_GRACE = 3.0
"""Seconds an interrupted turn gets to end by itself before its task is cancelled."""
PRESENCE_EVERY = 0.25
"""Seconds between two `status` events said because streams opened or closed: a burst of
followers (hundreds attaching at once) is told in a few, not one each (each names everyone)."""
DISK_RETRY = 1.0
"""Seconds between tries to write what a full disk held back."""
HELD_OUTPUT = 1024 * 1024
"""Characters of a turn's output (text, thinking, tool output) a full disk holds in memory; past
this, output is dropped (counted, and said in a note where it was) until space is back."""
CHECKPOINT_EVERY = 2000
"""Events between two checkpoints of the state (one is also written when the worker leaves)."""


def owner() -> By:
    """The machine's user, who every local request comes from."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        name = str(os.getuid())
    return By(kind="owner", name=name)


def _new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(5)}"


class _Turn:
    """The running turn, as its agent reaches it (`tui.worker.agent.TurnIO`): each call one event."""

    def __init__(self, worker: SessionWorker, started: TurnStarted, images: Sequence[ImageRef] = ()) -> None:
        self._worker = worker
        self.started = started
        self._images = tuple(worker.paths.images / image.file for image in images)
        self.interrupted = False
        self.hold_queue = False
        """Someone interrupted it: the queue waits after it until someone resumes it."""
        self.task: asyncio.Task[None] | None = None
        self.spent: dict[str, int] = {}
        """Tokens this turn spent so far (`usage`), by kind: input, output, cached."""
        current = worker.state.current
        self.number = current.head.number if current is not None else 0

    @property
    def turn_id(self) -> str:
        return self.started.turn_id

    @property
    def prompt(self) -> str:
        return self.started.prompt

    @property
    def images(self) -> Sequence[Path]:
        return self._images

    def text(self, text: str) -> None:
        if text:
            self._worker.emit_turn(TextChunk(turn_id=self.turn_id, text=text))

    def thinking(self, text: str) -> None:
        if text:
            self._worker.emit_turn(Thinking(turn_id=self.turn_id, text=text))

    def plan(self, entries: Sequence[PlanEntry]) -> None:
        self._worker.emit_turn(Plan(turn_id=self.turn_id, entries=list(entries)))

    def tool_started(
        self,
        name: str,
        args: dict[str, Any],
        *,
        title: str | None = None,
        kind: str | None = None,
        locations: Sequence[str] = (),
    ) -> str:
        call_id = _new_id("call")
        self._worker.emit_turn(
            ToolStarted(
                turn_id=self.turn_id,
                call_id=call_id,
                name=name,
                args=args,
                title=title,
                kind=kind,
                locations=list(locations),
            )
        )
        return call_id

    def tool_output(self, call_id: str, text: str, diff: Diff | None = None) -> None:
        if text or diff is not None:
            self._worker.emit_turn(ToolOutput(turn_id=self.turn_id, call_id=call_id, text=text, diff=diff))

    def tool_updated(
        self,
        call_id: str,
        *,
        title: str | None = None,
        kind: str | None = None,
        args: dict[str, Any] | None = None,
        locations: Sequence[str] | None = None,
        output: str | None = None,
        diffs: Sequence[Diff] | None = None,
    ) -> None:
        self._worker.emit_turn(
            ToolUpdated(
                turn_id=self.turn_id,
                call_id=call_id,
                title=title,
                kind=kind,
                args=args,
                locations=None if locations is None else list(locations),
                output=output,
                diffs=None if diffs is None else list(diffs),
            )
        )

    def tool_ended(
        self,
        call_id: str,
        status: Literal["completed", "still_working", "terminated", "error"],
        value: Any = None,
        error: str | None = None,
    ) -> None:
        self._worker.emit_turn(
            ToolEnded(turn_id=self.turn_id, call_id=call_id, status=status, value=value, error=error)
        )

    def usage(self, *, input: int = 0, output: int = 0, cached: int = 0) -> None:
        for kind, tokens in (("input", input), ("output", output), ("cached", cached)):
            if tokens:
                self.spent[kind] = self.spent.get(kind, 0) + tokens

    def context(self, used: int, limit: int, *, cost: str | None = None) -> None:
        self._worker.context = (used, limit)
        if cost is not None:
            self._worker.cost = cost
        self._worker.status_changed()

    def activity(self, text: str) -> None:
        self._worker.activity = text
        self._worker.status_changed()

    def note(self, text: str) -> None:
        self._worker.emit_turn(Note(text=text, source=self._worker.agent.name))

    async def ask(self, text: str, options: list[Option], *, multiple: bool, freeform: bool) -> Answer:
        return await self._worker.ask(self, text, options, multiple=multiple, freeform=freeform)


class SessionWorker:
    """One session's live state and everything that changes it."""

    def __init__(
        self,
        paths: SessionPaths,
        record: SessionRecord,
        journal: Journal,
        agent: Agent,
        *,
        lock: OwnerLock | None = None,
        follower_limit: tuple[int, int] = (4096, 8 * 1024 * 1024),
    ) -> None:
        self.paths = paths
        self.record = record
        self.journal = journal
        self.agent = agent
        self.lock = lock
        self.state = SessionState(model=agent.model)
        self.hub = Hub(*follower_limit)
        self.turn_store = TurnStore(paths.turns)
        self.by = owner()
        self.started_monotonic = time.monotonic()
        self.last_activity = self.started_monotonic
        self.leaving = False
        self.left = asyncio.Event()
        """Set once the worker let go of its session (journal closed, lock released)."""
        self.listeners: list[Callable[[Event, SessionState], None]] = []
        """Called with each event written and the state after it (`tui.worker.notify`)."""
        self.on_leaving: Callable[[], None] | None = None
        """Called once leaving begins (the process marks its sidecar)."""
        self.idle_timeout: Callable[[], float] = lambda: 0.0
        """Seconds idle (`idle_for`) after which the worker lets go of the session; 0: never
        (set by the process from config.toml's ``[workers]``, `tui.worker.process.idle_policy`)."""
        self.context: tuple[int, int] = (0, 0)
        self.cost = ""
        """What the session cost so far, as the agent last said (a `status` carries it)."""
        self.activity = ""
        """What the running turn waits for (`TurnIO.activity`), shown in `status`."""
        """The model's context window: tokens used, its size (the agent says, `TurnIO.context`)."""
        self._turn: _Turn | None = None
        self._queued_images: dict[str, list[ImageRef]] = {}
        """The images sent with each queued prompt, by queue id, until it starts."""
        self._question_future: asyncio.Future[Answer] | None = None
        self._last_status: tuple[object, ...] | None = None
        self._presence_at = -PRESENCE_EVERY
        self._presence_later: asyncio.TimerHandle | None = None
        self._agent_info: tuple[
            tuple[AgentCommand, ...], str | None, tuple[AgentChoice, ...], tuple[AgentSetting, ...]
        ] = ((), None, (), ())
        agent.on_info = self._agent_info_changed
        agent.on_note = self._agent_note
        self._leave_task: asyncio.Task[None] | None = None
        self._quiet = False
        self.disk_full: DiskFull | None = None
        """Why the last write failed, until a write succeeds again."""
        self._held: list[EventBase] = []
        """A running turn's events a full disk held back, in order; written before anything else."""
        self._held_chars = 0
        """Characters of output in `_held` (bounded by `HELD_OUTPUT`)."""
        self._dropped: Note | None = None
        """The note in `_held` that stands where output was dropped (its text is written last)."""
        self._dropped_count = [0, 0]
        """Pieces of output dropped while the disk was full, and their characters."""
        self._unsaved: dict[str, TurnRecord] = {}
        """Ended turns whose record a full disk kept from being written."""
        self._retry: asyncio.TimerHandle | None = None
        self._resuming = False
        self._checkpointed = 0
        """The seq of the last checkpoint written or started from."""
        self.replayed = 0
        """How many journal events `load` read after its starting point (the checkpoint's seq)."""
        self.resumed_at_turn = 0
        """How many turns the session had when this worker started (`Info.resumed_at_turn`)."""

    # --- the journal -------------------------------------------------------------------------
    def load(self, checkpoint: Checkpoint | None = None) -> int:
        """Rebuild the state from the checkpoint and the journal's tail, and keep the record of
        every ended turn the turn store misses (a worker killed before it wrote one).

        The checkpoint (`checkpoint`, else the session's ``checkpoint.json``) is used only when
        the journal holds the line it is current to; otherwise the whole journal is replayed.
        Either way only the events that can change the state are decoded.

        Returns:
            How many journal events were read after the starting point (also `replayed`).
        """
        if checkpoint is None:
            checkpoint = read_checkpoint(self.paths.checkpoint)
        start = 0
        if checkpoint is not None:
            if checkpoint.mark == self.journal.resumed or self.journal.holds(checkpoint.mark):
                self.state = checkpoint.state
                start = self._checkpointed = checkpoint.mark.seq
            else:
                log.info(
                    "the checkpoint (seq %d) does not match the journal: replaying it all",
                    checkpoint.mark.seq,
                )
        missing: dict[str, TurnRecord] = {}
        replayed = 0
        for position, seq, typ in self.journal.heads_after(start):
            replayed += 1
            if not self.state.wants(typ):
                self.state.skip(seq)
                continue
            try:
                event = self.journal.line_at(position).decode()
            except ValueError as exc:
                log.warning("journal line %d cannot be read, skipped: %s", seq, exc)
                self.state.skip(seq)
                continue
            ended = self.state.apply(event).ended_by(event)
            if ended is not None and (ended.turn_id in missing or not self.turn_store.has(ended.turn_id)):
                missing[ended.turn_id] = ended
        for record in missing.values():
            self.turn_store.save(record)
        self.replayed = replayed
        return replayed

    def checkpoint(self) -> None:
        """Write the state, current to the journal's last line, as the next start's checkpoint.

        Nothing is written while a full disk holds events back (the state is then ahead of the
        journal); a write that fails is logged: the next start replays more, nothing is lost.
        """
        mark = self.journal.mark()
        if mark is None or mark.seq != self.state.last_seq or self._held or self._unsaved:
            return
        try:
            write_checkpoint(self.paths.checkpoint, mark, self.state)
        except OSError as exc:
            log.warning("the checkpoint could not be written (%s); the next start reads more journal", exc)
            return
        self._checkpointed = mark.seq

    def emit(self, event: EventBase) -> Event:
        """Append `event` to the journal, apply it, then send it to the open streams.

        What a full disk held back is written first, so the journal keeps the order.

        Raises:
            DiskFull: the journal could not be written; nothing of `event` was kept or sent.
        """
        if self._held or self._unsaved:
            self.resume()
        try:
            stamped, line = self.journal.append_line(event)
        except DiskFull as exc:
            self._disk_full(exc)
            raise
        self.last_activity = time.monotonic()
        typed: Event = stamped  # type: ignore[assignment]
        ended = self.state.apply(typed).ended_by(typed)
        self.hub.publish(line)
        for listener in self.listeners:
            listener(typed, self.state)
        if ended is not None:
            try:
                self.turn_store.save(ended)
            except DiskFull as exc:
                self._unsaved[ended.turn_id] = ended
                self._disk_full(exc)
        if stamped.seq - self._checkpointed >= CHECKPOINT_EVERY and self.disk_full is None:
            self.checkpoint()
        if self.disk_full is not None and not (self._resuming or self._held or self._unsaved):
            self._space_back()
        # Nothing follows `worker_leaving`: it is how a later reader knows the worker was stopped.
        if not isinstance(stamped, Status | WorkerLeaving) and not self._quiet:
            self._maybe_status()
        return typed

    def emit_turn(self, event: EventBase) -> None:
        """Emit an event of the running turn; when the disk is full, hold it to write later.

        The agent is not stopped by a full disk mid-sentence: the turn is interrupted, and what it
        says until it ends waits in memory, in order, until a write succeeds.
        """
        if not self._held:
            try:
                self.emit(event)
                return
            except DiskFull:
                pass
        if isinstance(event, (TextChunk, Thinking, ToolOutput)):
            size = len(event.text)
            if self._held_chars + size > HELD_OUTPUT:
                # Memory stays bounded however long the turn goes on talking: drop, and count.
                if self._dropped is None:
                    self._dropped = Note(text="", source="tui")
                    self._held.append(self._dropped)
                    self._dropped_count = [0, 0]
                self._dropped_count[0] += 1
                self._dropped_count[1] += size
                return
            self._held_chars += size
        self._held.append(event)

    def resume(self) -> None:
        """Write what a full disk held back: missing turn records, then held events.

        Raises:
            DiskFull: still no space; what is left stays held.
        """
        if self._resuming:
            return
        self._resuming = True
        try:
            while self._unsaved:
                turn_id, record = next(iter(self._unsaved.items()))
                self.turn_store.save(record)
                del self._unsaved[turn_id]
            while self._held:
                event = self._still_due(self._held[0])
                if event is not None:
                    held, self._held = self._held, []
                    try:
                        self.emit(event)
                    finally:
                        self._held = held
                done = self._held.pop(0)
                if isinstance(done, (TextChunk, Thinking, ToolOutput)):
                    self._held_chars -= len(done.text)
                elif done is self._dropped:
                    self._dropped = None
                if self._unsaved:
                    raise self.disk_full or DiskFull("disk full: a turn record could not be written")
        finally:
            self._resuming = False
        if self.disk_full is not None:
            self._space_back()

    def _space_back(self) -> None:
        log.warning("space is back: the journal of session %s is written again", self.record.id)
        self.disk_full = None
        self.hub.notice(b": disk_ok\n\n")
        self._last_status = None
        self._maybe_status()
        with contextlib.suppress(RuntimeError):
            # Not now: this may run inside the emit of a turn that is starting.
            asyncio.get_running_loop().call_soon(self._kick_later)

    def _kick_later(self) -> None:
        with contextlib.suppress(DiskFull):
            self.kick_queue()

    def _still_due(self, event: EventBase) -> EventBase | None:
        """A held event as it is written now: a turn's ending takes the reply as it stands then."""
        if event is self._dropped:
            pieces, chars = self._dropped_count
            return Note(
                text=f"the disk was full: {pieces} piece(s) of output ({chars:,} characters) "
                "were not kept here",
                source="tui",
            )
        if isinstance(event, TurnEnded):
            current = self.state.current
            if current is None or current.turn_id != event.turn_id:
                return None
            return event.model_copy(update={"reply": current.reply})
        if isinstance(event, QuestionResolved):
            question = self.state.question
            return event if question is not None and question.question_id == event.question_id else None
        return event

    def _disk_full(self, exc: DiskFull) -> None:
        """A write failed: say so once (log, streams), stop the running turn, and retry later."""
        first = self.disk_full is None
        self.disk_full = exc
        if first:
            log.error("%s", exc)
            self.hub.notice(b": disk_full %s\n\n" % exc.detail.encode(errors="replace"))
            if self._turn is not None and not self._turn.interrupted:
                self.interrupt()
        if self._retry is None:
            with contextlib.suppress(RuntimeError):
                self._retry = asyncio.get_running_loop().call_later(DISK_RETRY, self._try_resume)

    def _try_resume(self) -> None:
        if self._retry is not None:
            self._retry.cancel()  # (a no-op when it is the timer running this)
            self._retry = None
        if self.leaving or not (self._held or self._unsaved):
            return
        with contextlib.suppress(DiskFull):
            self.resume()
        # One timer at a time: a failed resume may have set one already (`_disk_full`).
        if (self._held or self._unsaved) and self._retry is None:
            self._retry = asyncio.get_running_loop().call_later(DISK_RETRY, self._try_resume)

    def _maybe_status(self) -> None:
        present = self.hub.present
        # The session's tokens are those of its ended turns (each turn_ended's usage), so that a
        # client that attached from /transcript and one that read every event agree.
        tokens = (self.state.tokens_in, self.state.tokens_out)
        now = (
            self.state.state,
            self.state.model,
            tuple(present),
            self.context,
            tokens,
            self.activity,
            self.cost,
        )
        if now != self._last_status and not self._held:
            self._last_status = now
            try:
                self.emit(
                    Status(
                        state=self.state.state,
                        model=self.state.model,
                        context_used=self.context[0],
                        context_limit=self.context[1],
                        tokens_in=tokens[0],
                        tokens_out=tokens[1],
                        activity=self.activity,
                        cost=self.cost,
                        attached=present,
                    )
                )
            except DiskFull:
                # A status says nothing the next one will not: it is sent once space is back.
                self._last_status = None

    def status_changed(self) -> None:
        """Something the status row shows changed (the context in use): a `status` says so."""
        if not (self._quiet or self.hub.closed):
            self._maybe_status()

    def _agent_info_changed(self) -> None:
        agent = self.agent
        now = (tuple(agent.commands), agent.mode, tuple(agent.modes), tuple(agent.settings))
        if now != self._agent_info and not self.leaving:
            self._agent_info = now
            self.emit(
                AgentInfo(commands=list(now[0]), mode=now[1], modes=list(now[2]), settings=list(now[3]))
            )

    def _agent_note(self, text: str) -> None:
        if self.leaving:
            return
        if self._turn is not None:
            self.emit_turn(Note(text=text, source=self.agent.name))
            return
        try:
            self.emit(Note(text=text, source=self.agent.name))
        except DiskFull:
            log.warning("a note of the agent was not kept, the disk is full: %s", text)

    def presence_changed(self) -> None:
        """An event stream opened or closed: a `status` says so when who is attached changed.

        Not when the last stream closed: nobody is left to tell, and an idle session's journal
        should not grow as clients come and go (`/transcript` says who is attached anyway).
        """
        if not self.hub.present:
            # The journal's last status still names who left; the next stream to open must hear
            # a fresh one even when it names the same people (its /transcript said nobody).
            self._last_status = None
        elif not (self.leaving or self._quiet or self.hub.closed or self._presence_later):
            wait = self._presence_at + PRESENCE_EVERY - time.monotonic()
            if wait > 0:
                self._presence_later = asyncio.get_running_loop().call_later(wait, self._presence_due)
            else:
                self._presence_due()

    def _presence_due(self) -> None:
        self._presence_later = None
        self._presence_at = time.monotonic()
        if self.hub.present and not (self.leaving or self._quiet or self.hub.closed):
            self._maybe_status()

    def begin(self) -> None:
        """Say this worker started, and end what a dead predecessor left open."""
        self._quiet = True
        self.resumed_at_turn = self.state.turns_started
        orphan, question = self.state.current, self.state.question
        self.emit(
            WorkerStarted(
                epoch=self.state.epoch + 1,
                pid=os.getpid(),
                version=__version__,
                agent=self.agent.name,
                model=self.state.model,
                reply_format=self.agent.reply_format,
                prompt_syntax=self.agent.prompt_syntax,
            )
        )
        for text in self.agent.notes:
            self.emit(Note(text=text, source=self.agent.name))
        # The state ended them when the new worker started; the journal says so for every reader.
        if question is not None:
            self.emit(QuestionResolved(question_id=question.question_id, how="cancelled"))
        if orphan is not None:
            self.emit(
                TurnEnded(
                    turn_id=orphan.turn_id,
                    outcome="failed",
                    reply=orphan.reply,
                    error=RESTARTED,
                )
            )
        self._quiet = False
        self._agent_info_changed()
        self._maybe_status()

    # --- turns -------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._turn is not None

    def _refuse_if_leaving(self) -> None:
        if self.leaving:
            raise ServerStopping("this session's worker is stopping; attach again to start a new one")

    def submit(self, request: TurnRequest, by: By | None = None) -> TurnAccepted:
        """Start a turn now, or queue it. Idempotent by `request.request_id`.

        `by` names a participant when the web bridge forwards their turn (the owner otherwise).

        Raises:
            Conflict: ``busy`` when delivery is ``now`` and a turn runs.
            InvalidRequest: an image it names is not in this session.
        """
        if request.request_id and request.request_id in self.state.requests:
            return self.state.requests[request.request_id]
        self._refuse_if_leaving()
        for i, image in enumerate(request.images):
            if "/" in image.file or not (self.paths.images / image.file).is_file():
                raise InvalidRequest(
                    f"images[{i}].file: no image {image.file!r} in this session; upload it with POST /images"
                )
        if request.delivery == "now":
            if self.running:
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
            queue_id=_new_id("q"),
            request_id=request.request_id,
            prompt=request.prompt,
            client_id=request.client_id,
            by=by or self.by,
        )
        if request.images:
            self._queued_images[item.queue_id] = list(request.images)
        changed = self.emit(QueueChanged(items=[*self.state.queue, item], held=self.state.queue_held))
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
        self.emit(QueueChanged(items=items, held=self.state.queue_held and bool(items)))

    def resume_queue(self) -> bool:
        """Let a queue held after an interrupt run again: its next prompt starts when no turn runs.

        Returns:
            False when the queue was not held.
        """
        self._refuse_if_leaving()
        if not self.state.queue_held:
            return False
        self.emit(QueueChanged(items=list(self.state.queue), held=False))
        self.kick_queue()
        return True

    def kick_queue(self) -> None:
        """Start the next queued prompt when no turn runs and the queue is not held."""
        if self.running or self.leaving or self._held or self.state.queue_held or not self.state.queue:
            return
        item, *rest = self.state.queue
        self.emit(QueueChanged(items=rest))
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
            self._held.append(QueueChanged(items=[item, *rest]))

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
        started = self.emit(
            TurnStarted(
                turn_id=_new_id("t"),
                prompt=prompt,
                client_id=client_id,
                request_id=request_id,
                queue_id=queue_id,
                by=by or self.by,
                origin=origin,
            )
        )
        assert isinstance(started, TurnStarted)
        if not self.record.title:
            self._title_from(prompt)
        turn = _Turn(self, started, images)
        self._turn = turn
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

    async def _run(self, turn: _Turn) -> None:
        log.info("turn %s started (%s, %d characters)", turn.turn_id, turn.started.origin, len(turn.prompt))
        try:
            result = await self.agent.run_turn(turn)
        except asyncio.CancelledError:
            result = TurnOutcome("interrupted", "the turn did not stop when asked and was cut off")
        except Exception as exc:
            log.exception("turn %s: the agent failed", turn.turn_id)
            result = TurnOutcome("failed", f"the worker failed running this turn: {exc!r}")
        usage = {**turn.spent, **result.usage}
        self.activity = ""
        if turn.interrupted:
            result = TurnOutcome("interrupted", result.error)
        self._cancel_question()
        current = self.state.current
        reply = current.reply if current is not None and current.turn_id == turn.turn_id else ""
        self.emit_turn(
            TurnEnded(
                turn_id=turn.turn_id,
                outcome=result.outcome,
                reply=reply,
                error=result.error,
                usage=usage,
            )
        )
        log.info("turn %s ended %s", turn.turn_id, result.outcome)
        self._turn = None
        with contextlib.suppress(DiskFull):
            if turn.hold_queue and self.state.queue and not self.state.queue_held and not self.leaving:
                # After an interrupt, what was queued behind the turn waits for someone to resume it.
                self.emit(QueueChanged(items=list(self.state.queue), held=True))
            self.kick_queue()

    def interrupt(self, *, hold: bool = False) -> bool:
        """Ask the running turn to end ``interrupted``; False when none runs.

        Args:
            hold: someone asked (``POST /interrupt``): the queue then waits after the turn until
                someone resumes it (``POST /queue/resume``), instead of starting its next prompt.
        """
        turn = self._turn
        if turn is None:
            return False
        turn.hold_queue = turn.hold_queue or hold
        if not turn.interrupted:
            turn.interrupted = True
            self._cancel_question()
            self.agent.interrupt()
            asyncio.get_running_loop().call_later(INTERRUPT_GRACE, self._cut_off, turn)
        return True

    def _cut_off(self, turn: _Turn) -> None:
        if self._turn is turn and turn.task is not None and not turn.task.done():
            log.warning("turn %s did not stop within %.0f s; cutting it off", turn.turn_id, INTERRUPT_GRACE)
            turn.task.cancel()

    # --- questions ---------------------------------------------------------------------------
    async def ask(
        self, turn: _Turn, text: str, options: list[Option], *, multiple: bool, freeform: bool
    ) -> Answer:
        """Put a question to the people attached and wait for the first answer."""
        if self._question_future is not None:
            raise Busy("a question is already pending in this session; ask the next one after its answer")
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._question_future = future
        question_id = _new_id("ask")
        self.emit(
            QuestionAsked(
                turn_id=turn.turn_id,
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
                self.emit_turn(QuestionResolved(question_id=question_id, how="cancelled"))

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
        self.emit(
            QuestionResolved(
                question_id=question.question_id,
                how="answered",
                selected=list(request.selected),
                freeform=freeform,
                client_id=request.client_id,
                by=by or self.by,
            )
        )
        self._settle(Answer(list(request.selected), freeform))

    def dismiss(self, question_id: str, client_id: str | None = None, by: By | None = None) -> None:
        """Dismiss the pending question (the program sees ``ToolError("dismissed")``)."""
        question = self._pending(question_id)
        self.emit(
            QuestionResolved(
                question_id=question.question_id, how="dismissed", client_id=client_id, by=by or self.by
            )
        )
        self._settle(QuestionDismissed("dismissed"))

    def _cancel_question(self) -> None:
        question = self.state.question
        if question is not None:
            self.emit_turn(QuestionResolved(question_id=question.question_id, how="cancelled"))
        self._settle(QuestionCancelled("cancelled"))

    def _settle(self, outcome: Answer | Exception) -> None:
        future, self._question_future = self._question_future, None
        if future is None or future.done():
            return
        if isinstance(outcome, Exception):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    # --- the rest of the routes ----------------------------------------------------------------
    def info(self) -> Info:
        return Info(
            version=__version__,
            session_id=self.record.id,
            epoch=self.state.epoch,
            agent=self.agent.name,
            model=self.state.model,
            reply_format=self.agent.reply_format,
            prompt_syntax=self.agent.prompt_syntax,
            commands=list(self.agent.commands),
            mode=self.agent.mode,
            modes=list(self.agent.modes),
            settings=list(self.agent.settings),
            models=list(self.agent.models),
            resumed_at_turn=self.resumed_at_turn,
            features=list(FEATURES),
            idle_seconds=round(self.idle_for(), 1),
            idle_timeout=self.idle_timeout() or None,
        )

    def set_model(self, model: str, setting: str | None = None) -> None:
        """Switch the model from the next turn, or (`setting`) one of the agent's own settings to
        the value `model`: the agent decides (the python agent refuses).

        Raises:
            InvalidRequest: ``invalid_model``, the agent's reason.
        """
        self._refuse_if_leaving()
        if setting is not None:
            self.agent.set_setting(setting, model)
            return
        self.agent.set_model(model)
        taken = self.agent.model or model
        if taken != self.state.model:
            self.emit(ModelChanged(model=taken))

    def stats(self) -> Stats:
        return Stats(
            turns=self.state.turns_ended,
            tokens_in=self.state.tokens_in,
            tokens_out=self.state.tokens_out,
            uptime=time.monotonic() - self.started_monotonic,
            events=self.journal.last_seq,
            attached=self.hub.attached,
            streams=self.hub.streams,
        )

    def transcript(
        self,
        limit: int,
        before: str | None = None,
        *,
        after: str | None = None,
        around: str | None = None,
    ) -> Transcript:
        """A page of `limit` ended turns and what is live now: the last ones, those before turn
        `before`, those right after turn `after`, or a page holding turn `around`.

        The running turn comes with every page that reaches the newest ended turn (not with a
        `before` page). Its id as `after` gives an empty page; as `around`, the last page.

        Raises:
            NotFound: the turn named is no turn of this session.
        """
        current = self.state.current
        running = current.turn_id if current is not None else None
        if around is not None and around == running:
            around = None
        turns: list[TurnRecord] = []
        try:
            if after is not None and after == running:
                older, newer = len(self.turn_store) > 0, False
            else:
                turns, older, newer = self.turn_store.window(limit, before=before, after=after, around=around)
        except KeyError as exc:
            raise NotFound(
                f"no ended turn {exc.args[0]!r} in this session; a turn id comes from the transcript "
                "(GET /transcript) or a search (GET /search)",
                turn_id=exc.args[0],
            ) from None
        return Transcript(
            turns=turns,
            current=current.record() if current is not None and before is None and not newer else None,
            question=self.state.question,
            queue=list(self.state.queue),
            queue_held=self.state.queue_held,
            state=self.state.state,
            model=self.state.model,
            cursor=self.journal.last_seq,
            has_more=older,
            has_newer=newer,
            attached=self.hub.present,
            turns_started=self.state.turns_started,
            notes=list(self.state.notes) if before is None and not newer else [],
        )

    async def search(self, text: str, limit: int = 200) -> SearchResult:
        """Every turn where `text` occurs (case-insensitive), oldest first: the ended turns from the
        journal (read in a thread, so the turn in progress keeps streaming), then the running one."""
        current = self.state.current
        record = current.record() if current is not None else None
        finder = Finder(text, limit)
        # Only this thread appends, a line at a time: the size now ends on a whole line.
        try:
            upto = os.stat(self.paths.journal).st_size
        except OSError:
            upto = 0
        await asyncio.to_thread(
            finder.journal, self.paths.journal, upto=upto, skip=record.turn_id if record else None
        )
        if record is not None:
            finder.record(record)
        return SearchResult(hits=finder.hits, total=finder.total, more=finder.more)

    def turn_output(self, turn_id: str, call_id: str | None = None) -> str:
        """A turn's whole reply (as it stands, if it runs), or one of its tool call's whole output.

        Raises:
            UnknownTurn: no such turn in this session.
            UnknownCall: no such call in that turn.
        """
        record = self.state.record(turn_id)
        if record is None:
            try:
                record = self.turn_store.get(turn_id)
            except KeyError:
                raise UnknownTurn(
                    f"no turn {turn_id!r} in this session; a turn id comes from the transcript "
                    f"(GET /transcript) or a search (GET /search)",
                    turn_id=turn_id,
                ) from None
        if call_id is None:
            return record.reply
        for tool in record.tools:
            if tool.call_id == call_id:
                return tool.output
        calls = ", ".join(t.call_id for t in record.tools) or "none"
        raise UnknownCall(
            f"turn {turn_id} has no tool call {call_id!r}; its calls: {calls} "
            "(leave call_id out for the turn's reply)",
            turn_id=turn_id,
            call_id=call_id,
        )

    def save_image(self, data: bytes, name: str) -> ImageRef:
        """Keep an uploaded image in the session's ``images/`` folder.

        Raises:
            TooLarge: ``not_an_image`` (415) when its bytes are no image format we know.
        """
        suffix = image_suffix(data)
        file = hashlib.sha256(data).hexdigest()[:20] + suffix
        self.paths.images.mkdir(mode=0o700, exist_ok=True)
        target = self.paths.images / file
        if not target.exists():
            from tui.store._atomic import write_atomic

            write_atomic(target, data)
        return ImageRef(file=file, name=name or file)

    def idle_for(self) -> float:
        """Seconds with no turn, no question, no queue, no open stream and no event; 0 when busy."""
        now = time.monotonic()
        busy = self.running or self.state.question is not None or self.state.queue or len(self.hub)
        if busy or self._held or self._unsaved:
            self.last_activity = now
            return 0.0
        return now - self.last_activity

    # --- leaving -----------------------------------------------------------------------------
    async def leave(self, reason: str, wait: float = 2.0) -> None:
        """End the running turn, say `worker_leaving`, end every stream and let go of the session.

        A second call waits for the first one's end.
        """
        if self._leave_task is None:
            self._leave_task = asyncio.create_task(self._leave(reason, wait))
        await asyncio.shield(self._leave_task)

    async def _leave(self, reason: str, wait: float) -> None:
        self.leaving = True
        if self.on_leaving is not None:
            self.on_leaving()
        turn = self._turn
        if turn is not None:
            self.interrupt()
            if turn.task is not None:
                done, _ = await asyncio.wait({turn.task}, timeout=max(0.1, min(wait, 5.0)))
                if not done:
                    turn.task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await asyncio.wait_for(turn.task, 0.5)
        try:
            self.emit(WorkerLeaving(reason=reason))
        except DiskFull:
            log.error("leaving with a full disk: the next worker ends what this one could not write")
        else:
            self.checkpoint()
        if self._retry is not None:
            self._retry.cancel()
        self.hub.close_all()
        try:
            await asyncio.wait_for(self.agent.close(), 1.0)
        except Exception:
            log.warning("the agent did not close cleanly", exc_info=True)
        self.release()

    def release(self) -> None:
        """Close the journal and let go of the lock (worker.json and the socket go first)."""
        for path in (self.paths.sidecar, self.paths.socket):
            with contextlib.suppress(OSError):
                path.unlink()
        self.journal.stop_appending()
        if self.lock is not None:
            self.lock.release()
        self.left.set()
