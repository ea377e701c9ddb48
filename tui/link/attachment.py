"""`Attachment`: one client's attachment to one session, the code every client shares.

It fetches the session's first transcript (retrying under the one policy, `tui.link.follow.Retries`:
jitter, the stream's ``retry:`` hint, the link's no-worker timeout), then follows the session with
one `Follower`, applies each event with the one reducer (`tui.protocol.state.SessionState`) and
hands out what changed as typed changes (`tui.link.changes`): it compares the state before and
after each event once, so that a client only shows what it is told. It keeps the outbox, the
prompts not taken by the worker yet (typed while the link is down, or while another turn starts),
each with its request id, and sends them when the worker is live again (`tui.link.outbox`); and
it carries out the slash commands of `tui.link.slash`, answering each with an `Outcome` the
client shows.

A client (the app's session screen, the piped surface and ``tui send --wait`` through
`SessionWatch`, a browser page's server side, `tui.web.changes`, which keeps one attachment a
session for every page and words its changes with `tui.link.page`, an editor's ACP endpoint)
never follows or applies events itself::

    attachment = Attachment(link)  # it starts reading when first asked for changes
    HANDLERS = {changes.TurnStarted: show_turn, changes.Output: show_output, ...}
    async for batch in attachment:  # what arrived since the last batch, applied, in order
        for change in batch:
            HANDLERS.get(type(change), ignore)(change)  # a type it does not show: skipped
    # the iteration ends after a batch holding `LinkChanged(Gone(...))`

    attachment.submit("print(1)")  # the worker starts it or queues it; sent once the link is back
    outcome = await attachment.command("/stats")  # `StatsShown(line)`, `Failed(...)`, ...
    await attachment.close()

`next()` takes what arrived as one batch (a turn that starts and ends within it comes as one
`CaughtUp`); `step()` one item (a script waiting on a turn); a client that draws waits with
`ready()` and applies with `take()` where it draws, a batch per repaint. Items are applied only
when taken: `session` says what the changes handed out so far say.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any, Literal

from tui import __version__, is_older
from tui.errors import NotFound, Refused, TuiError, Unreachable, WorkerUnavailable
from tui.link import changes as ch
from tui.link.base import AttachLink, Gone, LinkState, Live, Reconnecting
from tui.link.commands import COMMANDS
from tui.link.follow import Follower, Retries
from tui.link.outbox import Outbox
from tui.link.slash import Surface, find, needs, parse
from tui.protocol import (
    AgentInfo,
    ChildEnded,
    ChildStarted,
    Delivery,
    Event,
    ImageRef,
    Info,
    ModelChanged,
    Note,
    Plan,
    QuestionAsked,
    QuestionResolved,
    QueueChanged,
    Rewound,
    SettingChanged,
    ShareChanged,
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
from tui.protocol.output import KEEP_OUTPUT
from tui.protocol.principal import Permission, Principal
from tui.protocol.state import SessionState, agent_mode, agent_model, child_line, note_line
from tui.protocol.wording import (
    leaving_line,
    restart_loses,
    rewound_line,
    setting_line,
    share_line,
    unknown_line,
    worker_lost,
)

__all__ = ["PAGE", "Attachment", "Surface"]

PAGE = 40
"""How many ended turns the first transcript holds."""

_OUTPUT = (TextChunk, Thinking, ToolStarted, ToolUpdated, ToolOutput, ToolEnded, Plan)
"""The running turn's output: handed out as `changes.Output`."""

_WITHIN_TURN = (*_OUTPUT, TurnStarted, TurnEnded, Status, QueueChanged, QuestionAsked, QuestionResolved, Note)
"""Events inside a turn that starts and ends within one batch: applied to the state only, then
handed out once as `changes.CaughtUp` (its notes in their place in it; other lines still come
where they came)."""


class _Attached:
    """The first transcript read (an item of the inbox)."""

    def __init__(self, transcript: Transcript, info: Info | None, principal: Principal) -> None:
        self.transcript, self.info, self.principal = transcript, info, principal


_Item = (
    Event | Live | Reconnecting | Gone | _Attached | ch.OutboxChanged | ch.SendFailed | ch.PrincipalChanged
)


