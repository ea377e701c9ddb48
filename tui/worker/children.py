"""A session's children: the sessions it starts (``delegate``), each a full session of its own.

The parent's worker starts a child through the access layer it is handed (a `ChildStarter`: the
process's entry hands `tui.access.local.LocalAccess` on the worker's state dir), as `tui send --new
--parent` does (its own worker, journal and record with ``parent_id``; its folder the parent's),
sends it the prompt and follows it with a `SessionWatch` until that turn ends. The parent's
journal says so: `child_started`, `child_asking` (the child's question pending, or no longer),
`child_ended` (its outcome and its tokens, which the one reducer adds to the parent's). A child
whose worker dies and does not come back ends ``failed`` with the follower's one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import math
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from tui.errors import CapReached, InvalidRequest, NotPermitted, TuiError
from tui.protocol import (
    AnswerRequest,
    Budget,
    By,
    ChildAdoptRequest,
    ChildAsking,
    ChildEnded,
    ChildStarted,
    DismissRequest,
    Note,
    Question,
)
from tui.protocol.ids import BY_PARENT, client_label, short_id
from tui.protocol.web import SessionSummary
from tui.store import SessionRecord, StatePaths, get_session, is_live, list_sessions, save_session
from tui.worker.agent import Agent
from tui.worker.writer import EventWriter

if TYPE_CHECKING:
    from tui.config import ChildrenSettings
    from tui.link.base import AttachLink
    from tui.link.watch import SessionWatch
    from tui.protocol import TurnRecord
    from tui.protocol.state import SessionState

__all__ = ["ChildFailed", "ChildResult", "ChildStarter", "Children"]

log = logging.getLogger("tui.worker.children")


class ChildFailed(TuiError):
    """A child's delegated turn did not complete (raised to the parent's program or model only)."""


@dataclass(frozen=True)
class ChildResult:
    """How a child's delegated turn ended."""

    child_id: str
    outcome: str
    reply: str = ""
    error: str | None = None


class ChildStarter(Protocol):
    """The three session commands a parent's worker needs of the access layer (`SessionAccess`'s
    `create`, `show` and `link`; `tui.access.local.LocalAccess` is one)."""

    async def create(
        self,
        *,
        working_directory: str,
        agent: str | None = None,
        model: str | None = None,
        parent_id: str | None = None,
        budget: Budget | None = None,
    ) -> str: ...

    async def show(self, session_id: str) -> SessionSummary: ...

    async def link(self, session_id: str, *, client_id: str) -> AttachLink: ...

    async def stop(self, session_id: str) -> bool: ...

    def spend_share_turn(self, session_id: str, name: str) -> None:
        """Count one turn against the share of participant `name` of `session_id` (or of the
        nearest of its parents shared with them).

        Raises:
            Refused: the share has no turn left (``too_many_turns``), or is gone.
        """
        ...


