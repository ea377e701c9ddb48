"""One contract, three links: the same scenarios on the test link (`WorkerLink`, the real worker
core in-process), on `LocalLink` with a real worker process on its Unix socket, and on
`RemoteLink` through a real `tui web` (uvicorn on port 0).

Each scenario drives a session the way its link's users do (the typed calls of `AttachLink`,
derived once from the route table, and one `Follower`); only what makes the agent act differs:
on real workers a turn is a Python program, on the test link the test plays the agent.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import RUNS_UNTIL_STOPPED, TIMEOUT
from web.conftest import start_web

from client.helpers import kill_worker
from tui.access.local import LocalAccess
from tui.access.remote import RemoteAccess
from tui.errors import Busy, NotFound, QuestionNotPending, UnknownTurn
from tui.link.base import AttachLink, Gone, Live, Reconnecting
from tui.link.follow import Follower
from tui.link.remote import WebClient
from tui.protocol import QuestionAsked, QuestionResolved, TextChunk, TurnEnded, TurnStarted
from tui.protocol.routes import BRIDGE
from tui.store import StatePaths
from tui.store.remotes import Remote
from tui.testing.double import WorkerLink

ASKING = "r = ask('Which?', options=['a', 'b'], freeform=False)\nprint(r)"

KINDS = ["test link", "local", "remote"]


@dataclass
class Kit:
    """A session behind one kind of link, and how its agent is made to act."""

    kind: str
    link: AttachLink
    drop: Callable[[], None]
    """Break the open stream: the test link drops it; a real worker is killed (SIGKILL)."""

    @property
    def double(self) -> WorkerLink | None:
        return self.link if isinstance(self.link, WorkerLink) else None

    async def reply_turn(self, text: str, request_id: str) -> str:
        """A turn that replies `text` and ends; its id."""
        accepted = await self.link.send_turn(f"print({text!r})", request_id=request_id)
        if self.double is not None:
            await self.double.reply(f"{text}\n")
        assert accepted.turn_id is not None
        return accepted.turn_id

    async def long_turn(self, request_id: str) -> str:
        """A turn that runs until it is interrupted; its id."""
        accepted = await self.link.send_turn(RUNS_UNTIL_STOPPED, request_id=request_id)
        assert accepted.turn_id is not None
        return accepted.turn_id

    async def asking_turn(self, request_id: str) -> str:
        """A turn that asks "Which?" (a or b), then replies the answer; its id."""
        accepted = await self.link.send_turn(ASKING, request_id=request_id)
        if self.double is not None:
            await self.double.ask("Which?", ["a", "b"], freeform=False)
        assert accepted.turn_id is not None
        return accepted.turn_id

    async def answered(self, choice: str) -> None:
        """The asking turn goes on once answered (a program prints; the test link is told to)."""
        if self.double is not None:
            await self.double.reply(f"{choice}\n")


def _killer(state_dir: Path, sid: str) -> Callable[[], None]:
    def kill() -> None:
        kill_worker(state_dir, sid)

    return kill


@pytest.fixture(params=KINDS)
async def kit(request: pytest.FixtureRequest, state_dir: Path) -> AsyncIterator[Kit]:
    kind: str = request.param
    if kind == "test link":
        link = WorkerLink(client_id="tui:test:1")
        yield Kit(kind, link, lambda: link.drop("the stream dropped"))
        await link.close()
        return
    if kind == "local":
        access = LocalAccess(StatePaths(state_dir))
        sid = await access.create(working_directory=str(state_dir))
        local = await access.link(sid, client_id="tui:test:1")
        yield Kit(kind, local, _killer(state_dir, sid))
        await local.close()
        return
    web = start_web(state_dir)
    client = WebClient("lab", web.url, web.token)
    try:
        sid = web.session()
        remote = await RemoteAccess(Remote("lab", web.url, ""), web=client).link(sid, client_id="tui:test:1")
        yield Kit(kind, remote, _killer(state_dir, sid))
        await remote.close()
    finally:
        await client.close()
        web.stop()


class Follow:
    """One follower of the kit's link, and everything it yielded."""

    def __init__(self, link: AttachLink, cursor: int) -> None:
        self.follower = Follower(link, cursor)
        self.seen: list[object] = []

    async def until(self, wanted: Callable[[object], bool], what: str) -> object:
        async with asyncio.timeout(TIMEOUT * 2):
            async for item in self.follower:
                self.seen.append(item)
                if wanted(item):
                    return item
        raise AssertionError(f"the follower ended before {what}")

    async def ended(self, turn_id: str) -> TurnEnded:
        item = await self.until(lambda e: isinstance(e, TurnEnded) and e.turn_id == turn_id, "the turn's end")
        assert isinstance(item, TurnEnded)
        return item

    async def close(self) -> None:
        await self.follower.aclose()