class Attachment:
    """One client's attachment to one session (see the module's docstring for how it is used).

    Args:
        link: the session.
        transcript: where to start, when the client read it already (no `Attached` is handed
            out then); None: `start` reads the last `page` turns, retrying until a worker answers.
        page: how many ended turns that first transcript holds.
        keep_turns: how many ended turns `session` keeps (None: all, as a script's waits need).
        keep_output: how much of each running call's output `session` keeps, its first and last
            characters (`tui.protocol.output`; None: all of it).
        shown: what every item read from the link goes through first (the app passes
            `tui.terminal.visible_data`: what a session holds is shown, never acts on a terminal).

    Attributes:
        session: the session's state as the changes handed out so far say.
        link_state: the link's last state (None before the first).
        outbox: the prompts not taken by the worker yet, oldest first.
        principal: who this client acts as (asked at attach and after each turn a share counts).
        info: the worker's ``/info`` when attached (None when it could not be read).
    """

    def __init__(
        self,
        link: AttachLink,
        transcript: Transcript | None = None,
        *,
        page: int = PAGE,
        keep_turns: int | None = 1,
        keep_output: tuple[int, int] | None = KEEP_OUTPUT,
        shown: Callable[[Any], Any] | None = None,
    ) -> None:
        self.link = link
        self.page = page
        self.keep_turns = keep_turns
        self.keep_output = keep_output
        self._shown: Callable[[Any], Any] = shown or (lambda item: item)
        self.session = SessionState(keep_turns=keep_turns, keep_output=keep_output)
        self.link_state: LinkState | None = None
        self.principal: Principal = link.principal
        self.info: Info | None = None
        self.disk_full = ""
        """The worker's sentence while its disk is full (`Live.disk_full`)."""
        self.installed = ""
        """The tui installed, when the worker runs an older one (empty otherwise)."""
        self._said_outdated = False
        """The line saying the worker runs an older tui than the one installed was handed out."""
        self.follower: Follower | None = None
        self._inbox: deque[_Item | BaseException] = deque()
        self._arrived = asyncio.Event()
        self._retry_now = asyncio.Event()
        self._pump: asyncio.Task[None] | None = None
        self._outbox = Outbox(link, self._put, self._shown, lambda: self.principal)
        self._asked: str | None = None
        """The question last handed out as pending."""
        self._shown_turn: str | None = None
        """The turn last handed out as running (`TurnStarted`, or the transcript's current one)."""
        self._ended = False
        if transcript is not None:
            self._attach(transcript)
            self.follower = Follower(link, transcript.cursor, sleep=self._wait)

    # --- following ---------------------------------------------------------------------------
    @property
    def cursor(self) -> int:
        """The last event applied."""
        return self.session.last_seq

    def start(self) -> None:
        """Start reading the session (the first transcript, then its events) in a task."""
        if self._pump is None:
            self._pump = asyncio.create_task(self._run_pump(), name=f"follow {self.link.session_id}")

    def retry_now(self) -> None:
        """Cut the wait before the next reconnect try short (Ctrl+R while reconnecting)."""
        self._retry_now.set()

    async def _wait(self, delay: float) -> None:
        self._retry_now.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._retry_now.wait(), delay)

    def _put(self, item: _Item | BaseException) -> None:
        self._inbox.append(item)
        self._arrived.set()

    async def _run_pump(self) -> None:
        try:
            if self.follower is None:
                first = await self._first_transcript()
                if first is None:
                    return
                self._put(first)
                self.follower = Follower(self.link, first.transcript.cursor, sleep=self._wait)
            async for item in self.follower:
                self._put(self._shown(item))
                if isinstance(item, Gone):
                    return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # handed to the consumer, which raises it
            self._put(exc)

    async def _first_transcript(self) -> _Attached | None:
        """The last `page` turns, read under the one retry policy; None once the session is gone
        (a `Gone` is in the inbox then)."""
        retries = Retries(self.link)
        while True:
            try:
                transcript: Transcript = self._shown(await self.link.transcript(limit=self.page))
                break
            except (WorkerUnavailable, Unreachable) as exc:
                try:
                    located = await self.link.locate()
                except (Refused, NotFound) as refused:
                    self._put(self._shown(Gone(str(refused), refused.exit_code)))
                    return None
                except TuiError:
                    located = None
                if located is not None and located.status == "gone":
                    self._put(self._shown(Gone(located.reason or str(exc), located.exit_code)))
                    return None
                step = retries.next(str(exc))
                self._put(self._shown(step))
                if isinstance(step, Gone):
                    return None
                await self._wait(step.delay)
            except TuiError as exc:
                self._put(self._shown(Gone(str(exc), exc.exit_code)))
                return None
        info: Info | None
        try:
            info = self._shown(await self.link.info())
        except TuiError:
            info = None
        try:
            principal: Principal = self._shown(await self.link.whoami())
        except TuiError:
            principal = self.link.principal
        return _Attached(transcript, info, principal)

    def snapshot(self) -> ch.Snapshot:
        """The session's standing facts as the changes handed out so far left them (a client
        takes one per batch and draws its status from it)."""
        s, info = self.session, self.info
        link = self.link_state or Live()
        gone = isinstance(link, Gone)
        live_version = link.version if isinstance(link, Live) else ""
        return ch.Snapshot(
            state="ended" if gone else s.state,
            turn_id=s.current.turn_id if s.current is not None and not gone else None,
            model=s.model or (info.model if info is not None else None),
            agent=s.agent or (info.agent if info is not None else None),
            agent_model=agent_model(s.settings),
            mode=agent_mode(s.mode, s.modes, s.settings),
            cost=s.cost,
            context_used=s.context_used,
            context_limit=s.context_limit,
            tokens=(s.tokens_in, s.tokens_out),
            activity=s.activity,
            queued=len(s.queue),
            children=dict(s.children),
            turn=s.current if not gone else None,
            where=self.link.place,
            link=link,
            version=s.version or live_version or (info.version if info is not None else ""),
            installed=self.installed,
            attached=tuple(s.attached),
            principal=self.principal,
        )

    def _outdated(self, version: str) -> ch.Outdated:
        """Whether the worker runs an older tui than the one installed, and once a line saying
        what moves the session to it. Only for this machine's sessions: another machine's
        workers run the tui installed there, which `tui sessions --remote` tells."""
        older = self.link.where == "local" and is_older(version)
        self.installed = __version__ if older else ""
        if not older or self._said_outdated:
            return ch.Outdated(self.installed)
        self._said_outdated = True
        how = (
            f"/restart moves the session to it ({restart_loses(self.session.agent)} are lost)"
            if self.principal.may("owner")
            else "the session's owner can move it there"
        )
        said = f"this worker runs tui {version}; tui {__version__} is installed: {how}"
        return ch.Outdated(self.installed, said)

    @property
    def ended(self) -> bool:
        """Whether a `LinkChanged(Gone)` was handed out: nothing more comes."""
        return self._ended

    async def ready(self, within: float | None = None) -> bool:
        """Wait until something arrived (True), or `within` seconds passed first (False); what
        arrived is applied by `take`.

        Raises:
            EOFError: called again after the session was gone.
            Exception: what the link raised that no follower expects: the attachment is over
                then (`link_state` is a `Gone` saying so, and nothing more is read).
        """
        self.start()
        while not self._inbox:
            if self._ended:
                raise EOFError("the attachment ended: the session is gone")
            self._arrived.clear()
            try:
                async with asyncio.timeout(within):
                    await self._arrived.wait()
            except TimeoutError:
                return False
        head = self._inbox[0]
        if isinstance(head, BaseException):
            self._inbox.popleft()
            self._failed(head)
            raise head
        return True

    def _failed(self, error: BaseException) -> None:
        """What no follower expects ended the attachment: it is gone, and reads no more."""
        what = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        self.link_state = Gone(f"the connection to the session failed: {what}")
        self._ended = True
        if self._pump is not None:
            self._pump.cancel()

    def take(self) -> list[ch.Change]:
        """Apply everything that arrived (up to an error, which the next `ready` raises) and
        hand it out as changes, in order."""
        taken: list[_Item] = []
        while self._inbox and not isinstance(self._inbox[0], BaseException):
            taken.append(self._inbox.popleft())  # type: ignore[arg-type]
        return self._apply_batch(taken)

    async def next(self, within: float | None = None) -> list[ch.Change] | None:
        """Everything that arrived since the last call (waiting for at least one item), applied
        and handed out as changes, in order; None when `within` seconds passed first.

        Raises:
            EOFError: called again after the session was gone.
            Exception: what the link raised that no follower expects.
        """
        return self.take() if await self.ready(within) else None

    async def step(
        self, within: float | None = None
    ) -> tuple[Event | LinkState | None, list[ch.Change]] | None:
        """The next item alone, applied: the event or link state (None for a change of the
        outbox) and its changes; None when `within` seconds passed first."""
        if not await self.ready(within):
            return None
        item = self._inbox.popleft()
        changes = self._apply_batch([item])  # type: ignore[list-item]
        internal = isinstance(item, (_Attached, ch.OutboxChanged, ch.SendFailed, ch.PrincipalChanged))
        return (None if internal else item), changes  # type: ignore[return-value]

    def __aiter__(self) -> AsyncIterator[list[ch.Change]]:
        return self._batches()

    async def _batches(self) -> AsyncIterator[list[ch.Change]]:
        while not self._ended:
            batch = await self.next()
            if batch is not None:
                yield batch

    async def close(self) -> None:
        """Stop following (the outbox is dropped)."""
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(BaseException):
                await self._pump
        await self._outbox.close()
        if self.follower is not None:
            await self.follower.aclose()

    # --- applying ----------------------------------------------------------------------------
    def _attach(self, transcript: Transcript, info: Info | None = None) -> None:
        self.session = SessionState.from_transcript(
            transcript, keep_turns=self.keep_turns, keep_output=self.keep_output
        )
        if info is not None:
            self.info = info
            self.session.mode, self.session.modes = info.mode, list(info.modes)
            self.session.settings = list(info.settings)
        asked = self.session.pending_question()
        self._asked = asked.question_id if asked is not None else None
        self._shown_turn = self.session.current.turn_id if self.session.current else None

    def _apply_batch(self, items: Sequence[_Item]) -> list[ch.Change]:
        out: list[ch.Change] = []
        whole = _whole_turns(items)
        caught_up: list[TurnRecord] = []
        behind: str | None = None
        """The turn whose events are applied to the state only."""
        for item in items:
            if isinstance(item, (Live, Reconnecting, Gone)):
                out.extend(self._link(item))
            elif isinstance(item, _Attached):
                self.principal = item.principal
                self._attach(item.transcript, item.info)
                out.append(ch.Attached(item.transcript, item.info, item.principal))
                out.append(self._outdated(item.info.version if item.info else ""))
            elif isinstance(item, ch.PrincipalChanged):
                self.principal = item.principal
                out.append(item)
            elif isinstance(item, (ch.OutboxChanged, ch.SendFailed)):
                out.append(item)
            else:
                if item.seq and item.seq <= self.cursor:
                    continue
                if isinstance(item, TurnStarted) and item.turn_id in whole:
                    behind = item.turn_id
                if behind is not None and isinstance(item, _WITHIN_TURN):
                    out.extend(self._apply_behind(item, caught_up))
                    if isinstance(item, TurnEnded) and item.turn_id == behind:
                        behind = None
                else:
                    if caught_up:
                        out.extend(self._caught_up(caught_up))
                    out.extend(self._apply(item))
        if caught_up:
            out.extend(self._caught_up(caught_up))
        self._after(out)
        return out

    def _question(self) -> list[ch.Change]:
        """A `QuestionChanged` when the pending question is not the one last handed out."""
        # The session's own question, else a child's waiting one (answered here, it reaches the child).
        question = None if isinstance(self.link_state, Gone) else self.session.pending_question()
        qid = question.question_id if question is not None else None
        if qid == self._asked:
            return []
        self._asked = qid
        return [ch.QuestionChanged(question)]

    def _ended_turn(self, running: str | None) -> list[ch.Change]:
        """A `TurnEnded` for the turn that ran before the last event, when that event ended it."""
        state = self.session
        if running is None or (state.current is not None and state.current.turn_id == running):
            return []
        record = state.turns.get(running)
        if record is None:
            return []
        self._shown_turn = None
        return [*self._question(), ch.TurnEnded(record)]

    def _drop_sent(self, event: TurnStarted) -> list[ch.Change]:
        """The prompt that started a turn leaves the outbox: the worker took it."""
        return [self._outbox.change()] if self._outbox.taken(event) else []

    def _apply(self, event: Event) -> list[ch.Change]:
        """Apply `event`, and say what it changed."""
        state = self.session
        running = state.current.turn_id if state.current is not None else None
        asked, was = self._asked, state.state
        state.apply(event)
        out = self._ended_turn(running)
        if isinstance(event, TurnStarted):
            out.extend(self._drop_sent(event))
            assert state.current is not None
            own = event.request_id in self._outbox.requests
            self._shown_turn = event.turn_id
            out.append(ch.TurnStarted(state.current.record(), event.request_id, own))
        elif isinstance(event, _OUTPUT):
            out.append(ch.Output(event.turn_id, event))
        elif isinstance(event, QuestionResolved):
            if event.question_id == asked and state.current is not None and state.current.answered:
                self._asked = None
                elsewhere = event.client_id != self.link.client_id and event.how != "cancelled"
                out.append(ch.QuestionResolved(event.question_id, state.current.answered[-1], elsewhere))
        elif isinstance(event, QueueChanged):
            out.append(ch.QueueChanged(tuple(state.queue), state.queue_held))
        elif isinstance(event, Status):
            out.append(self._status())
        elif isinstance(event, AgentInfo):
            out.append(
                ch.AgentChanged(tuple(state.commands), state.mode, tuple(state.modes), tuple(state.settings))
            )
        elif isinstance(event, ModelChanged):
            out.append(ch.ModelChanged(event.model))
        elif isinstance(event, SettingChanged):
            out.append(ch.Line(setting_line(event.setting, event.value)))
        elif isinstance(event, Note):
            out.append(ch.Line(note_line(event)))
        elif isinstance(event, (ChildStarted, ChildEnded)):
            out.append(ch.Line(child_line(event)))  # in the running turn as it starts, else between turns
        elif isinstance(event, Rewound):
            out += [ch.Line(rewound_line(event)), ch.Rewound(event.to_turn, event.last_turn)]
        elif isinstance(event, ShareChanged):
            out.append(ch.Line(share_line(event)))  # a participant's link is never sent one
        elif isinstance(event, WorkerStarted):
            out.append(ch.WorkerStarted(event.version, event.agent, state.model))
            if (lost := worker_lost(event, state.turns_started or len(state.turns))) is not None:
                out.append(ch.Line(lost))  # as the transcript keeps it, after new_worker_line
            out.append(self._outdated(event.version))
        elif isinstance(event, WorkerLeaving):
            out.append(ch.Line(leaving_line(event)))
        elif isinstance(event, UnknownEvent):
            out.append(ch.Line(unknown_line(event.type)))
        if state.state != was:
            out.append(ch.StateChanged(state.state))
        out.extend(self._question())
        return out

    def _apply_behind(self, event: Event, caught_up: list[TurnRecord]) -> list[ch.Change]:
        """An event of a turn that starts and ends within the batch: applied to the state only
        (a turn shown running that it ends is handed out ended first)."""
        state = self.session
        running = state.current.turn_id if state.current is not None else None
        state.apply(event)
        out: list[ch.Change] = []
        superseded = running is not None and (state.current is None or state.current.turn_id != running)
        if self._shown_turn is not None and superseded and (record := state.turns.get(running or "")):
            self._shown_turn = None
            out.extend([*self._question(), ch.TurnEnded(record)])
        if isinstance(event, TurnStarted):
            self._drop_sent(event)  # the outbox is shown with the turns caught up
        elif isinstance(event, TurnEnded) and (record := state.turns.get(event.turn_id)) is not None:
            caught_up.append(record)
        return out

    def _caught_up(self, caught_up: list[TurnRecord]) -> list[ch.Change]:
        """The turns `_apply_behind` ended, and what they changed, handed out once."""
        records = tuple(caught_up)
        caught_up.clear()
        state = self.session
        return [
            self._outbox.change(),
            ch.CaughtUp(records),
            self._status(),
            ch.QueueChanged(tuple(state.queue), state.queue_held),
            ch.StateChanged(state.state),
            *self._question(),
        ]

    def _status(self) -> ch.StatusChanged:
        s = self.session
        return ch.StatusChanged(
            model=s.model,
            context_used=s.context_used,
            context_limit=s.context_limit,
            children=dict(s.children),
            attached=tuple(s.attached),
            tokens=(s.tokens_in, s.tokens_out),
            activity=s.activity,
            cost=s.cost,
            working=s.state != "idle",
        )

    def _link(self, state: LinkState) -> list[ch.Change]:
        was, self.link_state = self.link_state, state
        out: list[ch.Change] = [ch.LinkChanged(state, was)]
        if isinstance(state, Live):
            self.disk_full = state.disk_full
            self._outbox.live()
        elif isinstance(state, Gone):
            self._ended = True
            current = self.session.current
            if current is not None:
                # A turn the worker will never end (it is gone) ends here, never spinning.
                record = current.record(outcome="interrupted", error=f"the worker is gone: {state.reason}")
                self._shown_turn = None
                out.extend([*self._question(), ch.TurnEnded(record)])
            out.append(ch.StateChanged("ended"))
            out.extend(self._question())
        return out

    def _after(self, out: Iterable[ch.Change]) -> None:
        """Send again what waited for the worker or for the session to be idle."""
        if isinstance(self.link_state, Gone):
            return
        events = any(not isinstance(c, (ch.LinkChanged, ch.OutboxChanged, ch.SendFailed)) for c in out)
        self._outbox.after(events, self.session.state == "idle")

    # --- the outbox --------------------------------------------------------------------------
    @property
    def outbox(self) -> list[ch.Outgoing]:
        """The prompts not taken by the worker yet, oldest first."""
        return self._outbox.items

    @property
    def busy(self) -> bool:
        """Whether a turn runs (a prompt handed in now is queued behind it); none does once the
        session is gone."""
        return self.session.current is not None and not isinstance(self.link_state, Gone)

    def submit(
        self,
        prompt: str,
        *,
        queue: bool = False,
        when_busy: Literal["queue", "wait"] = "queue",
        request_id: str | None = None,
        images: Sequence[ImageRef] = (),
    ) -> ch.Outgoing:
        """Hand the attachment a prompt: it sends it, and the worker decides now or queued.

        `when_busy` ``queue`` (the app, an editor): delivery ``auto``, the worker starts it when
        no turn runs and queues it behind the running one otherwise, in one step (two clients
        sending at once: one starts, one is queued). ``wait`` (a script): it is sent to start
        now and, answered ``409 busy``, sent again once the session is idle. `queue` queues it
        whatever runs (``/queue``, ``tui send --queue``). The link down: it waits in the outbox
        and is sent once the worker is live again, with the same request id (so at most once).

        Its `settled` says when the worker took it (`turn_id`) or refused it (`error`, also
        handed out as `SendFailed`); each change of the outbox is an `OutboxChanged`.
        """
        delivery: Delivery = "queue" if queue else "auto" if when_busy == "queue" else "now"
        return self._outbox.add(prompt, delivery, request_id, images)

    # --- commands ----------------------------------------------------------------------------
    def refusal(self, action: Permission, what: str) -> str | None:
        """Why this client may not do `action` (`what` names it), in one line; None if it may."""
        p = self.principal
        if p.may(action):
            return None
        if action == "owner":
            return f"{what} is for the session's owner; you are {p.name}, a {p.kind} here."
        return f"{what} needs a collaborator's share; you are viewing as {p.name}."

    async def command(self, line: str, surface: Surface = "tui") -> ch.Outcome:
        """Carry out a slash command of `tui.link.slash` typed on `surface`, and say what it did."""
        name, rest = parse(line)
        if find(name, surface) is None:
            return ch.Unknown(name)
        need = needs(name, rest)
        if need is not None and (why := self.refusal(need, name)) is not None:
            return ch.NotPermitted(why)
        handler = COMMANDS.get(name)
        if handler is None:
            return ch.Local(name, rest)
        return await handler(self, rest)


def _whole_turns(items: Sequence[object]) -> set[str]:
    """The turns that both start and end among `items` (events as they arrived at once)."""
    started = {i.turn_id for i in items if isinstance(i, TurnStarted)}
    return (
        {i.turn_id for i in items if isinstance(i, TurnEnded) and i.turn_id in started} if started else set()
    )