class Children:
    """Starts and follows the children of one session.

    Args:
        writer: the parent session's event writer (`child_*` events go through it).
        record: the parent session's record.
        state_root: the state dir the sessions live in.
        starter: makes the access layer on that state dir, called once at the first child (so a
            worker that never has one imports none of it).
    """

    def __init__(
        self,
        writer: EventWriter,
        record: SessionRecord,
        state_root: Path,
        starter: Callable[[StatePaths], ChildStarter],
    ) -> None:
        self.writer = writer
        self.record = record
        self.state_root = state_root
        self._starter = starter
        self._access: ChildStarter | None = None
        self._follows: dict[str, asyncio.Task[ChildResult]] = {}
        self._answering: set[asyncio.Task[None]] = set()
        self.agent: Agent | None = None
        """The parent's agent, which may answer a child's question itself (`Agent.answers_child`)."""

    @property
    def access(self) -> ChildStarter:
        """The access layer children are started and reached through (made at the first use)."""
        if self._access is None:
            self._access = self._starter(StatePaths(self.state_root))
        return self._access

    async def delegate(
        self,
        prompt: str,
        *,
        agent: str | None = None,
        model: str | None = None,
        wait: bool = True,
        turn_id: str | None = None,
        by: By | None = None,
        budget: Budget | None = None,
    ) -> str:
        """Start a child with `prompt` as its first turn, if config.toml's ``[children]`` allows it
        (its kind, its depth, the children running) and, in a participant's turn (`by`), one
        more turn of that share is left: starting it spends one.

        Returns:
            With `wait`, the child's reply once its turn completed; else the child's id at once.

        Raises:
            ChildFailed: (with `wait`) the child's turn failed or was interrupted, or its worker
                went away; the detail is the child's error.
            NotPermitted: ``[children]`` does not allow a child of that kind (one line naming the
                setting that would).
            CapReached: a limit of ``[children]`` is reached (one line naming it).
            TooManyTurns: the participant's share has no turn left.
            TuiError: the child could not be made (an agent this machine cannot run, …).
        """
        from tui.config import load_config

        limits = load_config().children
        agent = _allowed_kind(agent, model, limits)
        depth = self._depth() + 1
        if depth > limits.max_depth:
            raise CapReached(
                f"session {short_id(self.record.id)} is {depth - 1} children deep, and children may "
                f"nest {limits.max_depth} deep: config.toml's [children] max_depth = {limits.max_depth}"
            )
        access = self.access
        state = StatePaths(self.state_root)
        acting = (
            by.name
            if by is not None and by.kind == "participant"
            else _for_participant(state, self.record.id)
        )
        async with _one_start_at_a_time(state):
            await self._make_room(access, limits)
            if acting is not None:
                access.spend_share_turn(self.record.id, acting)
            child = await access.create(
                working_directory=self.record.working_directory,
                agent=agent,
                model=model,
                parent_id=self.record.id,
                budget=budget,
            )
            if acting is not None:  # its own children spend the same share's turns
                save_session(state, get_session(state, child).model_copy(update={"for_participant": acting}))
        made = (await access.show(child)) if model is None else None
        self.writer.emit(
            ChildStarted(
                child_id=child,
                prompt=prompt,
                agent=made.agent if made is not None else agent,
                model=made.model if made is not None else model,
                turn_id=turn_id,
            )
        )
        task = asyncio.create_task(self._follow(access, child, prompt=prompt))
        self._follows[child] = task
        if not wait:
            return child
        result = await asyncio.shield(task)
        if result.outcome != "completed":
            raise ChildFailed(
                f"child {short_id(child)} {result.outcome}: {result.error or 'no reason given'}",
                child_id=child,
            )
        return result.reply

    def _depth(self) -> int:
        """How many parents this session has."""
        state = StatePaths(self.state_root)
        depth, parent, seen = 0, self.record.parent_id, {self.record.id}
        while parent is not None and parent not in seen:
            seen.add(parent)
            depth += 1
            try:
                parent = get_session(state, parent).parent_id
            except TuiError:
                break
        return depth

    async def _make_room(self, access: ChildStarter, limits: ChildrenSettings) -> None:
        """Refuse a child past `limits.max_live` (this session's children running) or
        `limits.max_total` (this machine's), after stopping this session's finished children that
        sit idle to make room (their sessions stay).

        Raises:
            CapReached: naming the limit reached.
        """
        mine, total = await asyncio.to_thread(_live_children, StatePaths(self.state_root), self.record.id)
        idle = [
            child
            for child in mine
            if child not in self._follows
            and (known := self.writer.state.child_sessions.get(child)) is not None
            and known.state not in ("running", "asking")
        ]
        while idle and (len(mine) >= limits.max_live or total >= limits.max_total):
            child = idle.pop()
            with contextlib.suppress(TuiError):
                if await access.stop(child):
                    mine.remove(child)
                    total -= 1
        if len(mine) >= limits.max_live:
            raise CapReached(
                f"session {short_id(self.record.id)} has {len(mine)} children running, the most "
                f"config.toml's [children] max_live = {limits.max_live} allows; wait for one to end"
            )
        if total >= limits.max_total:
            raise CapReached(
                f"{total} child sessions run on this machine, the most config.toml's [children] "
                f"max_total = {limits.max_total} allows; wait for one to end (`tui sessions` lists them)"
            )

    async def adopt(self, request: ChildAdoptRequest, by: By | None = None) -> bool:
        """Follow a child made from outside (``tui send --new --parent``) as one it delegated
        to: `child_started` naming who made it, then `child_asking` and `child_ended` (the end
        of the turn `request.turn_id`, or the child's last turn once it is idle). Nobody waits
        for it here. False when it is followed already (nothing is said twice).

        Raises:
            NotFound: no such session.
            InvalidRequest: it is not a child of this session.
        """

        child = request.child_id
        record = get_session(StatePaths(self.state_root), child)
        if record.parent_id != self.record.id:
            raise InvalidRequest(
                f"session {short_id(child)} is not a child of session {short_id(self.record.id)} "
                f"(`tui send --new --parent {short_id(self.record.id)} PROMPT` makes one)",
                field="child_id",
            )
        known = self.writer.state.child_sessions.get(child)
        if child in self._follows or (known is not None and known.state in ("running", "asking")):
            return False
        self.writer.emit(
            ChildStarted(
                child_id=child,
                prompt=request.prompt,
                agent=record.agent,
                model=record.model,
                by=by or By(),
            )
        )
        task = asyncio.create_task(self._follow(self.access, child, prompt=None, turn_id=request.turn_id))
        self._follows[child] = task
        return True

    @property
    def following(self) -> bool:
        """Whether this worker follows a child now (which keeps it from stopping when idle)."""
        return bool(self._follows)

    def resume(self) -> None:
        """Follow again each child the journal says runs (a predecessor followed it and stopped):
        until it is idle, then `child_ended` says how its last turn ended."""
        running = [
            child
            for child in self.writer.state.child_sessions.values()
            if child.state in ("running", "asking") and child.child_id not in self._follows
        ]
        for child in running:  # the access layer is made only for a child to follow
            task = asyncio.create_task(self._follow(self.access, child.child_id, prompt=None))
            self._follows[child.child_id] = task

    async def _follow(
        self, access: ChildStarter, child: str, *, prompt: str | None, turn_id: str | None = None
    ) -> ChildResult:
        """Send `prompt` to the child (None: it was sent by a predecessor, or from outside) and
        follow it until that turn ends (None: until the child is idle; `turn_id`: the turn sent
        from outside, which may have ended already); `child_ended` says how."""
        from tui.link.watch import QuestionPolicy, SessionWatch

        result = ChildResult(child, "failed", error="the child's worker went away")
        tokens = (0, 0)
        cost = 0.0
        finished = False
        """Its delegated turn ended and it sits idle with nobody else attached: its worker is
        stopped (a finished child holds no worker; its session stays)."""
        link = None
        watch = None
        try:
            if prompt is None and turn_id is None and not (await access.show(child)).live:  # not woken up
                raise ChildFailed("its worker stopped while this session's worker was away")
            link = await access.link(child, client_id=f"parent:{short_id(self.record.id)}")
            watch = await SessionWatch.open(link)
            asked: list[Question | None] = [None]

            def on_event(_event: object) -> None:
                question = watch.question if watch is not None else None
                if question != asked[0]:
                    asked[0] = question
                    said = None if question is None else Question.model_validate(question.model_dump())
                    answering = said is not None and self.agent is not None and self.agent.answers_child(said)
                    self._say(ChildAsking(child_id=child, question=said, answering=answering))
                    if said is not None and answering:
                        task = asyncio.create_task(self._answer_itself(access, child, said))
                        self._answering.add(task)
                        task.add_done_callback(self._answering.discard)

            watch.on_event = on_event
            on_event(None)  # a question may be pending already
            # Its questions wait for whoever answers first (its clients or the parent's).
            policy = QuestionPolicy(timeout=math.inf)
            if prompt is not None:
                ended = await watch.wait_turn(await watch.send(prompt), policy)
                result = ChildResult(child, ended.outcome, ended.reply, ended.error)
            else:
                await watch.wait_idle(policy)
                last = await _ended(link, watch, turn_id)
                outcome = last.outcome if last is not None and last.outcome else "completed"
                result = ChildResult(child, outcome, last.reply if last else "", last.error if last else None)
            with contextlib.suppress(TuiError):
                stats = await link.stats()
                tokens = (stats.tokens_in, stats.tokens_out)
                cost = stats.cost
            finished = prompt is not None and _idle_with_nobody_else(watch.session)
        except asyncio.CancelledError:
            result = ChildResult(child, "interrupted", error="the parent's worker stopped following it")
            raise
        except TuiError as exc:
            result = ChildResult(child, "failed", error=exc.detail)
        except Exception as exc:  # never leave the parent waiting for a child nobody follows
            log.exception("following child %s failed", child)
            result = ChildResult(child, "failed", error=str(exc) or type(exc).__name__)
        finally:
            self._follows.pop(child, None)
            self._say(
                ChildEnded(
                    child_id=child,
                    outcome=result.outcome,  # type: ignore[arg-type]
                    error=result.error,
                    tokens_in=tokens[0],
                    tokens_out=tokens[1],
                    cost=cost,
                )
            )
            if watch is not None:
                with contextlib.suppress(Exception):
                    await watch.close()
            if link is not None:
                with contextlib.suppress(Exception):
                    await link.close()
        if finished:
            with contextlib.suppress(TuiError):
                await access.stop(child)
        return result

    async def _answer_itself(self, access: ChildStarter, child: str, question: Question) -> None:
        """Let the parent's agent answer the child's question; marked "answered by parent" in
        the child's transcript (its answer's client) and in the parent's (a note)."""
        assert self.agent is not None
        try:
            answer = await self.agent.answer_child(child, question)
        except Exception:
            log.exception("the agent's answer to child %s failed", child)
            answer = None
        if answer is None:  # the people attached answer it
            self._say(ChildAsking(child_id=child, question=question, answering=False))
            return
        by = f"{BY_PARENT}:{short_id(self.record.id)}:{os.getpid()}"
        link = await access.link(child, client_id=by)
        try:
            await link.answer(question.question_id, list(answer.selected), answer.freeform)
        except TuiError:  # answered first by someone else, or gone: nothing to add
            return
        finally:
            await link.close()
        shown = ", ".join([*answer.selected, *([answer.freeform] if answer.freeform else [])])
        self._say(Note(text=f"answered by parent: child {short_id(child)} asked {question.text!r}: {shown}"))

    async def answer(self, child: str, request: AnswerRequest | DismissRequest) -> None:
        """Answer or dismiss the child's pending question from the parent's side (first answer wins)."""
        link = await self.access.link(child, client_id=f"parent:{short_id(self.record.id)}")
        try:
            if isinstance(request, AnswerRequest):
                await link.answer(request.question_id, list(request.selected), request.freeform)
            else:
                await link.dismiss(request.question_id)
        finally:
            await link.close()

    def _say(self, event: ChildAsking | ChildEnded | Note) -> None:
        """Write a child's event unless the parent's worker is leaving (its journal is closed)."""
        if self.writer.leaving:
            return
        with contextlib.suppress(TuiError):
            self.writer.emit(event)

    async def close(self) -> None:
        """Stop following the children (they run on; the parent's journal says it stopped)."""
        for task in list(self._follows.values()):
            task.cancel()
        for task in list(self._follows.values()):
            with contextlib.suppress(BaseException):
                await task


