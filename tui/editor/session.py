"""One tui session an editor follows (`EditorSession`), for `tui.editor.face`.

A link and a `SessionWatch`, and one task that steps the watch and tells the editor what each
event says (`tui.editor.shapes`): a load's replay in batches of ``session/update``s, one write
each (`BACKLOG`), live events one at a time. A prompt is a turn sent with its own request id and
answered when the watch's state says that turn ended; the session's question goes to the editor
(``session/request_permission``, or a form) and is withdrawn when another client answers it
first. Closing it only lets go of the session: the session and its worker go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import acp
from acp import schema

from tui.editor.shapes import (
    MODE,
    MODEL,
    Picture,
    Shaper,
    Update,
    config_options,
    dump,
    permission_options,
    resolved_text,
    stop_reason,
    updates_of_settings,
    usage_of,
)
from tui.errors import NotFound, TuiError, WorkerUnavailable
from tui.link.base import AttachLink, Gone, Live, Reconnecting
from tui.link.changes import Outgoing
from tui.link.history import history
from tui.link.watch import AccessEnded, SessionWatch
from tui.protocol import (
    AgentInfo,
    Event,
    ImageRef,
    Info,
    ModelChanged,
    PendingQuestion,
    QuestionResolved,
    ToolEnded,
    ToolStarted,
    TurnEnded,
    TurnRecord,
    TurnStarted,
)
from tui.protocol.ids import short_id
from tui.redact import HOLD

if TYPE_CHECKING:
    from tui.editor.face import EditorFace

__all__ = ["BACKLOG", "EditorSession", "dump", "notification", "request_error"]

BACKLOG = 512
"""The most replayed ``session/update``s held for one write."""

REPLAYED = frozenset(
    {
        "turn_started",
        "text",
        "thinking",
        "plan",
        "tool_started",
        "tool_updated",
        "tool_output",
        "tool_ended",
        "turn_ended",
        "note",
        "agent_info",
        "model_changed",
        "question_resolved",
    }
)
"""The events a load's replay reads (`_tell_event` and `Shaper` say nothing of the others, and
keep nothing of them): the others are skipped in the journal undecoded."""


def request_error(exc: TuiError) -> acp.RequestError:
    """A tui error as the editor reads it: its one sentence, its wire code in the data."""
    return acp.RequestError(-32603, str(exc), {"code": exc.code})


def notification(session_id: str, update: Update) -> dict[str, Any]:
    """The params of a ``session/update``: what dumping `acp.schema.SessionNotification` of
    `update` gives (its fields in that order, no ``_meta``), without building and validating the
    notification again around an update tui built."""
    return {"sessionId": session_id, "update": dump(update)}


class EditorSession:
    """One tui session an editor follows."""

    def __init__(self, face: EditorFace, link: AttachLink, watch: SessionWatch, info: Info) -> None:
        self.face = face
        self.id = link.session_id
        self.link = link
        self.watch = watch
        self.info = info
        self.shaper = Shaper(own_requests=watch.own_requests, own_turns=watch.own_turns, redact=face.redact)
        self.pending: dict[str, asyncio.Future[TurnRecord | None]] = {}
        """This editor's prompts not ended yet, by request id (None: held in a queue)."""
        self.outgoing: dict[str, Outgoing] = {}
        """Those prompts as the attachment sends them (`settled`, `error`), by request id."""
        self.usage: dict[str, dict[str, int]] = {}
        self.asked: dict[str, asyncio.Task[None]] = {}
        """The questions asked of the editor, by question id, while it has not answered."""
        self.running: list[str] = []
        """The tool calls started and not ended, latest last (a question names the last one)."""
        self.live = asyncio.Event()
        self.until = 0
        """The journal's seq a load replays up to before it answers."""
        self.failure: TuiError | None = None
        self.backlog: list[dict[str, Any]] = []
        """The ``session/update``s of a load's replay not sent yet: sent together, in one write,
        as soon as nothing more has arrived to replay (or `BACKLOG` of them wait)."""
        self._pump: asyncio.Task[None] | None = None

    # --- following -------------------------------------------------------------------------------
    def start(self, until: int = 0) -> None:
        """Follow the session from the watch's cursor; a load first replays its journal up to seq
        `until` (the watch's cursor then: the watch starts where the history ends)."""
        self.until = until
        if until <= 0:
            self.live.set()
        self._pump = asyncio.create_task(self._run(), name=f"editor {short_id(self.id)}")

    async def _replay(self) -> None:
        """Tell the editor the session's history, seq 1 to `until`, read once (`history`): the
        events go straight to the shaper, not through the watch's state, which starts at `until`.
        The watch's stream opens meanwhile; what it brings waits for the history's end."""
        self.watch.attachment.start()
        # Redaction reads every event as a stream does (one between two pieces of output counts).
        types = None if self.shaper.redact else REPLAYED
        async for events in history(self.link, self.until, types=types):
            for event in events:
                self._replayed(event)
                if len(self.backlog) >= BACKLOG:
                    await self._flush()
        await self._flush()

    async def _run(self) -> None:
        try:
            if not self.live.is_set():
                await self._replay()
            hold_until = time.monotonic() + HOLD if self.shaper.held else 0.0
            while True:
                within = max(0.0, hold_until - time.monotonic()) if self.shaper.held else None
                if self.backlog:
                    within = 0.0  # what already arrived joins the backlog; then it goes
                item = await self.watch.step(within)
                if item is None and self.backlog:
                    await self._flush()
                if item is not None and not isinstance(item, (Live, Reconnecting, Gone)):
                    held = self.shaper.held
                    await self._tell_event(item)
                    if self.shaper.held and not held:
                        hold_until = time.monotonic() + HOLD
                elif self.shaper.held and time.monotonic() >= hold_until:
                    # Nothing came to end the held piece's line: it goes as it is.
                    await self._tell(self.shaper.flush())
                if not self.live.is_set() and item is not None:
                    # The watch's stream is open (a link says so first): the editor is attached
                    # for whoever asks once the load answers.
                    await self._flush()
                    self.live.set()
                self._settle()
                if self.live.is_set():
                    self._ask_pending()
        except asyncio.CancelledError:
            raise
        except TuiError as exc:
            self.failure = exc
        except Exception as exc:  # the follower's own failure: each waiting prompt says it
            self.failure = TuiError(f"following session {short_id(self.id)} failed: {exc}")
        with contextlib.suppress(Exception):
            await self._flush()
        self.live.set()
        for future in self.pending.values():
            if not future.done():
                future.set_exception(request_error(self.failure))

    def _track(self, event: Event) -> None:
        """Keep what a later question and prompt read of `event`: the tool calls running, a
        turn's usage."""
        if isinstance(event, ToolStarted):
            self.running.append(event.call_id)
        elif isinstance(event, ToolEnded) and event.call_id in self.running:
            self.running.remove(event.call_id)
        elif isinstance(event, (TurnStarted, TurnEnded)):
            self.running.clear()
        if isinstance(event, TurnEnded):
            self.usage[event.turn_id] = dict(event.usage)

    async def _tell_event(self, event: Event) -> None:
        self._track(event)
        if isinstance(event, QuestionResolved):
            await self._resolved(event)
        updates = self.shaper.updates(event)
        if isinstance(event, (AgentInfo, ModelChanged)):
            self.info, settings = updates_of_settings(event, self.info)
            updates = [*updates, *settings]
        await self._tell(updates)

    def _replayed(self, event: Event) -> None:
        """`event` of a load's replay, into the backlog as `_tell_event` would tell it (no
        question was asked of this editor yet, so a resolution withdraws nothing)."""
        self._track(event)
        said = self.shaper.dumped(event)
        if isinstance(event, (AgentInfo, ModelChanged)):
            self.info, settings = updates_of_settings(event, self.info)
            said += [dump(update) for update in settings]
        self.backlog.extend({"sessionId": self.id, "update": update} for update in said)

    async def _tell(self, updates: list[Update]) -> None:
        """Tell the editor `updates`: at once when live, else (a load's replay) into the backlog."""
        if self.live.is_set():
            await self._flush()
            for update in updates:
                await self.face.tell(self.id, update)
            return
        self.backlog.extend(notification(self.id, update) for update in updates)
        if len(self.backlog) >= BACKLOG:
            await self._flush()

    async def _flush(self) -> None:
        """Send the backlog, in one write."""
        if self.backlog:
            backlog, self.backlog = self.backlog, []
            await self.face.tell_many(backlog)

    def _settle(self) -> None:
        """Answer each prompt whose turn ended (or that waits in a held queue)."""
        for rid, future in self.pending.items():
            if future.done():
                continue
            turn_id = self.watch.by_request.get(rid)
            ended = self.watch.ended.get(turn_id) if turn_id is not None else None
            sent = self.outgoing.get(rid)
            if sent is not None and sent.error is not None:  # the worker refused it
                future.set_exception(request_error(sent.error))
            elif ended is not None and ended.outcome is not None:
                future.set_result(ended)
            elif self.watch.session.queue_held and any(i.request_id == rid for i in self.watch.queue):
                future.set_result(None)

    async def _let_go(self) -> None:
        for task in self.asked.values():
            task.cancel()
        self.asked.clear()
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(BaseException):
                await self._pump
        await self.watch.close()
        await self.link.close()

    async def close(self) -> None:
        """Let go of the session (it goes on)."""
        await self._let_go()
        for future in self.pending.values():
            if not future.done():
                future.set_result(None)

    async def reopen(self) -> None:
        """Follow the session again after its worker went away for good (a new one is started)."""
        await self._let_go()
        await self._tell(self.shaper.flush())
        self.link, self.watch, self.info, _ = await self.face.connect(self.id)
        self.shaper = Shaper(
            own_requests=self.watch.own_requests, own_turns=self.watch.own_turns, redact=self.face.redact
        )
        self.running.clear()
        self.failure = None
        self.start()

    # --- turns -----------------------------------------------------------------------------------
    async def prompt(self, text: str, pictures: Sequence[Picture] = ()) -> schema.PromptResponse:
        """One turn, handed to the session's attachment (it starts now, or is queued behind
        another client's turn: the worker's to say); answered when it ends.

        A session whose worker was stopped (``tui stop``, an idle timeout) before the prompt was
        taken is started again, and the prompt sent there (its request id keeps it to one turn).
        """
        rid = uuid.uuid4().hex
        for last in (False, True):
            if self.failure is not None:
                await self.reopen()
            try:
                images = await self._upload(pictures)
            except WorkerUnavailable:
                if last or (await self.link.locate()).status != "gone":
                    raise
                self.failure = self.failure or WorkerUnavailable("the session's worker was stopped")
                continue
            item = self.watch.submit(text, when_busy="queue", request_id=rid, images=images)
            future: asyncio.Future[TurnRecord | None] = asyncio.get_running_loop().create_future()
            self.pending[rid] = future
            self.outgoing[rid] = item
            try:
                self._settle()
                if self.failure is not None and not future.done():
                    future.set_exception(request_error(self.failure))
                ended = await future
                break
            except acp.RequestError:
                stopped = isinstance(self.failure, WorkerUnavailable) and not isinstance(
                    self.failure, AccessEnded
                )
                if last or item.settled or not stopped:
                    raise  # taken by a worker, refused, or no stopped worker: said as it is
            finally:
                self.pending.pop(rid, None)
                self.outgoing.pop(rid, None)
        if ended is None:
            return schema.PromptResponse(stop_reason="cancelled")
        if ended.outcome == "failed":
            raise acp.RequestError(
                -32603, f"the turn failed: {ended.error or 'no reason given'}", {"code": "turn_failed"}
            )
        return schema.PromptResponse(
            stop_reason=stop_reason(ended.outcome or "failed", ended.stop_reason),
            usage=usage_of(self.usage.get(ended.turn_id, {})),
        )

    async def _upload(self, pictures: Sequence[Picture]) -> list[ImageRef]:
        """Store the prompt's images where the session's worker reads them."""
        if not pictures:
            return []
        refs = []
        with tempfile.TemporaryDirectory(prefix="tui-acp-") as folder:
            for picture in pictures:
                path = Path(folder) / picture.name
                await asyncio.to_thread(path.write_bytes, picture.data)
                refs.append(await self.link.upload_image(path))
        return refs

    async def cancel(self) -> None:
        """``session/cancel``: end this editor's running turn, take back its queued prompts."""
        mine = set(self.pending)
        for item in self.watch.queue:
            if item.request_id in mine and item.queue_id:
                with contextlib.suppress(NotFound):
                    await self.link.unqueue(item.queue_id)
        current = self.watch.session.current
        if current is not None and current.head.request_id in mine:
            await self.link.interrupt()
        for rid, future in self.pending.items():
            if not future.done() and rid not in self.watch.by_request:
                future.set_result(None)

    # --- questions -------------------------------------------------------------------------------
    def _ask_pending(self) -> None:
        question = self.watch.question
        if question is not None and question.question_id not in self.asked:
            self.asked[question.question_id] = asyncio.create_task(self._ask(question))

    async def _ask(self, question: PendingQuestion) -> None:
        short = short_id(self.id)
        options = permission_options(question)
        call = self.running[-1] if self.running else f"question-{question.question_id}"
        if not options and self.face.elicits:
            await self._elicit(question, call)
            return
        if question.freeform:
            command = self.link.command("answer", short, "--text", shlex.quote("your answer"))
            said = f"\n{question.text}\n" if not options else "\n"
            await self.face.tell(
                self.id, acp.update_agent_message_text(f"{said}(free text is answered with `{command}`)\n")
            )
        if not options:
            return
        tool_call = schema.ToolCallUpdate(tool_call_id=call, title=question.text)
        try:
            answer = await self.face.ask(self.id, question.question_id, tool_call, options)
        except (ConnectionError, acp.RequestError):
            return
        outcome = answer.outcome
        # Conflict: another client answered first (its resolution says who); any other refusal
        # (a viewer's share, a worker gone) leaves the question to those who can answer it.
        with contextlib.suppress(TuiError):
            if isinstance(outcome, schema.AllowedOutcome) and outcome.option_id.isdigit():
                label = question.options[int(outcome.option_id) - 1].label
                await self.link.answer(question.question_id, [label], None)
            else:
                await self.link.dismiss(question.question_id)

    async def _elicit(self, question: PendingQuestion, call: str) -> None:
        """A free-text question as a form of one field, where the editor offers forms."""
        try:
            answer = await self.face.elicit(self.id, question.question_id, question.text, call)
        except (ConnectionError, acp.RequestError):
            return
        with contextlib.suppress(TuiError):
            if isinstance(answer, schema.AcceptElicitationResponse) and answer.content:
                await self.link.answer(question.question_id, [], str(answer.content.get("answer", "")))
            else:
                await self.link.dismiss(question.question_id)

    async def _resolved(self, event: QuestionResolved) -> None:
        """A question was resolved: when the editor was still asked it, withdraw the request and
        say who answered."""
        task = self.asked.pop(event.question_id, None)
        if task is None or event.client_id == self.link.client_id:
            return
        if not task.done():
            await self.face.withdraw(event.question_id)
            task.cancel()
        await self._flush()
        await self.face.tell(self.id, acp.update_agent_message_text(f"\n({resolved_text(event)})\n"))

    # --- settings --------------------------------------------------------------------------------
    def options(self) -> list[Any]:
        return config_options(self.info, self.info.model, self.info.models)

    def modes(self) -> schema.SessionModeState | None:
        if not self.info.modes:
            return None
        return schema.SessionModeState(
            current_mode_id=self.info.mode or self.info.modes[0].value,
            available_modes=[
                schema.SessionMode(id=m.value, name=m.name or m.value, description=m.description or None)
                for m in self.info.modes
            ],
        )

    async def set_option(self, config_id: str, value: str) -> None:
        """Change a mode or setting; the agent takes it in the background, so the options said
        back hold the value asked for (its `agent_info` says the same once it took it)."""
        info = self.info
        if config_id == MODE and info.modes:
            await self.link.set_model(value, "mode")
            self.info = info.model_copy(update={"mode": value})
        elif config_id == MODEL and not any(s.id == MODEL for s in info.settings):
            await self.link.set_model(value)
            self.info = info.model_copy(update={"model": value})
        else:
            await self.link.set_model(value, config_id)
            settings = [
                s.model_copy(update={"current": value}) if s.id == config_id else s for s in info.settings
            ]
            self.info = info.model_copy(update={"settings": settings})
