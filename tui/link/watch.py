"""Waiting on a session without a UI: the code `tui send --wait` and the piped surface share.

`SessionWatch` keeps a session's state (idle/working/asking, the pending question, which turn
each request started, how each turn ended: a `SessionState`, the one reducer of
`tui.protocol.state`) current from one `tui.link.attachment.Attachment`, which reads the stream
in a task so that waiting can time out or be interrupted without breaking the stream. `wait_idle` and
`run_turn` wait on it; questions are answered by a `QuestionPolicy` or end the wait with
`Unanswered` (exit 3), a worker that went away for good with `WorkerGoneError` (exit 4 or 6).
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import shlex
import time
import uuid
from collections import ChainMap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tui.errors import (
    Conflict,
    DiskFull,
    InvalidRequest,
    Refused,
    TuiError,
    WorkerGone,
)
from tui.link.attachment import Attachment
from tui.link.base import AttachLink, Gone, LinkState, Live, Reconnecting
from tui.link.changes import Outgoing
from tui.link.follow import Follower
from tui.protocol import (
    Event,
    ImageRef,
    PendingQuestion,
    QueueItem,
    StopReason,
    Transcript,
    TurnRecord,
    TurnStarted,
)
from tui.protocol.ids import short_id
from tui.protocol.state import SessionState, State

__all__ = [
    "AnswerSpec",
    "QuestionPolicy",
    "SessionWatch",
    "TurnResult",
    "Unanswered",
    "WorkerGoneError",
    "describe_question",
    "resolve_answer",
]

AnswerSpec = str | int | list[str | int]
"""An answer as a script gives it: an option's label or number (1-based), free text, or a list."""


class Unanswered(TuiError):
    """A question is waiting for an answer nobody here can give."""

    code = "unanswered"
    exit_code = 3

    def __init__(self, detail: str, question: PendingQuestion) -> None:
        super().__init__(detail)
        self.question = question


class WorkerGoneError(WorkerGone):
    """The session's worker went away and did not come back (exit 4)."""

    def __init__(self, gone: Gone) -> None:
        super().__init__(gone.reason)
        self.gone = gone


class AccessEnded(WorkerGoneError):
    """The session's machine refused this client for good (a revoked or expired share): exit 6."""

    exit_code = 6


def gone_error(gone: Gone) -> WorkerGoneError:
    """The error that ends a wait when the follower says the session is gone."""
    return AccessEnded(gone) if gone.exit_code == Refused.exit_code else WorkerGoneError(gone)


@dataclass(frozen=True)
class TurnResult:
    """How one turn ended."""

    turn_id: str
    outcome: Literal["completed", "failed", "interrupted"]
    reply: str
    error: str | None = None
    number: int = 0
    """The turn's number in the session (``#N``; 0 when the worker did not say)."""
    held: bool = False
    """It never started: it waits in a queue held after an interrupt (`turn_id` is empty)."""
    stop_reason: StopReason | None = None
    """Why its agent stopped, when it said (`TurnEnded.stop_reason`)."""


def resolve_answer(question: PendingQuestion, spec: AnswerSpec) -> tuple[list[str], str | None]:
    """Turn a script's answer into option labels and free text for `question`.

    A number (or a string of digits) within the options picks that option (1-based); a string
    equal to an option's label (ignoring case) picks it; anything else is free text when the
    question takes it.

    Raises:
        InvalidRequest: the answer fits none of the options and free text is not allowed.
    """
    items = spec if isinstance(spec, list) else [spec]
    labels = [o.label for o in question.options]
    selected: list[str] = []
    free: list[str] = []
    for item in items:
        text = str(item).strip()
        if (isinstance(item, int) or text.isdigit()) and 1 <= int(text) <= len(labels):
            selected.append(labels[int(text) - 1])
            continue
        match = next((label for label in labels if label.casefold() == text.casefold()), None)
        if match is not None:
            selected.append(match)
        elif question.freeform:
            free.append(str(item))
        else:
            offered = ", ".join(f"{i}. {label}" for i, label in enumerate(labels, 1))
            raise InvalidRequest(f"{text!r} is not one of the options of {question.text!r} ({offered})")
    if len(selected) > 1 and not question.multiple:
        raise InvalidRequest(f"{question.text!r} takes one option, not {len(selected)}")
    return selected, ("\n".join(free) if free else None)


