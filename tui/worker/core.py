"""The session as the worker runs it, composed of three parts by job:

- `tui.worker.writer.EventWriter`: every change is an event appended to the journal first, then
  applied to the session's state (`tui.protocol.state`, the one reducer), then published to the
  open streams, then handed to the listeners (`EventWriter.listeners`); checkpoints, `status`
  events and a full disk.
- `tui.worker.control.TurnControl`: the turn in progress, the queue, interrupting, the pending
  question and its answer.
- `tui.store.reading.SessionReader`: the read queries (transcript pages, search, a turn's output,
  counts), made of the session's files and its state.

`SessionWorker` holds them as `writer`, `control`, `reader` and `sources`, says the worker started,
answers `/info` and `/model`, and leaves. It relays nothing: the bridge (`tui.worker.bridge`), the
process and the notifier call the part that does a thing (``worker.control.submit(...)``,
``worker.writer.state``); this class has what takes more than one part.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime

from tui import worker_version
from tui.errors import Busy, DiskFull, InvalidRequest
from tui.protocol import (
    FEATURES,
    AgentChoice,
    AgentCommand,
    AgentInfo,
    AgentSetting,
    AnswerRequest,
    Budget,
    BudgetSet,
    By,
    ChildAdopted,
    ChildAdoptRequest,
    ContextAddRequest,
    ContextEntry,
    ContextList,
    DismissRequest,
    ImageRef,
    Info,
    ModelChanged,
    Note,
    QuestionResolved,
    RewindDone,
    RewindRequest,
    SearchResult,
    SettingChanged,
    Stats,
    Transcript,
    TurnEnded,
    WorkerLeaving,
    WorkerStarted,
)
from tui.protocol.principal import owner_name
from tui.protocol.state import RESTARTED, SessionState
from tui.store import Journal, OwnerLock, SessionPaths, SessionRecord, StatePaths
from tui.store.reading import SessionReader
from tui.summary import note_session
from tui.worker.agent import Agent
from tui.worker.children import Children, ChildStarter
from tui.worker.control import TurnControl
from tui.worker.images import image_suffix
from tui.worker.sources import ContextSources
from tui.worker.writer import EventWriter

__all__ = ["SessionWorker", "owner"]

log = logging.getLogger("tui.worker")


def owner() -> By:
    """The machine's user, who every local request comes from."""
    return By(kind="owner", name=owner_name())


