"""The session screen: the transcript, the prompt (or the pending question), the status rows.

Everything the link reports arrives in `LinkEvents` (or `LinkStateChanged`) messages from one
follower worker; each event is applied to the session's state (`tui.protocol.state`, the one
reducer) and the widgets then show what it says. Requests run in workers of their own, and their
failures are shown in one place (`_failed`). What no worker expected ends in
`on_worker_state_changed`, so nothing fails silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import textwrap
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import Static, TextArea
from textual.worker import Worker, WorkerState

from tui.errors import Busy, Conflict, NotFound, TuiError, Unreachable, WorkerUnavailable
from tui.link.base import AttachLink, Gone, LinkState, Live, Reconnecting
from tui.link.follow import Follower
from tui.link.slash import format_stats, needs
from tui.protocol import (
    AgentInfo,
    Event,
    Info,
    ModelChanged,
    Note,
    PendingQuestion,
    Plan,
    QuestionAsked,
    QuestionResolved,
    QueueChanged,
    QueueItem,
    SearchHit,
    Status,
    TextChunk,
    Thinking,
    ToolEnded,
    ToolOutput,
    ToolStarted,
    ToolUpdated,
    Transcript,
    TurnEnded,
    TurnRecord,
    TurnStarted,
    UnknownEvent,
    WorkerLeaving,
    WorkerStarted,
)
from tui.protocol.ids import short_id
from tui.protocol.principal import Permission, Principal
from tui.protocol.state import SessionState, agent_mode, agent_model, note_line, who
from tui.terminal import visible, visible_data
from tui.ui import slash
from tui.ui.messages import Attached, LinkEvents, LinkStateChanged
from tui.ui.pieces import duration_text
from tui.ui.screens.pager import OutputPager
from tui.ui.seen import Seen, SeenStore
from tui.ui.widgets.footer import FittingFooter
from tui.ui.widgets.prompt import PLACEHOLDER, PromptArea, PromptBox
from tui.ui.widgets.question import QuestionPanel
from tui.ui.widgets.search import SearchBar
from tui.ui.widgets.status import StatusRows
from tui.ui.widgets.transcript import PAGE, TranscriptView
from tui.ui.widgets.turn import TurnView

__all__ = ["Outgoing", "SessionScreen"]

RESUMED = (
    "This session was resumed by a new worker: the Python variables of the turns above are gone "
    "(the transcript stays). Run what you need again."
)
"""The first line a resumed python session shows, before its new worker ran a turn."""

GONE_EXIT_AFTER = 3.0
"""Seconds the reason stays on screen before the app exits when the worker is gone."""


@dataclass
class Outgoing:
    """A prompt on its way to the worker: kept until the worker took it, sent again (with the same
    request id, so at most once) when the link comes back."""

    prompt: str
    request_id: str
    delivery: Literal["now", "queue"]


class SessionScreen(Screen[None]):
    """One attached session."""

    CSS_PATH = "session.tcss"

    # Reading the transcript while the prompt keeps the typing: priority bindings, so that the
    # prompt's own (PageUp/PageDown move its cursor, Shift+Up/Down select) give way to them.
    BINDINGS = [
        Binding(
            "pageup",
            "scroll_page(-1)",
            "Scroll",
            priority=True,
            id="session.page-up",
            tooltip="Scroll the transcript a page up (older turns load past the first)",
        ),
        Binding(
            "pagedown",
            "scroll_page(1)",
            "Scroll",
            show=False,
            priority=True,
            id="session.page-down",
            tooltip="Scroll the transcript a page down",
        ),
        Binding("shift+up", "scroll_lines(-1)", "Line up", show=False, priority=True, id="session.line-up"),
        Binding(
            "shift+down", "scroll_lines(1)", "Line down", show=False, priority=True, id="session.line-down"
        ),
        Binding(
            "ctrl+home",
            "scroll_top",
            "Top",
            show=False,
            priority=True,
            id="session.top",
            tooltip="The first loaded turn; again: older turns",
        ),
        Binding(
            "ctrl+end",
            "scroll_bottom",
            "Bottom",
            show=False,
            priority=True,
            id="session.bottom",
            tooltip="Back to the live bottom",
        ),
        Binding(
            "alt+up",
            "select(-1)",
            "Select",
            priority=True,
            id="session.select-up",
            tooltip="Select a turn (then p, y, t copy its prompt, reply, tool output)",
        ),
        Binding("alt+down", "select(1)", "Select", show=False, priority=True, id="session.select-down"),
        Binding(
            "ctrl+f",
            "find",
            "Find",
            priority=True,
            id="session.find",
            tooltip="Find text in the whole session (/find TEXT)",
        ),
        Binding("p", "copy('prompt')", "Copy prompt", id="session.copy-prompt"),
        Binding("y", "copy('reply')", "Copy reply", id="session.copy-reply"),
        Binding("t", "copy('tool')", "Copy output", id="session.copy-tool"),
        Binding("o", "open_output", "Open", id="session.open-output", tooltip="The whole reply in a pager"),
        Binding("enter", "toggle_tools", "Tool output", id="session.toggle-tools"),
    ]

    def __init__(
        self,
        link: AttachLink,
        *,
        first_prompt: str | None = None,
        seen: SeenStore | None = None,
        clock: Callable[[], float],
        gone_exit_after: float | None = GONE_EXIT_AFTER,
        folder: str = "",
    ) -> None:
        super().__init__()
        self.folder = folder
        """The session's working directory (shown on an empty transcript)."""
        self.link = link
        self.first_prompt = first_prompt
        self.seen_store = seen
        self.clock = clock
        self.gone_exit_after = gone_exit_after
        self.session_state = SessionState()
        """The session as the events applied so far say it is; the widgets show it."""
        self.outbox: list[Outgoing] = []
        self.link_state: Live | Reconnecting | Gone = Live()
        self.attached = asyncio.Event()
        """Set once the transcript is shown and the follower runs."""
        self._last_turn_id: str | None = None
        self._asked: str | None = None
        """The question the question panel shows."""
        self._send_lock = asyncio.Lock()
        self._ctrl_c_at: float | None = None
        self._batch: list[Event | LinkState] | None = None
        """What arrived and is not handed to `on_link_events` yet."""
        self._in_flight = False
        """A `LinkEvents` is posted and the screen has not been painted since it was handled:
        what arrives meanwhile waits in `_batch`, so that a stream of events never starves the
        screen of its repaints (Textual paints when the screen's queue is empty)."""
        self._keys_stale = False
        """The state changed: the keys on offer (footer) are worked out again after the batch."""
        """The `LinkEvents` message posted and not yet taken by its handler."""
        self.stopped: str | None = None
        """``stopped`` or ``deleted`` once /exit ended the session's worker."""
        self.principal: Principal = link.principal
        """Who this client acts as: what it may not do is hidden, and refused in one line if asked."""
        self._hits: list[SearchHit] = []
        """The matches of the search shown."""
        self._hit = 0
        self._total = 0
        self._retry_now = asyncio.Event()
        """Set to cut the wait before the next reconnect try short (Ctrl+R)."""

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

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """A toast; its text is never read as Rich markup (it holds prompts, answers, reasons), and
        its control characters are shown, never sent to the terminal."""
        shown, title = visible(message), visible(title)
        super().notify(shown, title=title, severity=severity, timeout=timeout, markup=markup)

    # --- getters -------------------------------------------------------------------------------
    @property
    def transcript(self) -> TranscriptView:
        return self.query_one("#transcript", TranscriptView)

    @property
    def search_bar(self) -> SearchBar:
        return self.query_one("#search", SearchBar)

    @property
    def reading(self) -> bool:
        """Whether a turn is selected or the search bar is open (Esc leaves that first)."""
        if not self.is_mounted:
            return False
        return self.transcript.selected is not None or self.search_bar.is_open

    @property
    def prompt(self) -> PromptArea:
        return self.query_one("#prompt", PromptArea)

    @property
    def prompt_box(self) -> PromptBox:
        return self.query_one("#prompt-box", PromptBox)

    @property
    def status(self) -> StatusRows:
        return self.query_one("#status", StatusRows)

    @property
    def cursor(self) -> int:
        """The last event applied."""
        return self.session_state.last_seq

    @property
    def busy(self) -> bool:
        """Whether a turn runs (Enter queues; Esc interrupts); none does once the worker is gone."""
        return self.session_state.current is not None and not isinstance(self.link_state, Gone)

    @property
    def turn(self) -> TurnRecord | None:
        """The running turn's record so far."""
        current = self.session_state.current
        return current.record() if current is not None and self.busy else None

    @property
    def question(self) -> PendingQuestion | None:
        """The pending question; none once the worker is gone."""
        return None if isinstance(self.link_state, Gone) else self.session_state.question

    @property
    def queue(self) -> list[QueueItem]:
        return self.session_state.queue

    def on_mount(self) -> None:
        self._status = self.status
        self._transcript = self.transcript
        self.transcript.fetch = self._fetch
        self.status.change(where=self.link.where)
        self.prompt.focus()
        self._follow()

    # --- following -----------------------------------------------------------------------------
    @work(group="follow", exclusive=True, exit_on_error=False)
    async def _follow(self) -> None:
        transcript = await self._first_transcript()
        if transcript is None:
            return
        try:
            info: Info | None = visible_data(await self.link.info())
        except TuiError:
            info = None
        try:
            self.principal = visible_data(await self.link.whoami())
        except TuiError:
            self.principal = self.link.principal
        self.post_message(Attached(transcript, info))
        async for got in Follower(self.link, transcript.cursor, sleep=self._backoff):
            item = visible_data(got)  # what the session holds is shown, never acts on the terminal
            if self._batch is None:
                self._batch = [item]
            else:
                self._batch.append(item)
            if not self._in_flight:
                self._post_batch()
            if isinstance(item, Gone):
                return

    def _post_batch(self) -> None:
        """Hand what arrived to `on_link_events`, as one message."""
        if self._batch:
            self._in_flight = True
            self.post_message(LinkEvents(self._batch))
            self._batch = None

    def _painted(self) -> None:
        """The screen was painted after a batch: the next one may go."""
        self._in_flight = False
        self._post_batch()

    async def _backoff(self, delay: float) -> None:
        """Wait `delay` seconds before the next reconnect try, or until `retry_now`."""
        self._retry_now.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._retry_now.wait(), delay)

    def retry_now(self) -> None:
        """Try to reconnect now instead of waiting out the backoff (Ctrl+R while reconnecting)."""
        if isinstance(self.link_state, Reconnecting):
            self._retry_now.set()
            self.status.change(reconnect_at=self.clock())

    async def _first_transcript(self) -> Transcript | None:
        delay = self.link.backoff.first
        while True:
            try:
                return visible_data(await self.link.transcript(limit=PAGE))
            except (WorkerUnavailable, Unreachable) as exc:
                located = await self.link.locate()
                if located.status == "gone":
                    why = visible(located.reason or str(exc))
                    self.post_message(LinkStateChanged(Gone(why, located.exit_code)))
                    return None
                self.post_message(LinkStateChanged(Reconnecting(1, delay, visible(str(exc)))))
                await self._backoff(delay)
                delay = min(delay * self.link.backoff.factor, self.link.backoff.cap)
            except TuiError as exc:
                self.post_message(LinkStateChanged(Gone(visible(str(exc)), exc.exit_code)))
                return None

    async def on_attached(self, message: Attached) -> None:
        transcript, info = message.transcript, message.info
        self.session_state = state = SessionState.from_transcript(transcript)
        seen = self.seen_store.get(self.link.where, self.link.session_id) if self.seen_store else None
        if info is not None:
            self.transcript.verbatim = info.reply_format == "verbatim"
            self.prompt_box.agent_commands = list(info.commands)
            self.prompt_box.models = list(info.models)
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
            live.add_text(record.reply)
        self._show_queue()
        if info is not None:
            state.mode, state.modes, state.settings = info.mode, list(info.modes), list(info.settings)
            self._show_agent_choices()
        self.status.change(
            state=state.state,
            model=state.model or (info.model if info else None),
            agent=info.agent if info else state.agent,
            agent_model=agent_model(state.settings),
            mode=agent_mode(state.mode, state.modes, state.settings),
            queued=len(self.queue),
            version=info.version if info else "",
            busy_since=self._started_clock(self.turn),
            link=Live(version=info.version if info else ""),
            attached=tuple(transcript.attached),
        )
        self._show_principal()
        await self._show_question()
        if not transcript.turns and transcript.current is None and not transcript.has_more:
            self.transcript.show_hello(self._hello())
        elif info is not None and _resumed_here(info, state):
            await self.transcript.add_line(RESUMED)
        self._away(seen, transcript)
        self.attached.set()
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
        if seen is None or transcript.cursor <= seen.cursor:
            away.display = False
            return
        new = [t for t in transcript.turns if (t.ended_seq or 0) > seen.cursor]
        failed = sum(1 for t in new if t.outcome in ("failed", "interrupted"))
        parts = []
        if new:
            at_least = transcript.has_more and len(new) == len(transcript.turns)
            count = f"{'at least ' if at_least else ''}{len(new)}"
            parts.append(
                f"{count} turn{'s' if len(new) != 1 else ''} ended"
                + (f" ({failed} failed)" if failed else "")
            )
        current = transcript.current
        if current is not None and current.started_seq > seen.cursor:
            parts.append("a turn is running")
        question = transcript.question
        if question is not None and question.question_id != seen.question_id:
            parts.append("a question is waiting")
        if not parts:
            away.display = False
            return
        how_long = f" ({duration_text(time.time() - seen.at)})" if seen.at is not None else ""
        away.update(f"While you were away{how_long}: " + "; ".join(parts) + ".")
        away.display = True
        if new:
            first = new[0].turn_id
            for view in self.transcript.turn_views():
                if view.record.turn_id == first:
                    self.call_after_refresh(self.transcript.scroll_to_widget, view, top=True, animate=False)
                    break

    def away_seen(self) -> None:
        """The user acted: the "While you were away" line has done its job."""
        self.query_one("#away", Static).display = False

    async def _fetch(
        self,
        limit: int,
        *,
        before: str | None = None,
        after: str | None = None,
        around: str | None = None,
    ) -> Transcript:
        """A page of the session's turns, for the transcript's paging and jumps."""
        return visible_data(await self.link.transcript(limit, before=before, after=after, around=around))

    # --- events --------------------------------------------------------------------------------
    async def on_link_events(self, message: LinkEvents) -> None:
        self.call_after_refresh(self._painted)
        applied = False
        whole = _whole_turns(message.items)
        ended: list[TurnRecord] = []
        behind: str | None = None
        """The turn whose events are applied to the state only (`_apply_behind`)."""
        for item in message.items:
            if isinstance(item, Live | Reconnecting | Gone):
                await self._link_state(item)
                continue
            if item.seq and item.seq <= self.cursor:
                continue
            if isinstance(item, TurnStarted) and item.turn_id in whole:
                behind = item.turn_id
            if behind is not None and isinstance(item, _BEHIND):
                await self._apply_behind(item, ended)
                if isinstance(item, TurnEnded) and item.turn_id == behind:
                    behind = None
            else:
                if ended:
                    await self._show_behind(ended)
                await self._apply(item)
            applied = True
        if ended:
            await self._show_behind(ended)
        if applied:
            self._status.touch()
        if self._keys_stale:
            self._keys_stale = False
            self.app.refresh_bindings()  # once for what arrived at once: the footer is rebuilt

    async def _apply_behind(self, event: Event, ended: list[TurnRecord]) -> None:
        """An event of a turn that starts and ends within what arrived at once (the app was behind,
        e.g. a script's quick turns): applied to the state only; the turn is shown ended, with the
        others like it, by `_show_behind`."""
        state = self.session_state
        running = state.current.turn_id if state.current is not None else None
        live = self.transcript.live
        state.apply(event)
        superseded = running is not None and (state.current is None or state.current.turn_id != running)
        if live is not None and superseded and (record := state.turns.get(running or "")) is not None:
            await self._finish(record)  # the turn shown live ended before these began
        if isinstance(event, TurnStarted):
            self.outbox = [o for o in self.outbox if o.request_id != event.request_id]
        elif isinstance(event, TurnEnded) and (record := state.turns.get(event.turn_id)) is not None:
            ended.append(record)
            self._last_turn_id = record.turn_id

    def _show_agent_choices(self) -> None:
        """What ``/model`` and ``/mode`` complete: the models and modes the agent offers."""
        state = self.session_state
        model = next((s for s in state.settings if s.category == "model"), None)
        self.prompt_box.agent_models = list(model.choices) if model is not None else []
        self.prompt_box.modes = list(state.modes) or next(
            (list(s.choices) for s in state.settings if s.category == "mode"), []
        )

    def _show_status(self) -> None:
        """The status rows as the session's state says (after a `status` event)."""
        state = self.session_state
        fields: dict[str, object] = {
            "context_used": state.context_used,
            "context_limit": state.context_limit,
            "children": dict(state.children),
            "model": state.model or self.status.status.model,
            "attached": tuple(state.attached),
            "tokens": (state.tokens_in, state.tokens_out),
            "activity": state.activity,
            "cost": state.cost,
        }
        if state.state != "idle" and self.status.status.busy_since is None:
            fields["busy_since"] = self.clock()
        self.status.change(**fields)

    async def _show_behind(self, ended: list[TurnRecord]) -> None:
        """Show the turns `_apply_behind` ended, and what they changed, once."""
        records = list(ended)
        ended.clear()
        self.away_seen()
        self._show_outbox()
        await self.transcript.add_ended(records)
        state = self.session_state
        self._show_status()
        self._show_queue()
        self.status.change(
            state=state.state,
            queued=len(self.queue),
            busy_since=None if state.current is None else self.clock(),
        )
        self._show_busy()
        self._remember()
        self._keys_stale = True
        await self._show_question()

    async def _apply(self, event: Event) -> None:
        """Apply `event` to the session's state, then show what changed."""
        state = self.session_state
        running = state.current.turn_id if state.current is not None else None
        asked = state.question.question_id if state.question is not None else None
        was = state.state
        state.apply(event)
        transcript = self.transcript
        if running is not None and (state.current is None or state.current.turn_id != running):
            ended = state.turns.get(running)
            if ended is not None:
                await self._finish(ended)
        live = transcript.live
        if isinstance(event, TurnStarted):
            self.away_seen()  # new turns: what happened while away is no longer the news
            self._remember()
            self.outbox = [o for o in self.outbox if o.request_id != event.request_id]
            self._show_outbox()
            assert state.current is not None
            await transcript.start_live(state.current.record())
            self.status.change(busy_since=self.clock())
            self._show_busy()
        elif isinstance(event, TextChunk):
            if live is not None and live.record.turn_id == event.turn_id:
                live.add_text(event.text)
        elif isinstance(event, Thinking):
            if live is not None and live.record.turn_id == event.turn_id:
                await live.add_thinking(event.text)
        elif isinstance(event, ToolStarted):
            if live is not None and live.record.turn_id == event.turn_id:
                await live.tool_started(event)
        elif isinstance(event, ToolUpdated):
            if live is not None:
                live.tool_updated(event)
        elif isinstance(event, ToolOutput):
            if live is not None:
                live.tool_output(event)
        elif isinstance(event, Plan):
            if live is not None and live.record.turn_id == event.turn_id:
                await live.plan(event.entries)
        elif isinstance(event, AgentInfo):
            self.prompt_box.agent_commands = list(state.commands)
            self._show_agent_choices()
            self.status.change(
                agent_model=agent_model(state.settings),
                mode=agent_mode(state.mode, state.modes, state.settings),
            )
        elif isinstance(event, ToolEnded):
            if live is not None:
                live.tool_ended(event)
        elif isinstance(event, QuestionResolved):
            if event.question_id == asked and state.current is not None and state.current.answered:
                await self._resolved(event, state.current.answered[-1])
        elif isinstance(event, QueueChanged):
            self._show_queue()
            self.status.change(queued=len(self.queue))
        elif isinstance(event, Status):
            self._show_status()
        elif isinstance(event, ModelChanged):
            self.status.change(model=state.model)
            await transcript.add_line(f"model: {event.model}")
        elif isinstance(event, Note):
            await transcript.add_line(note_line(event))
        elif isinstance(event, WorkerStarted):
            self.status.change(
                version=event.version, model=state.model or self.status.status.model, agent=event.agent
            )
        elif isinstance(event, WorkerLeaving):
            await transcript.add_line(f"the worker is leaving{f': {event.reason}' if event.reason else ''}")
        elif isinstance(event, UnknownEvent):
            await transcript.add_line(f"(an event this version does not know: {event.type})")
        if state.state != was:
            self.status.change(state=state.state)
            self._keys_stale = True
        await self._show_question()

    async def _finish(self, record: TurnRecord) -> None:
        await self._show_question()
        await self.transcript.end_live(record)
        self._last_turn_id = record.turn_id
        self.status.change(state=self.session_state.state, busy_since=None)
        self._show_busy()
        self._remember()

    async def _end_turn_here(self, outcome: Literal["failed", "interrupted"], why: str) -> None:
        """A turn the worker will never end (it is gone) is shown ended, never spinning."""
        current = self.session_state.current
        if current is None:
            return
        await self._finish(current.record(outcome=outcome, error=why))

    async def on_link_state_changed(self, message: LinkStateChanged) -> None:
        await self._link_state(message.state)

    async def _link_state(self, state: Live | Reconnecting | Gone) -> None:
        was, self.link_state = self.link_state, state
        if type(was) is not type(state):
            self.app.refresh_bindings()  # Ctrl+R (retry now) is offered only while reconnecting
        if isinstance(state, Live):
            self.status.change(
                link=state, reconnect_at=None, version=state.version or self.status.status.version
            )
            if self.outbox:
                self._deliver()
        elif isinstance(state, Reconnecting):
            self.status.change(link=state, reconnect_at=self.clock() + state.delay)
        else:
            self.status.change(link=state)
            await self._end_turn_here("interrupted", f"the worker is gone: {state.reason}")
            self.status.change(link=state, state="ended", busy_since=None)
            await self._show_question()
            self.notify(state.reason, title=_gone_title(state), severity="error", timeout=30)
            if self.gone_exit_after is not None:
                self.set_timer(self.gone_exit_after, lambda: self.leave(state.exit_code, state.reason))

    # --- the question --------------------------------------------------------------------------
    async def _show_question(self) -> None:
        """Show the pending question in the panel, or no panel when none is pending."""
        question = self.question
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
        await self.query_one("#question-slot").mount(panel)
        self.prompt_box.display = False
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

    async def _resolved(self, event: QuestionResolved, line: str) -> None:
        """The question was resolved: `line` says how, in the turn and in the transcript."""
        await self._unask()
        await self.transcript.add_line(line)
        if event.client_id != self.link.client_id and event.how != "cancelled":
            self.notify(line, title="The question was resolved elsewhere")

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
        self.outbox.append(Outgoing(text, uuid.uuid4().hex, "queue" if self.busy else "now"))
        self._show_outbox()
        self._deliver()

    @work(group="outbox", exit_on_error=False)
    async def _deliver(self) -> None:
        async with self._send_lock:
            while self.outbox:
                item = self.outbox[0]
                try:
                    await self.link.send_turn(item.prompt, request_id=item.request_id, delivery=item.delivery)
                except Conflict as exc:
                    if isinstance(exc, Busy) and item.delivery == "now":
                        item.delivery = "queue"
                        continue
                    self._drop_outgoing(item, exc)
                    continue
                except (WorkerUnavailable, Unreachable):
                    self._show_outbox(waiting=True)
                    return
                except TuiError as exc:
                    self._drop_outgoing(item, exc)
                    continue
                if item in self.outbox:
                    self.outbox.remove(item)
                self._show_outbox()
                if self.principal.turns_left is not None:
                    await self._refresh_principal()

    def _drop_outgoing(self, item: Outgoing, exc: TuiError) -> None:
        if item in self.outbox:
            self.outbox.remove(item)
        self._show_outbox()
        self.notify(str(exc), title="The prompt was not sent", severity="error")

    def _show_outbox(self, *, waiting: bool = False) -> None:
        row = self.query_one("#outbox-row", Static)
        if not self.outbox:
            row.display = False
            return
        pending = " · ".join(_clip(o.prompt) for o in self.outbox)
        row.update(f"⧗ not sent yet ({len(self.outbox)}): {pending} — sent when the link is back")
        row.display = waiting or not isinstance(self.link_state, Live)

    def _show_queue(self) -> None:
        row = self.query_one("#queue-row", Static)
        if not self.queue:
            row.display = False
            return
        items = " · ".join(f"{n}. {_clip(i.prompt)}" for n, i in enumerate(self.queue, 1))
        if self.session_state.queue_held:
            row.update(
                f"queue held after the interrupt: /resume runs it, /unqueue drops the last · "
                f"({len(self.queue)}) {items}"
            )
        else:
            row.update(f"queued ({len(self.queue)}): {items}   /unqueue takes the last back")
        row.set_class(self.session_state.queue_held, "-held")
        row.display = True

    def _show_busy(self) -> None:
        busy = self.busy
        box = self.prompt_box
        if box.has_class("-queueing") != busy:
            box.set_class(busy, "-queueing")
            self.prompt.placeholder = "Enter queues behind the running turn" if busy else PLACEHOLDER

    # --- slash commands ------------------------------------------------------------------------
    def run_command(self, line: str) -> None:
        """Run a slash command typed at the prompt."""
        name, rest = slash.parse(line)
        need = needs(name, rest)
        if need is not None and not self.permitted(need, name):
            return
        if name == "/detach":
            self.leave(0)
        elif name == "/exit":
            self._stop(delete=False)
        elif name == "/exit --delete":
            self._stop(delete=True)
        elif name == "/archive":
            self._request(
                "archive", self.link.archive_session(), done="The session is archived; it keeps running."
            )
        elif name == "/model":
            if not rest:
                self.notify("Type /model NAME.", title="Which model?", severity="warning")
            else:
                self._request("model", self.link.set_model(rest))
        elif name == "/mode":
            if not rest:
                self.notify("Type /mode NAME (Tab completes).", title="Which mode?", severity="warning")
            else:
                self._request("mode", self.link.set_model(rest, "mode"))
        elif name == "/queue":
            if rest:
                self.outbox.append(Outgoing(rest, uuid.uuid4().hex, "queue"))
                self._deliver()
            else:
                self._show_queue_lines()
        elif name == "/unqueue":
            self.unqueue()
        elif name == "/resume":
            self._resume()
        elif name == "/copy":
            self.copy_last_reply()
        elif name == "/stats":
            self._stats()
        elif name == "/find":
            self.open_search(rest)
        elif name == "/help":
            view = self.transcript  # its width once the help brings the scrollbar
            columns = view.outer_size.width - view.styles.gutter.width - view.styles.scrollbar_size_vertical
            self.run_worker(self.transcript.add_line(help_text(columns)), exit_on_error=False)
        else:
            self.notify(
                f"{name} is not a command; /help lists them.", title="Unknown command", severity="warning"
            )

    def _show_queue_lines(self) -> None:
        if not self.queue:
            self.notify("Nothing is queued.", title="Queue")
        else:
            queued = enumerate(self.queue, 1)
            lines = "\n".join(f"{n}. {i.prompt}  · {who(i.by, i.client_id)}" for n, i in queued)
            self.notify(lines, title="Queue")

    def unqueue(self) -> None:
        """Take the last queued prompt back into the prompt."""
        if not self.permitted("write", "Taking a queued prompt back"):
            return
        if not self.queue:
            self.notify("Nothing is queued.", title="Queue")
            return
        mine = [i for i in self.queue if i.client_id == self.link.client_id] or self.queue
        self._unqueue(mine[-1])

    @work(group="requests", exit_on_error=False)
    async def _unqueue(self, item: QueueItem) -> None:
        try:
            await self.link.unqueue(item.queue_id)
        except NotFound:
            self.notify("It already started.", title="Could not take it back", severity="warning")
            return
        except TuiError as exc:
            self._failed("unqueue", exc)
            return
        if not self.prompt.text.strip():
            self.prompt.load_text(item.prompt)
            self.prompt.move_cursor(self.prompt.document.end)

    @work(group="requests", exit_on_error=False)
    async def _resume(self) -> None:
        try:
            resumed = await self.link.resume_queue()
        except TuiError as exc:
            self._failed("resume", exc)
            return
        if not resumed:
            self.notify("The queue is not held.", title="Queue")

    def copy_last_reply(self) -> None:
        """Copy the last reply there is (of the ended turns kept here) to the clipboard (OSC 52:
        it works over SSH and tmux); the note says which turn's it is when a later one had none."""
        newest = list(reversed(self.session_state.turns.values()))
        kept = [i.record for i in reversed(self.transcript.items) if i.record is not None]
        if not newest and not kept:
            self.notify("No turn has ended yet.", title="Nothing to copy", severity="warning")
            return
        last = next((r for r in [*newest, *kept] if r.reply), None)
        if last is None:
            self.notify("No ended turn here has a reply.", title="Nothing to copy", severity="warning")
            return
        self.app.copy_to_clipboard(last.reply)
        lines = len(last.reply.splitlines())
        latest = (newest or kept)[0]
        which = "The last reply" if last.turn_id == latest.turn_id else f"The reply of turn {last.number}"
        later = "" if last.turn_id == latest.turn_id else " (the turns after it have none)"
        self.notify(f"copied {lines} line{'s' if lines != 1 else ''}{later}", title=which)

    @work(group="requests", exit_on_error=False)
    async def _stats(self) -> None:
        try:
            stats = visible_data(await self.link.stats())
        except TuiError as exc:
            self._failed("stats", exc)
            return
        await self.transcript.add_line(format_stats(stats))

    @work(group="requests", exit_on_error=False)
    async def _stop(self, *, delete: bool) -> None:
        try:
            await self.link.stop_worker()
            if delete:
                await self.link.delete_session()
        except TuiError as exc:
            self._failed("exit", exc)
            return
        self.stopped = "deleted" if delete else "stopped"
        self.leave(0, None, forget=delete)

    def _request(self, what: str, call: object, *, done: str | None = None) -> None:
        async def run() -> None:
            try:
                await call  # type: ignore[misc]
            except TuiError as exc:
                self._failed(what, exc)
                return
            if done:
                self.notify(done)

        self.run_worker(run(), group="requests", exit_on_error=False)

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
        self.link_state = Gone(f"the connection to the session failed: {what}")
        self.status.change(link=self.link_state, reconnect_at=None)
        await self.transcript.add_line(
            f"{self.link_state.reason}. New events are not shown: detach (Ctrl+D) and reattach "
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

    # --- reading the transcript ------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("copy", "open_output", "toggle_tools"):
            return self.is_mounted and self.transcript.selected is not None
        return True

    def action_scroll_page(self, direction: int) -> None:
        if direction < 0:
            self.transcript.action_page_older()
        else:
            self.transcript.action_page_newer()

    def action_scroll_lines(self, lines: int) -> None:
        self.transcript.scroll_lines(lines)

    def action_scroll_top(self) -> None:
        self.transcript.action_top()

    def action_scroll_bottom(self) -> None:
        self.transcript.action_bottom()

    def action_select(self, step: int) -> None:
        transcript = self.transcript
        transcript.move_selection(step)
        if transcript.selected is not None:
            transcript.focus()
        self.refresh_bindings()

    def leave_reading(self) -> None:
        """Esc while reading: close the search (and its highlights), leave the selection."""
        transcript = self.transcript
        if self.search_bar.is_open:
            self.search_bar.close()
            transcript.set_highlight("")
            self._hits = []
        transcript.select(None)
        if self.prompt_box.display:
            self.prompt.focus()
        else:
            transcript.focus()
        self.refresh_bindings()

    def _selected_record(self) -> TurnRecord | None:
        view = self.transcript.selected_view
        return view.record if view is not None else None

    def action_copy(self, what: str) -> None:
        record = self._selected_record()
        if record is None:
            return
        if what == "prompt":
            text, name = record.prompt, "prompt"
        elif what == "reply":
            text, name = record.reply, "reply"
        else:
            text, name = "\n".join(t.output for t in record.tools if t.output), "tool output"
        number = getattr(record, "number", 0)
        turn = f"turn {number}" if number else "the selected turn"
        if not text:
            self.notify(f"{turn.capitalize()} has no {name}.", title="Nothing copied", severity="warning")
            return
        self.app.copy_to_clipboard(text)
        lines = len(text.splitlines())
        self.notify(
            f"The {name} of {turn}: {lines} line{'s' if lines != 1 else ''}, {len(text)} characters.",
            title="Copied",
        )

    def action_toggle_tools(self) -> None:
        view = self.transcript.selected_view
        if view is not None:
            view.action_toggle_tools()

    def action_open_output(self) -> None:
        record = self._selected_record()
        if record is None:
            return
        title = _clip(record.prompt, 60)
        self.app.push_screen(OutputPager(self.link, record.turn_id, call_id=None, title=title))

    @on(TextArea.Changed, "#prompt")
    def _typing(self) -> None:
        """Typing a prompt goes back to the live bottom (a prompt cleared by sending is not typing)."""
        transcript = self.transcript
        if not self.prompt.text:
            return
        if transcript.selected is not None:
            transcript.select(None)
        if not transcript.at_live_end or transcript.scroll_y < transcript.max_scroll_y:
            self.run_worker(transcript.to_live_end(), group="transcript-window", exit_on_error=False)

    def action_find(self) -> None:
        self.open_search("")

    def open_search(self, text: str) -> None:
        """Open the search bar; with `text`, search for it at once (as Enter in the bar does)."""
        bar = self.search_bar
        bar.open(text)
        if text.strip():
            bar.searched = text
            self._search(text)
        self.refresh_bindings()

    @on(SearchBar.Find)
    def _find(self, message: SearchBar.Find) -> None:
        self._search(message.text)

    @on(SearchBar.Step)
    def _step(self, message: SearchBar.Step) -> None:
        if not self._hits:
            return
        self._hit = (self._hit + message.step) % len(self._hits)
        self._show_hit()

    @work(group="search", exclusive=True, exit_on_error=False)
    async def _search(self, text: str) -> None:
        bar = self.search_bar
        bar.show_count("searching…")
        try:
            result = visible_data(await self.link.search(text))
        except TuiError as exc:
            bar.show_count("")
            self._failed("search", exc)
            return
        self._hits, self._hit, self._total = list(result.hits), 0, result.total
        if not self._hits:
            self.transcript.set_highlight("")
            bar.show_count("no match")
            return
        self.transcript.set_highlight(text)
        await self._go_to_hit()

    @work(group="search", exclusive=True, exit_on_error=False)
    async def _show_hit(self) -> None:
        await self._go_to_hit()

    async def _go_to_hit(self) -> None:
        hit: SearchHit = self._hits[self._hit]
        more = "+" if self._total > len(self._hits) else ""
        count = f"{self._hit + 1} of {self._total}{more} · {hit.where}"
        self.search_bar.show_count(count)
        if not await self.transcript.go_to(hit.turn_id):
            self.search_bar.show_count(f"{self._hit + 1} of {self._total}{more} · not loaded")
            return
        view = self.transcript.selected_view
        if view is not None and hit.where == "tool" and not view.expanded:
            view.expanded = True  # the match is in a call: its output shows
        if view is not None:
            self.call_after_refresh(self._say_if_folded, view, hit, count)

    def _say_if_folded(self, view: TurnView, hit: SearchHit, count: str) -> None:
        """A match in the lines a long output folds away is not on the screen: the count says
        which line it is, so the reader knows where (the fold line says how to open it all)."""
        text = self.search_bar.searched.lower()
        if not text or hit.where == "prompt" or not view.is_attached or _draws(view, text):
            return
        record = view.record
        source = record.reply if hit.where == "reply" else "\n".join(t.output for t in record.tools)
        at = source.lower().find(text)
        if at < 0:
            return
        line = source.count("\n", 0, at) + 1
        self.search_bar.show_count(f"{count} line {line:,} (folded)")  # "1 of 2 · reply line 501 (folded)"

    # --- who this client is --------------------------------------------------------------------
    def permitted(self, action: Permission, what: str) -> bool:
        """Whether this client may do `action`; if not, say so in one line (nothing is sent)."""
        if self.principal.may(action):
            return True
        p = self.principal
        if action == "owner":
            line = f"{what} is for the session's owner; you are {p.name}, a {p.kind} here."
        else:
            line = f"{what} needs a collaborator's share; you are viewing as {p.name}."
        self.notify(line, title="Not permitted", severity="warning")
        return False

    def _show_principal(self) -> None:
        p = self.principal
        viewing = self.query_one("#viewing", Static)
        self.status.change(principal=p)
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

    async def _refresh_principal(self) -> None:
        try:
            self.principal = await self.link.whoami()
        except TuiError:
            return
        self._show_principal()

    def _remember(self) -> None:
        """Move this user's seen mark to what this window shows now."""
        if self.seen_store is not None and self.cursor:
            seen = Seen(self.cursor, self._last_turn_id, time.time(), self._asked)
            self.seen_store.put(self.link.where, self.link.session_id, seen)

    def leave(self, code: int, message: str | None = None, *, forget: bool = False) -> None:
        """Leave the app with exit code `code` (the session keeps running unless it was stopped)."""
        if not forget:
            self._remember()
        self.app.exit(code, return_code=code, message=f"tui: {message}" if message else None)


def _resumed_here(info: Info, state: SessionState) -> bool:
    """Whether a python session's worker was started on earlier turns (their variables lost) and
    has run none yet."""
    resumed = info.resumed_at_turn
    return (
        info.prompt_syntax == "python"
        and resumed > 0
        and state.turns_started <= resumed
        and not state.current
    )


def _gone_title(state: Gone) -> str:
    """What ended the attach, in a few words: a refusal (exit 6) is no worker going away."""
    if state.exit_code == 6:
        return "The share was revoked" if "revoked" in state.reason else "Refused"
    return "The session's worker is gone"


_BEHIND = (
    TurnStarted,
    TextChunk,
    Thinking,
    ToolStarted,
    ToolUpdated,
    ToolOutput,
    ToolEnded,
    Plan,
    TurnEnded,
    Status,
    QueueChanged,
    QuestionAsked,
    QuestionResolved,
    Note,
)
"""Events inside a turn that starts and ends within what arrived at once: applied to the state
only, then shown once (its notes in their place in it; other lines still show where they came)."""


def _draws(view: TurnView, text: str) -> bool:
    """Whether `view` draws `text` (lower case) on one of its lines at its width, below its
    prompt (a hit in the reply or a call is not the one a prompt shows)."""
    width = view.content_size.width
    return any(text in strip.text.lower() for block in view.blocks[1:] for strip in block.lines(view, width))


def _whole_turns(items: Sequence[object]) -> set[str]:
    """The turns that both start and end among `items` (events as they arrived at once)."""
    started = {i.turn_id for i in items if isinstance(i, TurnStarted)}
    return (
        {i.turn_id for i in items if isinstance(i, TurnEnded) and i.turn_id in started} if started else set()
    )


def _clip(text: str, limit: int = 40) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def help_text(columns: int = 0) -> str:
    """What /help shows: the commands and the keys; given `columns`, a line too long for them
    goes on under its own text."""
    width = max(len(c.usage) for c in slash.COMMANDS)
    keys = [
        ("Enter", "send (queues while a turn runs)"),
        ("Ctrl+J, Alt+Enter", "new line"),
        ("Up / Down", "prompt history"),
        ("PgUp / PgDn", "scroll the transcript (older turns load past the first)"),
        ("Shift+Up / Down", "scroll the transcript by lines"),
        ("Ctrl+Home / End", "the session's first turn / back to the live bottom"),
        ("Alt+Up / Down", "select a turn: p, y, t copy its prompt, reply, tool output"),
        ("", "Enter shows its tool output, o opens the whole reply"),
        ("Ctrl+F, /find", "find text in the whole session (Enter/Down next, Up previous)"),
        ("Esc", "leave the selection or search, close completions, dismiss a question, or interrupt"),
        ("Ctrl+C", "interrupt; twice on an idle prompt: detach"),
        ("Ctrl+D, Ctrl+Q", "detach (the session keeps running)"),
        ("Ctrl+P", "command palette (themes too)"),
        ("F1", "this help"),
        ("Ctrl+R", "while reconnecting: try now"),
        ("@path", "complete a file (this machine's sessions)"),
    ]
    width = max(width, *(len(k) for k, _ in keys))
    indent = " " * (width + 4)

    def row(name: str, text: str) -> str:
        head = f"  {name:<{width}}  "
        if columns <= len(indent) + 20:
            return head + text
        return textwrap.fill(text, columns, initial_indent=head, subsequent_indent=indent)

    commands = "\n".join(row(c.usage, c.help) for c in slash.COMMANDS)
    lines = "\n".join(row(k, h) for k, h in keys)
    return f"Commands:\n{commands}\nKeys:\n{lines}"