async def _ended(link: AttachLink, watch: SessionWatch, turn_id: str | None) -> TurnRecord | None:
    """The record of the child's turn `turn_id` (None: its last turn), from what the watch saw or,
    when it ended before the watch opened, from the child's transcript."""
    seen = watch.session.turns
    if turn_id is None:
        last = next(reversed(seen.values()), None)
        if last is not None:
            return last
        page = await link.transcript(limit=1)
        return page.turns[-1] if page.turns else None
    if turn_id in seen:
        return seen[turn_id]
    with contextlib.suppress(TuiError):
        page = await link.transcript(limit=1, around=turn_id)
        return next((t for t in page.turns if t.turn_id == turn_id), None)
    return None


def _allowed_kind(agent: str | None, model: str | None, limits: ChildrenSettings) -> str:
    """The agent a delegated child runs (python unless named), if ``[children]`` allows it.

    Raises:
        NotPermitted: an ACP agent not in ``agents``, or a model child without ``models``.
    """
    from tui.config import load_config
    from tui.worker.agents import kind_of

    name = agent or ("model" if model is not None else "python")
    kind = kind_of(name, load_config())
    if kind == "model" and not limits.models:
        raise NotPermitted(
            "a delegated child may not be a model session here (it spends your model's key): "
            "allow it in config.toml with [children] models = true"
        )
    if kind == "acp" and not limits.allows_agent(name):
        raise NotPermitted(
            f"a delegated child may not run the agent {name} here (an agent has your files and your "
            f'network): allow it in config.toml with [children] agents = ["{name}"]'
        )
    return name


