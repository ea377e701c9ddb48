"""The live fan-out on its own: a follower that stops reading is bounded and told to catch up, and
a turn can wait until what it said was written by every follower's stream."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from helpers import TIMEOUT

from tui.protocol import Presence
from tui.protocol.state import SessionState
from tui.protocol.wording import attached_text
from tui.store import Journal, JournalLine
from tui.store.paths import SessionPaths
from tui.testing.double import WorkerLink
from tui.worker import turn as turn_module
from tui.worker.bridge import _stream
from tui.worker.hub import BEHIND, CLOSED, Hub
from tui.worker.writer import PRESENCE_EVERY, EventWriter


def _line(seq: int, size: int = 10) -> JournalLine:
    return JournalLine(seq, "text", b"x" * size)


async def test_a_follower_past_its_bound_is_emptied_and_told_to_read_the_journal() -> None:
    hub = Hub(limit=3, limit_bytes=1000)
    slow = hub.subscribe("slow")
    quick = hub.subscribe("quick")
    for seq in range(1, 4):
        hub.publish(_line(seq))
    assert [x.seq for x in await quick.next(1.0)] == [1, 2, 3]  # type: ignore[union-attr]
    for seq in range(4, 10):
        hub.publish(_line(seq))
        assert len(slow.items) <= 3, "memory stays bounded"
        assert [x.seq for x in await quick.next(1.0)] == [seq], "the reading follower is not held back"  # type: ignore[union-attr]
    assert await slow.next(1.0) is BEHIND
    assert slow.dropped == 1
    hub.publish(_line(10))
    assert [x.seq for x in await slow.next(1.0)] == [10]  # type: ignore[union-attr]


async def test_the_byte_bound_counts_too_and_idle_followers_get_none() -> None:
    hub = Hub(limit=100, limit_bytes=50)
    sub = hub.subscribe(None)
    assert await sub.next(0.01) is None
    hub.publish(_line(1, 40))
    hub.publish(_line(2, 40))
    assert await sub.next(1.0) is BEHIND


async def test_closing_ends_every_stream_and_every_later_one() -> None:
    hub = Hub()
    before = hub.subscribe("a")
    hub.close_all()
    after = hub.subscribe("b")
    assert await before.next(1.0) is CLOSED
    assert await after.next(1.0) is CLOSED
    assert hub.attached == ["a", "b"]


async def test_an_event_is_encoded_once_for_every_follower() -> None:
    hub = Hub()
    subs = [hub.subscribe(f"f{i}") for i in range(3)]
    hub.publish(_line(1))
    frames = []
    for sub in subs:
        got = await sub.next(1.0)
        assert isinstance(got, list)
        frames.append(got[0])
    assert frames[0].data == b"id: 1\nevent: text\ndata: xxxxxxxxxx\n\n"
    assert all(frame.data is frames[0].data for frame in frames), "one SSE message, shared"


async def test_written_waits_for_every_follower_to_write_what_was_published() -> None:
    hub = Hub()
    quick, slow = hub.subscribe("quick"), hub.subscribe("slow")
    hub.subscribe("presence only", events=False)  # hears no events: not waited for
    hub.publish(_line(1))
    written = asyncio.ensure_future(hub.written(TIMEOUT))
    await quick.next(1.0)
    quick.wrote(1)
    for _ in range(10):
        await asyncio.sleep(0)
    assert not written.done(), "one follower has not written it yet"
    await slow.next(1.0)
    slow.wrote(1)
    await asyncio.wait_for(written, TIMEOUT)
    # A follower that subscribed later is not waited for what came before it; one that ends, or
    # stopped reading past the timeout, is not waited for at all.
    late = hub.subscribe("late")
    await asyncio.wait_for(hub.written(TIMEOUT), TIMEOUT)
    hub.publish(_line(2))
    hub.unsubscribe(late)
    written = asyncio.ensure_future(hub.written(TIMEOUT))
    quick.wrote(2)
    slow.close()
    await asyncio.wait_for(written, TIMEOUT)
    hub.publish(_line(3))
    await asyncio.wait_for(hub.written(0.01), TIMEOUT)  # quick never writes seq 3


async def test_a_turn_hears_once_the_event_stream_has_written_its_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the worker's own event stream: `TurnIO.delivered` returns once the stream has had
    the text written (it is back for more), not when the text was only queued or taken."""
    monkeypatch.setattr(turn_module, "DELIVERY_WAIT", TIMEOUT)  # no follower is given up on here
    link = WorkerLink()
    worker = link.worker
    frames = _stream(worker, worker.writer.journal.last_seq, "follower")
    link.start_turn("hi")
    turn = await link.agent.began()
    hub = worker.writer.hub
    taken = b""
    while b"id: %d\n" % hub.published not in taken:  # the turn's start, as the journal has it
        taken += await asyncio.wait_for(anext(frames), TIMEOUT)
    live = asyncio.ensure_future(anext(frames))
    for _ in range(10):
        await asyncio.sleep(0)
    assert not live.done()  # the stream waits for live events
    turn.text("first")  # and the statuses that come with it
    delivered = asyncio.ensure_future(turn.delivered())
    taken = await asyncio.wait_for(live, TIMEOUT)
    while b"id: %d\n" % hub.published not in taken:
        taken += await asyncio.wait_for(anext(frames), TIMEOUT)  # taken, handed to the server
    assert b'"first"' in taken
    for _ in range(10):
        await asyncio.sleep(0)
    assert not delivered.done()
    more = asyncio.ensure_future(anext(frames))  # the server wrote it: the stream asks for more
    for _ in range(10):
        await asyncio.sleep(0)
    assert delivered.done()
    more.cancel()
    await asyncio.wait([more])
    await link.end_turn()
    await link.close()


