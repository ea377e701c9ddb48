"""The one writer of a session's events: each is appended to the journal first (one write, the
only truth), then applied to the session's state (`tui.protocol.state`, the one reducer), then
published to the open streams, then handed to the listeners (`EventWriter.listeners`, the one
point after which an event and the state it made are known to be kept).

It also keeps the checkpoint of the state, the `status` events (who is attached, the context in
use), and what a full disk holds back until space returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable

from tui.errors import DiskFull, WorkerUnavailable
from tui.protocol import (
    Event,
    Note,
    QuestionResolved,
    Status,
    TextChunk,
    Thinking,
    ToolOutput,
    TurnEnded,
    TurnRecord,
    WorkerLeaving,
)
from tui.protocol.events import EventBase
from tui.protocol.state import SessionState
from tui.store import EpochFence, Journal, SessionPaths, TurnStore
from tui.store.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from tui.worker.hub import Hub, Subscription

__all__ = [
    "CHECKPOINT_EVERY",
    "DISK_RETRY",
    "HELD_OUTPUT",
    "PRESENCE_EVERY",
    "EventWriter",
    "Listener",
]

log = logging.getLogger("tui.worker")

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
Listener = Callable[[Event, SessionState], None]
"""Told of each event once it is written, applied and published, with the state after it."""


class EventWriter:
    """Append, apply, publish, hand on: the one way an event of the session is written."""

    def __init__(
        self,
        paths: SessionPaths,
        journal: Journal,
        state: SessionState,
        *,
        follower_limit: tuple[int, int] = (4096, 8 * 1024 * 1024),
    ) -> None:
        self.paths = paths
        self.journal = journal
        self.state = state
        self.hub = Hub(*follower_limit)
        self.turn_store = TurnStore(paths.turns)
        self.listeners: list[Listener] = []
        """Called, in order, with each event written and the state after it (after publish)."""
        self.last_activity = time.monotonic()
        self.last_event = self.last_activity
        """When the last event was written (monotonic); `last_activity` also moves while busy."""
        self.leaving = False
        """The worker is letting go of the session: no status, no retry, no new turn."""
        self.quiet = False
        """No `status` follows each event (while the worker says it started)."""
        self.fence: EpochFence | None = None
        """The session's epoch file, asked before each append: once a newer worker took the
        session, nothing more is written (the process sets it)."""
        self.on_fenced: Callable[[int], None] | None = None
        """Called once, with the newer worker's epoch, when the fence stops this one."""
        self.fenced: int | None = None
        """The newer worker's epoch, once one took the session."""
        self.on_disk_full: Callable[[], None] = lambda: None
        """Called when a write first fails (the running turn is stopped)."""
        self.on_space_back: Callable[[], None] = lambda: None
        """Called soon after space is back (the queue starts its next prompt)."""
        self.context: tuple[int, int] = (0, 0)
        """The model's context window: tokens used, its size (the agent says, `TurnIO.context`)."""
        self.cost = ""
        """What the session cost so far, as the agent last said (a `status` carries it)."""
        self.activity = ""
        """What the running turn waits for (`TurnIO.activity`), shown in `status`."""
        self.disk_full: DiskFull | None = None
        """Why the last write failed, until a write succeeds again."""
        self._last_status: tuple[object, ...] | None = None
        self._presence_at = -math.inf
        self._presence_later: asyncio.TimerHandle | None = None
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

    @property
    def holding(self) -> bool:
        """A full disk holds events of the running turn back: nothing new starts until they are written."""
        return bool(self._held)

    @property
    def behind(self) -> bool:
        """Something a full disk held back (events, turn records) is not written yet."""
        return bool(self._held or self._unsaved)

    def hold(self, event: EventBase) -> None:
        """Write `event` after what is held back, once space returns."""
        self._held.append(event)

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
        if self.fence is not None:
            self._check_fence()
        if self._held or self._unsaved:
            self.resume()
        try:
            stamped, line = self.journal.append_line(event)
        except DiskFull as exc:
            self._disk_full(exc)
            raise
        self.last_activity = self.last_event = time.monotonic()
        typed: Event = stamped  # type: ignore[assignment]
        ended = self.state.apply(typed).ended_by(typed)
        self.hub.publish(line)
        self._hand_on(typed)
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
        if not isinstance(stamped, Status | WorkerLeaving) and not self.quiet:
            self._maybe_status()
        return typed

    def _check_fence(self) -> None:
        """Refuse to write once a newer worker of the session started (on another machine)."""
        assert self.fence is not None
        if self.fenced is None:
            newer = self.fence.newer()
            if newer is None:
                return
            self.fenced = newer
            log.error(
                "a newer worker (epoch %d) took this session; this one (epoch %d) stops writing",
                newer,
                self.fence.epoch,
            )
            if self.on_fenced is not None:
                self.on_fenced(newer)
        raise WorkerUnavailable(
            f"a newer worker of this session took over (epoch {self.fenced}); this one writes no more"
        )

    def _hand_on(self, event: Event) -> None:
        """The point after which `event` is written, applied and published: each listener is told.

        A listener that fails is logged; the event stays written and the others are told.
        """
        for listener in self.listeners:
            try:
                listener(event, self.state)
            except Exception:
                log.exception("a listener of the session's events failed on %s", event.type)

    def stop_retrying(self) -> None:
        """No more tries to write what a full disk held back (the worker is leaving)."""
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None

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
        log.warning("space is back: the journal of session %s is written again", self.paths.root.name)
        self.disk_full = None
        self.hub.notice(b": disk_ok\n\n")
        self._last_status = None
        self._maybe_status()
        with contextlib.suppress(RuntimeError):
            # Not now: this may run inside the emit of a turn that is starting.
            asyncio.get_running_loop().call_soon(self.on_space_back)

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
            self.on_disk_full()
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
        children = self.state.children_counts()
        now = (
            self.state.state,
            self.state.model,
            tuple(present),
            self.context,
            tokens,
            self.activity,
            self.cost,
            tuple(sorted(children.items())),
        )
        if now == self._last_status:
            self.hub.named_all()
        elif not self._held:
            self._last_status = now
            self.hub.named_all()
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
                        children=children,
                        attached=present,
                    )
                )
            except DiskFull:
                # A status says nothing the next one will not: it is sent once space is back.
                self._last_status = None

    def status_changed(self) -> None:
        """Something the status row shows changed (the context in use): a `status` says so."""
        if not (self.quiet or self.hub.closed):
            self._maybe_status()

    def presence_changed(self, sub: Subscription | None = None) -> None:
        """An event stream opened or closed (`sub`): a `status` says so when who is attached changed.

        Not when the last stream closed: nobody is left to tell, and an idle session's journal
        should not grow as clients come and go (`/transcript` says who is attached anyway). Not
        for a quiet stream no status named (`Subscription.named`: a reader, as `tui acp`'s
        `session/load` is): reading a session writes nothing to it.
        """
        if not self.hub.present:
            # The journal's last status still names who left; the next stream to open must hear
            # a fresh one even when it names the same people (its /transcript said nobody).
            self._last_status = None
        elif sub is not None and not sub.named:
            return
        elif not (self.leaving or self.quiet or self.hub.closed or self._presence_later):
            # At most one such status each PRESENCE_EVERY, timed by the loop's clock: the first
            # of a burst at once, then one when the interval ends, naming who is attached then.
            loop = asyncio.get_running_loop()
            wait = self._presence_at + PRESENCE_EVERY - loop.time()
            if wait > 0:
                self._presence_later = loop.call_later(wait, self._presence_due)
            else:
                self._presence_due()

    def _presence_due(self) -> None:
        self._presence_later = None
        self._presence_at = asyncio.get_running_loop().time()
        if self.hub.present and not (self.leaving or self.quiet or self.hub.closed):
            self._maybe_status()