def describe_question(link: AttachLink, question: PendingQuestion) -> str:
    """The question, its options numbered, and the exact commands that answer it (for stderr).

    A viewer (`link.principal`, as `AttachLink.whoami` last said) is told who can answer instead.
    """
    short = short_id(link.session_id)
    lines = [f"session {short} asks: {question.text}"]
    width = max((len(o.label) for o in question.options), default=0)
    viewer = not link.principal.may("write", link.session_id)
    for i, option in enumerate(question.options, 1):
        about = f" - {option.description}" if option.description else ""
        command = "" if viewer else "   " + link.command("answer", short, "--option", str(i))
        lines.append(f"  {i}. {(option.label + about).ljust(width)}{command}".rstrip())
    if viewer:
        lines.append(
            "a viewer cannot answer or dismiss it: the session's owner or a collaborator does; "
            f"`{link.command('attach', short)}` follows the session meanwhile"
        )
        return "\n".join(lines)
    if question.options and question.multiple:
        lines.append("several options: repeat --option, e.g. --option 1 --option 2")
    if question.freeform:
        lines.append("free text:  " + link.command("answer", short, "--text", shlex.quote("your answer")))
    lines.append(f"dismiss with: {link.command('dismiss', short)}")
    return "\n".join(lines)


@dataclass
class QuestionPolicy:
    """How questions are answered without a person.

    Attributes:
        answers: a list (the n-th question gets the n-th answer) or a map from question text to
            answer; None for no prepared answers.
        timeout: seconds to wait for someone else (another client) to answer; None: do not wait.
        default: the answer given once `timeout` passed; None: give up (exit 3).
    """

    answers: list[AnswerSpec] | dict[str, AnswerSpec] | None = None
    timeout: float | None = None
    default: str | None = None
    asked: int = 0
    source: str = "the --answers file"
    """Where `answers` came from, as the user named it."""

    def prepared(self, question: PendingQuestion) -> AnswerSpec | None:
        """The prepared answer for the next question asked, if any: a map's key equal to the
        question's text, else the first key that matches it as a glob (``Proceed*``)."""
        self.asked += 1
        if isinstance(self.answers, list):
            return self.answers[self.asked - 1] if self.asked <= len(self.answers) else None
        if isinstance(self.answers, dict):
            if question.text in self.answers:
                return self.answers[question.text]
            for key, answer in self.answers.items():
                if fnmatch.fnmatchcase(question.text, key):
                    return answer
        return None

    def missing(self, question: PendingQuestion) -> str | None:
        """Why the answers file did not answer `question`, and how to make it; None without a file."""
        if self.answers is None:
            return None
        if isinstance(self.answers, list):
            have = f"holds {len(self.answers)} answer{'s' * (len(self.answers) != 1)}"
            return (
                f"{self.source} {have} and this is question {self.asked}: add an answer to its list "
                "(an option's number or label, or free text), or give --default-answer A"
            )
        return (
            f"{self.source} has no key matching {question.text!r}: add {json.dumps(question.text)} "
            'with an option\'s number or label, or free text (a glob such as "Proceed*" matches too), '
            "or give --default-answer A"
        )