def test_a_thousand_streams_of_one_person_are_one_presence_with_their_count() -> None:
    hub = Hub()
    root, ana = Presence(name="root"), Presence(name="ana", kind="viewer")
    subs = [hub.subscribe(f"page:h:{i}", root, events=False) for i in range(1000)]
    hub.subscribe("tui:h:1", root)
    hub.subscribe("tui:h:2", ana)
    people = hub.present
    assert [(p.name, p.via, p.streams) for p in people] == [
        ("root", ["browser", "terminal"], {"browser": 1000}),
        ("ana", ["terminal"], {}),
    ]
    assert attached_text(people) == "root · 1000 browsers, terminal, ana (viewer)"
    big = len(json.dumps([p.model_dump() for p in people]))
    for sub in subs[2:]:
        hub.unsubscribe(sub)
    assert len(json.dumps([p.model_dump() for p in hub.present])) == big - 3, (
        "1000 became 2: three digits fewer"
    )


class _Clock(asyncio.SelectorEventLoop):
    """An event loop whose clock moves only when the test moves it."""

    now = 1000.0

    def time(self) -> float:
        return self.now


def test_a_burst_of_streams_opening_is_told_in_two_statuses_the_last_naming_everyone(tmp_path: Path) -> None:
    async def burst(loop: _Clock) -> list[list[Presence]]:
        journal = Journal.open_for_append(tmp_path / "journal.jsonl")
        writer = EventWriter(SessionPaths(tmp_path, "s"), journal, SessionState())
        said: list[list[Presence]] = []
        writer.listeners.append(lambda event, _: said.append(list(getattr(event, "attached", []))))
        root = Presence(name="root")
        subs = []
        for i in range(300):
            subs.append(writer.hub.subscribe(f"page:h:{i}", root, events=False))
            writer.presence_changed()
            loop.now += PRESENCE_EVERY / 1000  # 300 streams within 0.075 s of the loop's clock
        await asyncio.sleep(0)
        assert len(said) == 1, "the first stream is told at once, the rest wait for the interval"
        loop.now += PRESENCE_EVERY
        for _ in range(3):
            await asyncio.sleep(0)  # the timer due on the loop's clock runs (no time passes)
        assert len(said) == 2
        # Streams closing within the next interval: one status more, the state after the last.
        for sub in subs[1:]:
            writer.hub.unsubscribe(sub)
            writer.presence_changed(sub)
        loop.now += PRESENCE_EVERY
        for _ in range(3):
            await asyncio.sleep(0)
        journal.close()
        return said

    with asyncio.Runner(loop_factory=_Clock) as runner:
        loop = runner.get_loop()
        assert isinstance(loop, _Clock)
        said = runner.run(burst(loop))
    assert [[(p.name, p.streams) for p in people] for people in said] == [
        [("root", {})],
        [("root", {"browser": 300})],
        [("root", {})],
    ]