@pytest.fixture
async def follow(kit: Kit) -> AsyncIterator[Callable[[int], Follow]]:
    made: list[Follow] = []

    def start(cursor: int) -> Follow:
        made.append(Follow(kit.link, cursor))
        return made[-1]

    yield start
    for one in made:
        await one.close()


async def test_a_first_transcript_then_a_turn_followed_to_its_end(
    kit: Kit, follow: Callable[[int], Follow]
) -> None:
    first = await kit.link.transcript(10)
    assert first.turns == [] and first.current is None and first.state == "idle"
    events = follow(first.cursor)
    turn = await kit.reply_turn("hello", "r1")
    ended = await events.ended(turn)
    assert ended.outcome == "completed" and ended.reply == "hello\n"
    mine = [e for e in events.seen if getattr(e, "turn_id", None) == turn]
    assert isinstance(mine[0], TurnStarted) and mine[0].prompt == "print('hello')"
    assert "".join(e.text for e in mine if isinstance(e, TextChunk)) == "hello\n"
    again = await kit.link.send_turn("print('hello')", request_id="r1")  # the same request: the same turn
    assert again.turn_id == turn
    page = await kit.link.transcript(10)
    assert [(t.turn_id, t.reply, t.outcome) for t in page.turns] == [(turn, "hello\n", "completed")]
    assert page.cursor >= ended.seq and page.turns_started == 1


async def test_send_queue_unqueue_and_interrupt(kit: Kit, follow: Callable[[int], Follow]) -> None:
    events = follow((await kit.link.transcript(0)).cursor)
    turn = await kit.long_turn("r1")
    with pytest.raises(Busy, match="a turn is running"):
        await kit.link.send_turn("print(2)", request_id="r2")
    assert kit.link.verbs is not None  # the access layer that made the link: restart only when idle
    with pytest.raises(Busy, match="once it is idle"):
        await kit.link.verbs.restart(kit.link.session_id)
    queued = await kit.link.send_turn("print(3)", request_id="r3", delivery="queue")
    assert queued.turn_id is None and queued.queue_id is not None
    assert [i.queue_id for i in (await kit.link.transcript(0)).queue] == [queued.queue_id]
    await kit.link.unqueue(queued.queue_id)
    assert (await kit.link.transcript(0)).queue == []
    with pytest.raises(NotFound):
        await kit.link.unqueue(queued.queue_id)
    assert await kit.link.interrupt() is True
    assert (await events.ended(turn)).outcome == "interrupted"
    assert await kit.link.interrupt() is False
    assert (await kit.link.stats()).turns == 1