@dataclass
class SessionWatch:
    """A session's state, kept current from one `Attachment` (the one every client uses).

    Args:
        link: the session.
        transcript: where to start (its cursor, state, question, queue, current turn).
        on_event: called with each event as it is applied.
        on_state: called with each `LinkState` change.
    """

    link: AttachLink
    transcript: Transcript
    on_event: Callable[[Event], None] | None = None
    on_state: Callable[[LinkState], None] | None = None
    gone: Gone | None = None
    own_requests: set[str] = field(default_factory=set)
    own_turns: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.attachment = Attachment(self.link, self.transcript, keep_turns=None)
        """What follows the session and applies its events: every ended turn is kept, for
        `wait_turn`."""
        self._accepted: dict[str, str] = {}
        """The turn each of this client's requests started, as the worker answered it."""

    @classmethod
    async def open(cls, link: AttachLink, **kwargs: Any) -> SessionWatch:
        """Read the session's state now and start following it from there."""
        return cls(link, await link.transcript(limit=0), **kwargs)

    @property
    def session(self) -> SessionState:
        """The session's state (the one reducer's)."""
        return self.attachment.session

    @property
    def follower(self) -> Follower:
        assert self.attachment.follower is not None
        return self.attachment.follower

    @property
    def disk_full(self) -> str:
        """The worker's sentence while its disk is full (`Live.disk_full`)."""
        return self.attachment.disk_full

    @property
    def cursor(self) -> int:
        return self.follower.cursor

    @property
    def state(self) -> State:
        return self.session.state

    @property
    def question(self) -> PendingQuestion | None:
        return self.session.question

    @property
    def queue(self) -> list[QueueItem]:
        return self.session.queue

    @property
    def by_request(self) -> Mapping[str, str]:
        """The turn each request id started."""
        return ChainMap(self.session.started, self._accepted)

    @property
    def ended(self) -> Mapping[str, TurnRecord]:
        """Every turn that ended while this watch followed, by id."""
        return self.session.turns

    def _apply(self, item: Event | LinkState) -> None:
        if isinstance(item, (Live, Reconnecting, Gone)):
            if isinstance(item, Gone):
                self.gone = item
            if self.on_state is not None:
                self.on_state(item)
            return
        if isinstance(item, TurnStarted) and item.request_id in self.own_requests:
            self.own_turns.add(item.turn_id)
        if self.on_event is not None:
            self.on_event(item)

    async def step(self, within: float | None = None) -> Event | LinkState | None:
        """Apply the next event or link change; None when `within` seconds passed first (or
        only the prompts on their way changed).

        Raises:
            WorkerGoneError: the worker went away for good.
        """
        if self.gone is not None:
            raise gone_error(self.gone)
        stepped = await self.attachment.step(within)
        item = stepped[0] if stepped is not None else None
        if item is None:
            return None
        self._apply(item)
        if isinstance(item, Gone):
            raise gone_error(item)
        return item

    async def close(self) -> None:
        """Stop following."""
        await self.attachment.close()

    # --- waiting ---------------------------------------------------------------------------------
    async def _handle_question(self, policy: QuestionPolicy | None, handled: dict[str, float]) -> None:
        """Answer the pending question, start waiting for someone else to, or give up."""
        q = self.question
        if q is None:
            return
        if q.question_id not in handled:
            spec = policy.prepared(q) if policy is not None else None
            if spec is not None:
                selected, free = resolve_answer(q, spec)
                handled[q.question_id] = float("inf")
                await self._answer(q, selected, free)
                return
            if policy is None or policy.timeout is None:
                raise await self._unanswered(q, policy)
            handled[q.question_id] = time.monotonic() + policy.timeout
        deadline = handled[q.question_id]
        if time.monotonic() >= deadline:
            assert policy is not None
            if policy.default is None:
                raise await self._unanswered(q, policy)
            handled[q.question_id] = float("inf")
            selected, free = resolve_answer(q, policy.default)
            await self._answer(q, selected, free)

    async def _unanswered(self, q: PendingQuestion, policy: QuestionPolicy | None) -> Unanswered:
        with contextlib.suppress(TuiError):
            await self.link.whoami()  # a viewer is told who can answer instead
        why = policy.missing(q) if policy is not None else None
        return Unanswered(describe_question(self.link, q) + (f"\n{why}" if why else ""), q)

    async def _answer(self, q: PendingQuestion, selected: list[str], free: str | None) -> None:
        # Conflict: someone else answered first; the resolution is on its way.
        with contextlib.suppress(Conflict):
            await self.link.answer(q.question_id, selected, free)

    def _question_wait(self, handled: dict[str, float]) -> float | None:
        q = self.question
        if q is None or q.question_id not in handled:
            return None
        return max(0.0, handled[q.question_id] - time.monotonic()) if handled[q.question_id] < 1e300 else None

    async def wait_idle(self, policy: QuestionPolicy | None = None) -> None:
        """Wait until no turn runs and no question is pending."""
        handled: dict[str, float] = {}
        while self.session.state != "idle":
            await self._handle_question(policy, handled)
            await self.step(self._question_wait(handled))

    def submit(
        self,
        prompt: str,
        *,
        queue: bool = False,
        when_busy: Literal["queue", "wait"] = "wait",
        request_id: str | None = None,
        images: Sequence[ImageRef] = (),
    ) -> Outgoing:
        """Hand a prompt of this client's to the attachment, which sends it (`Attachment.submit`:
        now, queued, or once the session is idle), without waiting: the client that steps the
        watch sees it settle."""
        rid = request_id or uuid.uuid4().hex
        self.own_requests.add(rid)
        return self.attachment.submit(prompt, queue=queue, when_busy=when_busy, request_id=rid, images=images)

    async def send(self, prompt: str, *, queue: bool = False, request_id: str | None = None) -> str:
        """Send a turn (waiting for idle again if another client's turn started first); its request id.

        A worker that is gone or starting when the turn is sent is waited for, as a follower
        waits (the link restarts a dead one); the request id keeps a retried turn to one.

        Raises:
            WorkerGoneError: no worker came back within the link's ``no_worker_timeout``.
            TuiError: the worker refused the turn.
        """
        # The attachment's outbox sends it, again with the same request id once a worker is
        # live (the link restarts a dead one; the follower's retries say when one is back).
        item = self.submit(prompt, queue=queue, request_id=request_id)
        rid = item.request_id
        while not item.settled:
            if item.waiting == "idle" and self.session.state != "idle":
                await self.wait_idle()  # sent again once the session is idle
            else:
                await self.step()
        if item.error is not None:
            raise item.error
        if item.turn_id:
            self._accepted[rid] = item.turn_id
            self.own_turns.add(item.turn_id)
        return rid

    async def _follow_a_stopping_worker(self) -> None:
        """A turn ended interrupted: when its worker is stopping (``tui stop``, an idle timeout),
        the session is what ended, not only the turn: follow it until it is gone.

        Raises:
            WorkerGoneError: it was stopped (exit 4), unless a new worker came up meanwhile.
        """
        if (await self.link.locate()).status == "live":
            return
        while not isinstance(await self.step(), Live):
            pass

    async def wait_turn(self, request_id: str, policy: QuestionPolicy | None = None) -> TurnResult:
        """Wait for the turn `request_id` started to end, answering its questions by `policy`."""
        handled: dict[str, float] = {}
        while True:
            turn_id = self.by_request.get(request_id)
            ended = self.session.turns.get(turn_id) if turn_id is not None else None
            if turn_id is not None and ended is not None:
                if ended.outcome == "interrupted":
                    await self._follow_a_stopping_worker()
                return TurnResult(
                    turn_id,
                    ended.outcome or "failed",
                    ended.reply,
                    ended.error,
                    ended.number,
                    stop_reason=ended.stop_reason,
                )
            if self.disk_full:
                # Nothing the turn does now reaches the journal, so nothing reaches this wait:
                # say so and end, rather than wait for space no one may free (the worker goes
                # on by itself once there is some).
                raise DiskFull(self.disk_full)
            if self.session.queue_held and any(i.request_id == request_id for i in self.session.queue):
                # It would wait until someone resumes the queue: say so rather than wait for ever.
                return TurnResult("", "interrupted", "", "the queue is held after an interrupt", held=True)
            if self.question is not None and (turn_id is None or self.question.turn_id == turn_id):
                await self._handle_question(policy, handled)
            await self.step(self._question_wait(handled))