class SessionWorker:
    """One session's live state and everything that changes it: its writer, its turn and
    question control and its reader, composed."""

    def __init__(
        self,
        paths: SessionPaths,
        record: SessionRecord,
        journal: Journal,
        agent: Agent,
        *,
        lock: OwnerLock | None = None,
        follower_limit: tuple[int, int] = (4096, 8 * 1024 * 1024),
        starter: Callable[[StatePaths], ChildStarter] | None = None,
    ) -> None:
        """`starter` makes the access layer the session's children are started through (the
        process's entry hands it); without one the session cannot start or follow children."""
        self.agent = agent
        self.lock = lock
        state = SessionState(model=agent.model)
        self.writer = EventWriter(paths, journal, state, follower_limit=follower_limit)
        self.control = TurnControl(self.writer, agent, record, owner())
        if starter is not None:
            self.control.children = Children(self.writer, record, paths.root.parent.parent, starter)
            self.control.children.agent = agent
        self.reader = SessionReader(paths, journal, self.writer.turn_store)
        self.sources = ContextSources(self.writer, record.working_directory, owner())
        self.started_monotonic = time.monotonic()
        self.left = asyncio.Event()
        """Set once the worker let go of its session (journal closed, lock released)."""
        self.on_leaving: Callable[[], None] | None = None
        """Called once leaving begins (the process marks its sidecar)."""
        self.idle_timeout: Callable[[], float] = lambda: 0.0
        """Seconds idle (`idle_for`) after which the worker lets go of the session; 0: never
        (set by the process from config.toml's ``[workers]``, `tui.worker.process.idle_policy`)."""
        self._agent_info: tuple[
            tuple[AgentCommand, ...], str | None, tuple[AgentChoice, ...], tuple[AgentSetting, ...]
        ] = ((), None, (), ())
        agent.on_info = self._agent_info_changed
        agent.on_note = self.control.agent_note
        self._leave_task: asyncio.Task[None] | None = None
        self.predecessor_lost: str | None = None
        """Why the previous worker is gone, when the engine that started this one said so
        (``TUI_PREDECESSOR_LOST``: its machine was lost); it ends the turn left open."""
        self.resumed_at_turn = 0
        """How many turns the session had when this worker started (`Info.resumed_at_turn`)."""
        self.first_budget = record.budget or Budget()
        self._busy_at = 0.0
        """When `quiet_for` last found the session busy (monotonic)."""
        """The limits a new session starts with: those it was made with, else config.toml's
        ``[budget]`` (set by the process)."""

    def begin(self) -> None:
        """Say this worker started, and end what a dead predecessor left open."""
        self.writer.quiet = True
        self.resumed_at_turn = self.writer.state.turns_started
        self.agent.keep(self.writer.state.model, self.writer.state.chosen)
        orphan, question = self.writer.state.current, self.writer.state.question
        self.writer.emit(
            WorkerStarted(
                epoch=self.writer.state.epoch + 1,
                pid=os.getpid(),
                version=worker_version(),
                agent=self.agent.name,
                model=self.writer.state.model,
                reply_format=self.agent.reply_format,
                prompt_syntax=self.agent.prompt_syntax,
                lost=self.predecessor_lost,
            )
        )
        for text in self.agent.notes:  # tui's own (what the sandbox lets the agent reach), not the agent's
            self.writer.emit(Note(text=text, source="tui"))
        if self.writer.state.epoch == 1 and self.first_budget != Budget():
            # The session's first worker writes the limits it was made with (or config.toml's).
            self.writer.emit(BudgetSet(budget=self.first_budget))
        # The state ended them when the new worker started; the journal says so for every reader.
        if question is not None:
            self.writer.emit(QuestionResolved(question_id=question.question_id, how="cancelled"))
        if orphan is not None:
            self.writer.emit(
                TurnEnded(
                    turn_id=orphan.turn_id,
                    outcome="failed",
                    reply=orphan.reply,
                    error=self.predecessor_lost or RESTARTED,
                )
            )
        self.writer.quiet = False
        self._agent_info_changed()
        self.writer.status_changed()

    def _agent_info_changed(self) -> None:
        agent = self.agent
        now = (tuple(agent.commands), agent.mode, tuple(agent.modes), tuple(agent.settings))
        if now != self._agent_info and not self.writer.leaving:
            self._agent_info = now
            self.writer.emit(
                AgentInfo(commands=list(now[0]), mode=now[1], modes=list(now[2]), settings=list(now[3]))
            )

    async def rewind(self, request: RewindRequest, by: By | None = None) -> RewindDone:
        """Put the session's files and conversation back as they were before a turn
        (`tui.worker.files.TurnFiles.rewind`); no turn starts meanwhile.

        Raises:
            Busy: a turn runs.
            InvalidRequest: no checkpoints are kept, or no such turn.
            Conflict: paths someone else changed since (named).
        """
        self.control.refuse_if_leaving()
        files = self.control.files
        if files is None:
            raise InvalidRequest(
                "this session keeps no checkpoints of its files ([checkpoints] enabled = false in "
                "config.toml, or its worker runs without them), so it cannot be rewound"
            )
        control = self.control
        if control.paused:
            raise Busy("a rewind is already putting this session's files back; wait for it")
        control.paused = True
        try:
            return await files.rewind(
                request,
                running=control.running,
                by=by or self.control.by,
                told=self.agent.rewound,
                rewound=list(self.writer.state.rewound),
            )
        finally:
            control.paused = False
            with contextlib.suppress(DiskFull):
                control.kick_queue()

    async def turn_files(self, turn_id: str, *, stat: bool = False) -> str:
        """What turn `turn_id` did to the session's files: a unified diff, or its stat.

        Raises:
            UnknownTurn: no such turn.
            InvalidRequest: no checkpoints are kept.
        """
        files = self.control.files
        if files is None:
            raise InvalidRequest(
                "this session keeps no checkpoints of its files ([checkpoints] in config.toml)"
            )
        return await files.turn_diff(turn_id, stat=stat)

    # --- turns and questions -----------------------------------------------------------------
    def context_list(self) -> ContextList:
        return ContextList(sources=self.sources.entries, now=datetime.now(UTC))

    def context_add(self, request: ContextAddRequest, by: By | None = None) -> ContextEntry:
        self.control.refuse_if_leaving()
        return self.sources.add(request, by)

    def context_remove(self, name: str, by: By | None = None) -> None:
        self.control.refuse_if_leaving()
        self.sources.remove(name, by)

    def context_push(self, name: str, value: str) -> int:
        self.control.refuse_if_leaving()
        return self.sources.push(name, value)

    async def answer_child(self, request: AnswerRequest | DismissRequest) -> bool:
        """Answer (or dismiss) a child's pending question, when `request` names one; False when
        it names none (it is then this session's own question, or none).

        Raises:
            Conflict: ``question_not_pending``: the child's question was answered first elsewhere.
            InvalidRequest: ``invalid_answer``, as the child's worker said.
        """
        children = self.control.children
        for child in self.writer.state.child_sessions.values():
            if child.question is not None and child.question.question_id == request.question_id:
                if children is None:
                    return False
                await children.answer(child.child_id, request)
                return True
        return False

    async def adopt_child(self, request: ChildAdoptRequest, by: By | None = None) -> ChildAdopted:
        """Follow a child made from outside (`Children.adopt`): ``POST /children``.

        Raises:
            NotFound: no such session.
            InvalidRequest: it is not this session's child, or this worker has no state dir.
        """
        children = self.control.children
        if children is None:
            raise InvalidRequest(
                "this session cannot follow children (its worker was started without the access layer)"
            )
        await children.adopt(request, by or self.control.by)
        return ChildAdopted(child_id=request.child_id)

    # --- the rest of the routes ----------------------------------------------------------------
    def info(self) -> Info:
        return Info(
            version=worker_version(),
            session_id=self.control.record.id,
            epoch=self.writer.state.epoch,
            agent=self.agent.name,
            model=self.writer.state.model,
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
            quiet_seconds=round(self.quiet_for(), 1),
            idle_timeout=self.idle_timeout() or None,
        )

    def set_model(self, model: str, setting: str | None = None) -> None:
        """Switch the model from the next turn, or (`setting`) one of the agent's own settings to
        the value `model`: the agent decides (the python agent refuses).

        Raises:
            InvalidRequest: ``invalid_model``, the agent's reason.
        """
        self.control.refuse_if_leaving()
        if setting is not None:
            self.agent.set_setting(setting, model)
            self.writer.emit(SettingChanged(setting=setting, value=model))
            return
        self.agent.set_model(model)
        taken = self.agent.model or model
        if taken != self.writer.state.model:
            self.writer.emit(ModelChanged(model=taken))

    def stats(self) -> Stats:
        stats = self.reader.stats(
            self.writer.state,
            uptime=time.monotonic() - self.started_monotonic,
            attached=self.writer.hub.attached,
            streams=self.writer.hub.streams,
        )
        return stats.model_copy(update={"cost": self.control.budget_view().cost})

    def transcript(
        self,
        limit: int,
        before: str | None = None,
        *,
        after: str | None = None,
        around: str | None = None,
        first: bool = False,
    ) -> Transcript:
        """A page of the transcript (`tui.store.reading.SessionReader.transcript`).

        Raises:
            NotFound: the turn named is no turn of this session.
        """
        return self.reader.transcript(
            self.writer.state,
            limit,
            before,
            after=after,
            around=around,
            first=first,
            attached=self.writer.hub.present,
        )

    async def search(self, text: str, limit: int = 200) -> SearchResult:
        """Every turn where `text` occurs (case-insensitive), oldest first."""
        return await self.reader.search(self.writer.state, text, limit)

    def turn_output(self, turn_id: str, call_id: str | None = None) -> str:
        """A turn's whole reply, or one of its tool call's whole output.

        Raises:
            UnknownTurn: no such turn in this session.
            UnknownCall: no such call in that turn.
        """
        return self.reader.turn_output(self.writer.state, turn_id, call_id)

    def save_image(self, data: bytes, name: str) -> ImageRef:
        """Keep an uploaded image in the session's ``images/`` folder.

        Raises:
            TooLarge: ``not_an_image`` (415) when its bytes are no image format we know.
        """
        suffix = image_suffix(data)
        file = hashlib.sha256(data).hexdigest()[:20] + suffix
        self.writer.paths.images.mkdir(mode=0o700, exist_ok=True)
        target = self.writer.paths.images / file
        if not target.exists():
            from tui.store._atomic import write_atomic

            write_atomic(target, data)
        return ImageRef(file=file, name=name or file)

    def _doing(self) -> bool:
        """Whether the session is doing something: a turn running, a question or a queue waiting,
        a child followed."""
        children = self.control.children
        return bool(
            self.control.running
            or self.writer.state.question is not None
            or self.writer.state.queue
            or (children is not None and children.following)
        )

    def idle_for(self) -> float:
        """Seconds with no turn, no question, no queue, no open stream, no child followed and no
        event; 0 when busy."""
        now = time.monotonic()
        if self._doing() or len(self.writer.hub) or self.writer.behind:
            self.writer.last_activity = now
            return 0.0
        return now - self.writer.last_activity

    def quiet_for(self) -> float:
        """Seconds since the session last did something (a turn, a question or queue waiting, a
        child followed, an event written); 0 when busy. Unlike `idle_for`, a client attached
        with nothing to do does not count: it is what ``tui sessions`` shows as IDLE."""
        now = time.monotonic()
        if self._doing() or self.writer.behind:
            self._busy_at = now
            return 0.0
        return now - max(self._busy_at, self.writer.last_event)

    # --- leaving -----------------------------------------------------------------------------
    async def leave(self, reason: str, wait: float = 2.0, *, restarting: bool = False) -> None:
        """End the running turn, say `worker_leaving`, end every stream and let go of the session.

        A second call waits for the first one's end.
        """
        if self._leave_task is None:
            self._leave_task = asyncio.create_task(self._leave(reason, wait, restarting))
        await asyncio.shield(self._leave_task)

    async def _leave(self, reason: str, wait: float, restarting: bool = False) -> None:
        self.writer.leaving = True
        if self.on_leaving is not None:
            self.on_leaving()
        turn = self.control.turn
        if turn is not None:
            self.control.interrupt()
            if turn.task is not None:
                done, _ = await asyncio.wait({turn.task}, timeout=max(0.1, min(wait, 5.0)))
                if not done:
                    turn.task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await asyncio.wait_for(turn.task, 0.5)
        with contextlib.suppress(DiskFull):
            self.control.withdraw_question()  # the session's own question (a budget's)
        if self.control.children is not None:
            await self.control.children.close()  # they run on: sessions of their own
        try:
            self.writer.emit(WorkerLeaving(reason=reason, restarting=restarting))
        except DiskFull:
            log.error("leaving with a full disk: the next worker ends what this one could not write")
        else:
            self.writer.checkpoint()
        self.writer.stop_retrying()
        await self.sources.close()
        self.writer.hub.close_all()
        try:
            await asyncio.wait_for(self.agent.close(), 1.0)
        except Exception:
            log.warning("the agent did not close cleanly", exc_info=True)
        self.release()

    def release(self) -> None:
        """Close the journal and let go of the lock (worker.json and the socket go first, the
        sessions' summary is told it stopped)."""
        for path in (self.writer.paths.sidecar, self.writer.paths.socket):
            with contextlib.suppress(OSError):
                path.unlink()
        self.writer.journal.stop_appending()
        if self.lock is not None and self.lock.held:
            # Said while the lock is held: a listing that trusts the row sees no worker only
            # once nothing more is written.
            paths = self.writer.paths
            note_session(paths.root.parent.parent, paths.session_id, worker=False, state="stopped")
            self.lock.release()
        self.left.set()
