"""The live fan-out on its own: a follower that stops reading is bounded and told to catch up."""

from __future__ import annotations

from tui.store import JournalLine
from tui.worker.hub import BEHIND, CLOSED, Hub


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
