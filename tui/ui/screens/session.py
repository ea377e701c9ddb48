"""The session screen: the transcript, the prompt (or the pending question), the status rows.

It draws and takes keys; it neither follows nor applies events. Its `Attachment`
(`tui.link.attachment`, the one every client uses) reads the session, applies each event and
hands out what changed as typed changes (`tui.link.changes`): one worker posts an `Arrived` when
something came, once per repaint, and its handler takes the batch and draws each change by the
handler its type names in `_DRAW`. Slash commands are the attachment's too; what each did is
shown by `tui.ui.screens.commands`, the keys that read the transcript and the search are
`tui.ui.screens.reading`'s. What no worker expected ends in `on_worker_state_changed`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from tui.errors import TuiError
from tui.link import changes as ch
from tui.link.attachment import Attachment
from tui.link.base import AttachLink, Gone, LinkState, Live, Reconnecting
from tui.protocol import (
    PendingQuestion,
    QueueItem,
    ToolEnded,
    ToolOutput,
    ToolUpdated,
    Transcript,
    TurnRecord,
)
from tui.protocol.ids import short_id
from tui.protocol.principal import Principal
from tui.protocol.state import SessionState
from tui.protocol.wording import model_line, new_worker_line
from tui.terminal import visible, visible_data
from tui.ui.alerts import alert
from tui.ui.memory import freeze_start_up
from tui.ui.messages import Arrived
from tui.ui.pieces import duration_text
from tui.ui.screens.commands import CommandScreen
from tui.ui.screens.help import help_text
from tui.ui.screens.reading import clip
from tui.ui.screens.running import CALL, SAID
from tui.ui.seen import Seen, SeenStore, since_seen
from tui.ui.widgets.footer import FittingFooter
from tui.ui.widgets.prompt import PLACEHOLDER, PromptArea, PromptBox
from tui.ui.widgets.question import QuestionPanel
from tui.ui.widgets.search import SearchBar
from tui.ui.widgets.status import StatusRows
from tui.ui.widgets.transcript import PAGE, TranscriptView

__all__ = ["Outgoing", "SessionScreen", "help_text"]

Outgoing = ch.Outgoing
"""A prompt on its way to the worker (the attachment's outbox holds them)."""


class SessionScreen(CommandScreen):
    """One attached session."""

    CSS_PATH = "session.tcss"

    def __init__(
        self,
        link: AttachLink,
        *,
        first_prompt: str | None = None,
        seen: SeenStore | None = None,
        clock: Callable[[], float],
        gone_exit_after: float | None,
        folder: str = "",
    ) -> None:
        super().__init__()
        self.folder = folder
        """The session's working directory (shown on an empty transcript)."""
        self.link = link
        self.attachment = Attachment(link, page=PAGE, shown=visible_data)
        """What follows the session, applies its events, keeps the outbox and runs commands."""
        self.first_prompt = first_prompt
        self.seen_store = seen
        self.clock = clock
        self.gone_exit_after = gone_exit_after
        self.attached = asyncio.Event()
        """Set once the transcript is shown and the follower runs."""
        self._last_turn_id: str | None = None
        self._asked: str | None = None
        """The question the question panel shows."""
        self._ctrl_c_at: float | None = None
        self._started: float | None = None
        """When the turn running at attach started, by the client clock (for the status rows)."""
        self._painted_once = asyncio.Event()
        """Set once the screen was painted after the last `Changed` was handled: the next batch
        waits for it, so that a stream of events never starves the screen of its repaints
        (Textual paints when the screen's queue is empty)."""
        self._keys_stale = False
        """The state changed: the keys on offer (footer) are worked out again after the batch."""
        self._leaving = False
        """Set once this screen asked the app to exit: what arrives later is not drawn."""
        self._snapshot = self.attachment.snapshot()
        """The batch being drawn's `Attachment.snapshot` (the running turn's view reads it)."""

    def compose(self) -> ComposeResult:
        yield TranscriptView(id="transcript")
        yield Static(id="away", markup=False)
        yield Static(id="queue-row", markup=False)
        yield Static(id="outbox-row", markup=False)
        yield Vertical(id="question-slot")
        yield SearchBar(id="search")
        yield Static(id="viewing", markup=False)
        yield PromptBox(id="prompt-box", paths=self.link.paths_complete)
        yield StatusRows(id="status", clock=self.clock)
        yield FittingFooter()

    # --- getters -------------------------------------------------------------------------------
    @property
    def session_state(self) -> SessionState:
        """The session as the changes drawn so far say it is."""
        return self.attachment.session

    @property
    def principal(self) -> Principal:
        """Who this client acts as: what it may not do is hidden, and refused in one line if asked."""
        return self.attachment.principal

    @property
    def outbox(self) -> list[Outgoing]:
        return self.attachment.outbox

    @property
    def cursor(self) -> int:
        """The last event applied."""
        return self.attachment.cursor

    @property
    def link_state(self) -> LinkState:
        """The link's state: the attachment's (live until it said otherwise)."""
        return self.attachment.link_state or Live()

    @property
    def busy(self) -> bool:
        """Whether a turn runs (Enter queues; Esc interrupts); none does once the worker is gone."""
        return self.attachment.busy

    @property
    def turn(self) -> TurnRecord | None:
        """The running turn's record so far."""
        return self.running_record()

    def running_record(self) -> TurnRecord | None:
        current = self.session_state.current
        return current.record() if current is not None and self.busy else None

    @property
    def question(self) -> PendingQuestion | None:
        """The pending question (the session's own, else a child's); none once the worker is gone."""
        return None if isinstance(self.link_state, Gone) else self.session_state.pending_question()

    @property
    def queue(self) -> list[QueueItem]:
        return self.session_state.queue

    def on_mount(self) -> None:
        self._status = self.status
        self.transcript.fetch = self._fetch
        self.status.show(self.attachment.snapshot())
        self.prompt.focus()
        self._follow()

    async def on_unmount(self) -> None:
        self._leaving = True
        await self.attachment.close()

    def drawing(self) -> bool:
        """Whether changes are still drawn: not once the screen or the app is leaving (a
        `worker_leaving` that arrives after ``/exit`` has no transcript to go to)."""
        return not (self._leaving or self._closing or self._closed) and self.is_attached

    # --- following -----------------------------------------------------------------------------
    def _follow(self) -> None:
        self.run_worker(self._batches(), group="follow", exclusive=True, exit_on_error=False)

    async def _batches(self) -> None:
        """Say that something arrived, once per repaint (what the link raised ends here)."""
        while not self.attachment.ended:
            await self.attachment.ready()
            self._painted_once.clear()
            self.post_message(Arrived())
            await self._painted_once.wait()

    def retry_now(self) -> None:
        """Try to reconnect now instead of waiting out the backoff (Ctrl+R while reconnecting)."""
        if isinstance(self.link_state, Reconnecting):
            self.attachment.retry_now()
            self.status.retry_now()

    async def _fetch(
        self,
        limit: int,
        *,
        before: str | None = None,
        after: str | None = None,
        around: str | None = None,
        first: bool = False,
    ) -> Transcript:
        """A page of the session's turns, for the transcript's paging and jumps."""
        page = await self.link.transcript(limit, before=before, after=after, around=around, first=first)
        return visible_data(page)

    async def on_arrived(self, message: Arrived) -> None:
        if not self.drawing():
            return
        self.call_after_refresh(self._painted_once.set)
        events = False
        changes = self.attachment.take()
        snapshot = self._snapshot = self.attachment.snapshot()  # what this batch is drawn from
        alert(self.app, changes)  # a desktop notification, when the terminal is not in front
        for change in changes:
            if not self.drawing():
                return
            draw = _DRAW.get(type(change))
            if draw is not None:
                await draw(self, change)
            events = events or not isinstance(change, _NOT_EVENTS)
        self._status.show(snapshot, started=self._started)
        if (live := self.transcript.live) is not None:
            live.show(snapshot)
        self._started = None
        if events:
            self._status.touch()
        if self._keys_stale:
            self._keys_stale = False
            self.app.refresh_bindings()  # once for what arrived at once: the footer is rebuilt

    # --- drawing what changed ------------------------------------------------------------------
    async def _attached(self, change: ch.Attached) -> None:
        transcript, info = change.transcript, change.info
        state = self.session_state
        seen = self.seen_store.get(self.link.where, self.link.session_id) if self.seen_store else None
        if info is not None:
            self.transcript.verbatim = info.reply_format == "verbatim"
            self.prompt_box.agent_commands = list(info.commands)
            self.prompt_box.models = list(info.models)
            self.prompt_box.python = info.prompt_syntax == "python"
        await self.transcript.load(transcript.turns, has_more=transcript.has_more)
        for record in transcript.turns:
            if record.by.kind == "owner":
                self.prompt.remember(record.prompt)
        if transcript.turns:
            self._last_turn_id = transcript.turns[-1].turn_id
        for line in transcript.notes:  # said since the last turn ended
            await self.transcript.add_line(line)
        if state.current is not None:
            record = state.current.record()
            for before in record.lines:
                if before.kind == "before":
                    await self.transcript.add_line(before.text)
            live = await self.transcript.start_live(record.model_copy(update={"reply": ""}))
            live.show(self._snapshot)
            live.add_text(record.reply)
        self._show_queue(tuple(state.queue), state.queue_held)
        self._show_busy()  # attached in the middle of a turn: Enter queues, Esc interrupts
        self._keys_stale = True
        if info is not None:
            self._show_agent_choices()
        self._started = self._started_clock(self.turn)  # the status rows' clock of the turn running
        self._show_principal()
        await self._show_question(self.question)
        if not transcript.turns and transcript.current is None and not transcript.has_more:
            self.transcript.show_hello(self._hello())
        self._away(seen, transcript)
        self.attached.set()
        self.opened()  # `tui attach ID --turn N`: that turn shown
        self.call_after_refresh(freeze_start_up)  # once drawn: see tui/ui/memory.py
        if self.first_prompt:
            prompt, self.first_prompt = self.first_prompt, None
            self.submit(prompt)

    def _hello(self) -> str:
        where = f" in {visible(self.folder)}" if self.folder else ""
        what = (
            "each prompt is a Python program; ask(...) asks you a question"
            if self.transcript.verbatim
            else "type a prompt, Enter sends"
        )
        return f"New session {short_id(self.link.session_id)}{where} · {what} · /help"

    def _started_clock(self, record: TurnRecord | None) -> float | None:
        if record is None:
            return None
        if record.started_at:
            try:
                started = datetime.fromisoformat(record.started_at)
                return self.clock() - max(0.0, (datetime.now(UTC) - started).total_seconds())
            except ValueError:
                pass
        return self.clock()

    def _away(self, seen: Seen | None, transcript: Transcript) -> None:
        """Say what happened since this user last saw the session (in any window), and for how long."""
        away = self.query_one("#away", Static)
        parts, first = since_seen(seen, transcript)
        if seen is None or not parts:
            away.display = False
            return
        how_long = f" ({duration_text(time.time() - seen.at)})" if seen.at is not None else ""
        away.update(f"While you were away{how_long}: " + "; ".join(parts) + ".")
        away.display = True
        for view in self.transcript.turn_views() if first else ():
            if view.record.turn_id == first:
                self.call_after_refresh(self.transcript.scroll_to_widget, view, top=True, animate=False)
                break

    def away_seen(self) -> None:
        """The user acted: the "While you were away" line has done its job."""
        self.query_one("#away", Static).display = False

    async def _turn_started(self, change: ch.TurnStarted) -> None:
        self.away_seen()  # new turns: what happened while away is no longer the news
        self._remember()
        live = await self.transcript.start_live(change.record)
        live.show(self._snapshot)
        self._show_busy()

    async def _output(self, change: ch.Output) -> None:
        live = self.transcript.live
        if live is None:
            return
        event = change.event
        if isinstance(event, (ToolUpdated, ToolOutput, ToolEnded)):  # a call is found by its id
            CALL[type(event)](live, event)
        elif live.record.turn_id == event.turn_id:
            await SAID[type(event)](live, event)

    async def _turn_ended(self, change: ch.TurnEnded) -> None:
        await self.transcript.end_live(change.record)
        self._last_turn_id = change.record.turn_id
        self._show_busy()
        self._remember()

    async def _caught_up(self, change: ch.CaughtUp) -> None:
        """Turns that started and ended while the screen was behind: shown ended, at once."""
        self.away_seen()
        await self.transcript.add_ended(list(change.records))
        self._last_turn_id = change.records[-1].turn_id
        self._show_busy()
        self._remember()
        self._keys_stale = True

    async def _state_changed(self, change: ch.StateChanged) -> None:
        self._keys_stale = True

    async def _agent_changed(self, change: ch.AgentChanged) -> None:
        self.prompt_box.agent_commands = list(change.commands)
        self._show_agent_choices()

    def _show_agent_choices(self) -> None:
        """What ``/model`` and ``/mode`` complete: the models and modes the agent offers."""
        state = self.session_state
        model = next((s for s in state.settings if s.category == "model"), None)
        self.prompt_box.agent_models = list(model.choices) if model is not None else []
        self.prompt_box.modes = list(state.modes) or next(
            (list(s.choices) for s in state.settings if s.category == "mode"), []
        )

    async def _model_changed(self, change: ch.ModelChanged) -> None:
        await self.transcript.add_line(model_line(change.model))

    async def _worker_started(self, change: ch.WorkerStarted) -> None:
        await self.transcript.add_line(new_worker_line(change.version))

    async def _outdated(self, change: ch.Outdated) -> None:
        if change.line:
            await self.transcript.add_line(change.line)

    async def _line(self, change: ch.Line) -> None:
        await self.transcript.add_line(change.text)

    async def _rewound(self, change: ch.Rewound) -> None:
        self.transcript.mark_rewound(change.first, change.last)

    async def _link_changed(self, change: ch.LinkChanged) -> None:
        state, was = change.state, change.was or Live()
        if type(was) is not type(state):
            self.app.refresh_bindings()  # Ctrl+R (retry now) is offered only while reconnecting
        if isinstance(state, Gone):
            self.notify(state.reason, title=_gone_title(state), severity="error", timeout=30)
            if self.gone_exit_after is not None:
                self.set_timer(self.gone_exit_after, lambda: self.leave(state.exit_code, state.reason))

    async def _queue_changed(self, change: ch.QueueChanged) -> None:
        self._show_queue(change.queue, change.held)

    def _show_queue(self, queue: tuple[QueueItem, ...], held: bool) -> None:
        row = self.query_one("#queue-row", Static)
        if not queue:
            row.display = False
            return
        items = " · ".join(f"{n}. {clip(i.prompt)}" for n, i in enumerate(queue, 1))
        if held:
            row.update(
                f"queue held after the interrupt: /resume runs it, /unqueue takes the last back · "
                f"({len(queue)}) {items}"
            )
        else:
            row.update(f"queued ({len(queue)}): {items}   /unqueue takes the last back")
        row.set_class(held, "-held")
        row.display = True

    async def _outbox_changed(self, change: ch.OutboxChanged) -> None:
        row = self.query_one("#outbox-row", Static)
        if not change.items:
            row.display = False
            return
        pending = " · ".join(clip(o.prompt) for o in change.items)
        row.update(f"⧗ not sent yet ({len(change.items)}): {pending} — sent when the link is back")
        row.display = change.waiting or not isinstance(self.link_state, Live)

    async def _send_failed(self, change: ch.SendFailed) -> None:
        self.notify(str(change.error), title="The prompt was not sent", severity="error")

    async def _principal_changed(self, change: ch.PrincipalChanged) -> None:
        self._show_principal()

    def _show_busy(self) -> None:
        busy = self.busy
        box = self.prompt_box
        if box.has_class("-queueing") != busy:
            box.set_class(busy, "-queueing")
            self.prompt.placeholder = "Enter queues behind the running turn" if busy else PLACEHOLDER

    # --- the question --------------------------------------------------------------------------
    async def _question_changed(self, change: ch.QuestionChanged) -> None:
        await self._show_question(change.question)

    async def _show_question(self, question: PendingQuestion | None) -> None:
        """Show `question` in the panel, or no panel when none is pending."""
        if (question.question_id if question is not None else None) == self._asked:
            return
        if question is None:
            await self._unask()
        else:
            await self._ask(question)

    async def _ask(self, question: PendingQuestion) -> None:
        await self._unask()
        self._asked = question.question_id
        # A viewer reads the question and is told who answers; answering is refused in one line.
        panel = QuestionPanel(question, may_answer=self.principal.may("write"))
        self.prompt_box.display = False  # before the panel is there, so no one sees both at once
        await self.query_one("#question-slot").mount(panel)
        panel.focus_first()  # the digits and Enter are the question's from now on
        self._remember()
        # Hiding the focused prompt moves focus on to the next widget (a transcript block):
        # the question takes it back once that happened.
        self.call_after_refresh(panel.focus_first)

    async def _unask(self) -> None:
        self._asked = None
        await self.query_one("#question-slot").remove_children()
        self.prompt_box.display = self.principal.may("write")
        if self.prompt_box.display:
            self.prompt.focus()

    async def _resolved(self, change: ch.QuestionResolved) -> None:
        """The question was resolved: the line says how, in the turn and in the transcript."""
        await self._unask()
        await self.transcript.add_line(change.line)
        if change.elsewhere:
            self.notify(change.line, title="The question was resolved elsewhere")

    @on(QuestionPanel.Answered)
    def _answered(self, message: QuestionPanel.Answered) -> None:
        if not self.permitted("write", "Answering a question"):
            return
        self.away_seen()
        self._request("answer", self.link.answer(message.question_id, message.selected, message.freeform))

    @on(QuestionPanel.Dismissed)
    def _dismissed(self, message: QuestionPanel.Dismissed) -> None:
        if not self.permitted("write", "Dismissing a question"):
            return
        self.away_seen()
        self._request("dismiss", self.link.dismiss(message.question_id))

    # --- the prompt ----------------------------------------------------------------------------
    @on(PromptArea.Submitted)
    def _submitted(self, message: PromptArea.Submitted) -> None:
        text = message.text
        if not text.strip():
            return
        self.prompt.remember(text)
        self.prompt.clear()
        self.prompt_box.close()
        self.submit(text)

    def hand_over(self, entered: list[str], draft: str) -> None:
        """What was typed on the first screen before this one (`StartingScreen`): each prompt sent
        with Enter is sent as if entered here, in order, and the prompt starts with the rest."""
        if entered and self.first_prompt:  # the command line's prompt goes first
            prompt, self.first_prompt = self.first_prompt, None
            self.submit(prompt)
        for text in entered:
            self.prompt.remember(text)
            self.submit(text)
        if draft:
            self.prompt.load_text(draft)
            self.prompt.move_cursor(self.prompt.document.end)

    def submit(self, text: str) -> None:
        """Send a prompt (queued behind the running turn) or run a slash command."""
        self.away_seen()
        if text.startswith("/") and not text.startswith("//") and not self.prompt_box.is_agent_command(text):
            self.run_command(text)
            return
        if text.startswith("//"):
            text = text[1:]
        if not self.permitted("write", "Sending a prompt"):
            return
        if self.transcript.selected is not None:
            self.leave_reading()
        self.follow_bottom()  # whatever was selected, found or opened: its turn shows
        self.attachment.submit(text)  # now, or queued behind the running turn: the worker's to say

    def _failed(self, what: str, exc: TuiError) -> None:
        """Every failed request is shown here, in one way."""
        self.notify(str(exc), title=f"{exc.title}: {what}", severity="error")

    async def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker of this screen raised what its own code did not expect (a `TuiError` is handled
        where it happens): a dead follower says so in the transcript and the status row, anything
        else in a notification; the screen keeps taking keys."""
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        what = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        if event.worker.group != "follow":
            self.notify(what, title="Unexpected error (the session keeps running)", severity="error")
            return
        where = self.link.where
        remote = f"--remote {where.removeprefix('remote ')} " if where.startswith("remote ") else ""
        gone = self.link_state  # the attachment's `Gone`, saying what failed
        reason = gone.reason if isinstance(gone, Gone) else f"the connection to the session failed: {what}"
        self.status.show(self.attachment.snapshot())
        await self.transcript.add_line(
            f"{reason}. New events are not shown: detach (Ctrl+D) and reattach "
            f"with `tui {remote}attach {short_id(self.link.session_id)}`; the session keeps running."
        )

    # --- keys ----------------------------------------------------------------------------------
    def escape(self) -> None:
        """Esc: close completions, else leave the selection or the search, else dismiss the
        question, else interrupt the running turn."""
        if self.transcript.selected is not None or self.search_bar.is_open:
            self.leave_reading()
        elif self.prompt_box.completing:
            self.prompt_box.close()
        elif self.question is not None:
            if not self.permitted("write", "Dismissing a question"):
                return
            panel = self.query(QuestionPanel)
            if panel:
                panel.first().dismiss()
        elif self.busy:
            self.interrupt()

    def interrupt(self) -> None:
        """End the running turn."""
        if not self.permitted("write", "Interrupting"):
            return
        self.away_seen()
        self._request("interrupt", self.link.interrupt())

    def ctrl_c(self) -> None:
        """Ctrl+C: interrupt a running turn; twice on an idle prompt, detach."""
        if self.busy:
            self.interrupt()
            return
        now = self.clock()
        if self._ctrl_c_at is not None and now - self._ctrl_c_at < 2.0:
            self.leave(0)
            return
        self._ctrl_c_at = now
        self.prompt.clear()
        self.notify("Press Ctrl+C again to detach (the session keeps running).", timeout=2)

    def _show_principal(self) -> None:
        p = self.principal
        viewing = self.query_one("#viewing", Static)
        if p.may("write"):
            viewing.display = False
            return
        viewing.update(
            f"Viewing as {p.name}: you can follow and read; "
            "sending, answering and interrupting need a collaborator's share."
        )
        viewing.display = True
        self.prompt_box.display = False
        self.transcript.focus()

    def _remember(self) -> None:
        """Move this user's seen mark to what this window shows now."""
        if self.seen_store is not None and self.cursor:
            seen = Seen(self.cursor, self._last_turn_id, time.time(), self._asked)
            self.seen_store.put(self.link.where, self.link.session_id, seen)

    def leave(self, code: int, message: str | None = None, *, forget: bool = False) -> None:
        """Leave the app with exit code `code` (the session keeps running unless it was stopped)."""
        if not forget:
            self._remember()
        self._leaving = True
        self.app.exit(code, return_code=code, message=f"tui: {message}" if message else None)


def _gone_title(state: Gone) -> str:
    """What ended the attach, in a few words: a refusal (exit 6) is no worker going away."""
    if state.exit_code == 6:
        return "The share was revoked" if "revoked" in state.reason else "Refused"
    return "The session's worker is gone"


_DRAW: dict[type, Callable[[SessionScreen, Any], Awaitable[None]]] = {
    ch.Attached: SessionScreen._attached,
    ch.LinkChanged: SessionScreen._link_changed,
    ch.TurnStarted: SessionScreen._turn_started,
    ch.Output: SessionScreen._output,
    ch.TurnEnded: SessionScreen._turn_ended,
    ch.CaughtUp: SessionScreen._caught_up,
    ch.QuestionChanged: SessionScreen._question_changed,
    ch.QuestionResolved: SessionScreen._resolved,
    ch.QueueChanged: SessionScreen._queue_changed,
    ch.StateChanged: SessionScreen._state_changed,
    ch.AgentChanged: SessionScreen._agent_changed,
    ch.ModelChanged: SessionScreen._model_changed,
    ch.WorkerStarted: SessionScreen._worker_started,
    ch.Outdated: SessionScreen._outdated,
    ch.Line: SessionScreen._line,
    ch.Rewound: SessionScreen._rewound,
    ch.OutboxChanged: SessionScreen._outbox_changed,
    ch.SendFailed: SessionScreen._send_failed,
    ch.PrincipalChanged: SessionScreen._principal_changed,
}
"""How each change the attachment hands out is drawn."""

_NOT_EVENTS = (ch.Attached, ch.Outdated, ch.LinkChanged, ch.OutboxChanged, ch.SendFailed, ch.PrincipalChanged)
"""Changes that come from no event of the session (the others move the "last event" clock)."""