def _live_children(state: StatePaths, parent_id: str) -> tuple[list[str], int]:
    """The children of `parent_id` whose workers run, and how many child sessions' workers run
    on this machine."""
    mine: list[str] = []
    total = 0
    for record in list_sessions(state, include_archived=True):
        if record.parent_id is None or not is_live(state.session(record.id).lock):
            continue
        total += 1
        if record.parent_id == parent_id:
            mine.append(record.id)
    return mine, total


def _for_participant(state: StatePaths, session_id: str) -> str | None:
    """The participant whose turn started this session (as read now: it is set after the start)."""
    with contextlib.suppress(TuiError):
        return get_session(state, session_id).for_participant
    return None


@contextlib.asynccontextmanager
async def _one_start_at_a_time(state: StatePaths) -> AsyncIterator[None]:
    """Hold ``children.lock`` of the state dir: the children running are counted and one is made
    under it, by one worker of the machine at a time, so racing starts never pass a limit."""
    fd = os.open(state.root / "children.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _idle_with_nobody_else(state: SessionState) -> bool:
    """Whether a child runs no turn, holds no question or queue, and only its parent is attached."""
    parent = client_label("parent:x")
    busy = state.current is not None or state.question is not None or bool(state.queue)
    return not busy and all(p.via and set(p.via) <= {parent} for p in state.attached)