async def test_the_first_answer_wins(kit: Kit, follow: Callable[[int], Follow]) -> None:
    events = follow((await kit.link.transcript(0)).cursor)
    turn = await kit.asking_turn("r1")
    asked = await events.until(lambda e: isinstance(e, QuestionAsked), "the question")
    assert isinstance(asked, QuestionAsked) and [o.label for o in asked.options] == ["a", "b"]
    pending = (await kit.link.transcript(0)).question
    assert pending is not None and pending.question_id == asked.question_id
    await kit.link.answer(asked.question_id, ["a"])
    with pytest.raises(QuestionNotPending):
        await kit.link.answer(asked.question_id, ["b"])
    await kit.answered("a")
    ended = await events.ended(turn)
    resolved = [e for e in events.seen if isinstance(e, QuestionResolved)]
    assert [(r.how, r.selected) for r in resolved] == [("answered", ["a"])]
    assert ended.outcome == "completed" and ended.reply == "a\n"


async def test_search_a_turns_output_and_a_missing_turn(kit: Kit, follow: Callable[[int], Follow]) -> None:
    events = follow((await kit.link.transcript(0)).cursor)
    turn = await kit.reply_turn("zebra", "r1")
    await events.ended(turn)
    found = await kit.link.search("ZEBRA")
    assert [(h.turn_id, h.where) for h in found.hits] == [(turn, "prompt"), (turn, "reply")]
    assert "".join([piece async for piece in kit.link.turn_output(turn)]) == "zebra\n"
    with pytest.raises(NotFound):
        await kit.link.transcript(5, before="t-nope")
    with pytest.raises(UnknownTurn):
        [piece async for piece in kit.link.turn_output("t-nope")]
    info = await kit.link.call(BRIDGE["info"])  # a route without a typed call: through `call`
    assert info.session_id == kit.link.session_id


async def test_a_dropped_stream_resumes_with_no_gap_and_no_repeat(
    kit: Kit, follow: Callable[[int], Follow]
) -> None:
    events = follow(0)
    await events.until(lambda e: isinstance(e, Live), "the stream")
    one = await kit.reply_turn("one", "r1")
    await events.ended(one)
    kit.drop()
    back = asyncio.Event()

    async def second() -> str:
        if kit.double is None:
            await back.wait()  # a new worker, once the follower found it live (the test link's stays)
        return await kit.reply_turn("two", "r2")

    sending = asyncio.create_task(second())

    def after_the_drop(item: object) -> bool:
        if isinstance(item, Live):
            back.set()
        return isinstance(item, TurnEnded) and item.turn_id != one

    ended_two = await events.until(after_the_drop, "the second turn's end")
    two = await sending
    assert isinstance(ended_two, TurnEnded) and ended_two.turn_id == two
    seqs = [e.seq for e in events.seen if not isinstance(e, Live | Reconnecting)]  # type: ignore[attr-defined]
    assert seqs == list(range(1, len(seqs) + 1))
    ended = [e.turn_id for e in events.seen if isinstance(e, TurnEnded)]
    assert ended == [one, two]
    if kit.double is not None:
        assert kit.double.streams_opened == 2  # the same worker, a second stream from the cursor


async def test_stop_ends_the_attach(kit: Kit, follow: Callable[[int], Follow]) -> None:
    events = follow((await kit.link.transcript(0)).cursor)
    await events.until(lambda e: isinstance(e, Live), "the stream")
    assert kit.link.verbs is not None
    await kit.link.verbs.stop(kit.link.session_id)
    gone = await events.until(lambda e: isinstance(e, Gone), "the end")
    assert isinstance(gone, Gone) and gone.exit_code == 4


def test_a_link_implements_three_methods_and_the_typed_calls_come_from_the_table() -> None:
    """What a new link writes (httpx's transport: one method per concern), and a typed call's
    query checked against its route's `Param`s, so a mistyped name fails where it is written."""
    assert AttachLink.__abstractmethods__ == {"locate", "open_stream", "handle"}
    route = BRIDGE["transcript"]
    assert route.params(limit=5, before=None, after="t1") == {"limit": 5, "after": "t1"}
    with pytest.raises(TypeError, match="transcript takes no query parameter befor"):
        route.params(befor="t1")
