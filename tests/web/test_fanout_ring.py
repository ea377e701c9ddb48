"""The shared stream's ring of recent events (one piece, fed by hand): a follower reads from its
own cursor, and one the ring moved past is told it is behind (it then reads the journal)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tui.web import fanout
from tui.web.fanout import Shared


class _Upstream:
    """What the worker sends on a shared stream, in the chunks given."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.closed = False

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk

    async def aclose(self) -> None:
        self.closed = True


def _event(seq: int) -> bytes:
    return b'id: %d\nevent: text\ndata: {"seq":%d}\n\n' % (seq, seq)


async def _fed(chunks: list[bytes], cursor: int) -> Shared:
    gone: list[Shared] = []
    shared = Shared("sock", "/events", gone.append)
    shared.base = shared.last = cursor
    upstream = _Upstream(chunks)
    await shared._read(upstream)  # type: ignore[arg-type]
    assert shared.ended and upstream.closed and gone == [shared]
    return shared


async def test_a_follower_gets_what_came_after_its_cursor_in_one_chunk() -> None:
    # Events split across chunks anywhere, a keepalive between them, one sent twice.
    whole = _event(6) + b": ping\n\n" + _event(7) + _event(7) + _event(8)
    shared = await _fed([whole[:10], whole[10:40], whole[40:]], cursor=5)
    assert shared.seqs == [6, 7, 8]
    assert shared.after(5) == (_event(6) + _event(7) + _event(8), 8)
    assert shared.after(7) == (_event(8), 8)
    assert shared.after(8) is None


async def test_the_ring_keeps_the_newest_events_and_moves_its_base(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fanout, "RING", 8)
    shared = await _fed([_event(seq) for seq in range(1, 21)], cursor=0)
    assert len(shared.frames) <= 8
    assert shared.seqs == list(range(shared.base + 1, 21))
    # A follower at a cursor the ring moved past must read the journal: its cursor is below base.
    assert shared.base > 3
    chunk, last = shared.after(shared.base) or (b"", 0)
    assert last == 20 and chunk == b"".join(_event(seq) for seq in range(shared.base + 1, 21))


async def test_followers_waiting_are_woken_by_each_event() -> None:
    shared = Shared("sock", "/events", lambda s: None)
    queue: asyncio.Queue[bytes] = asyncio.Queue()

    class _Live(_Upstream):
        async def aiter_raw(self) -> AsyncIterator[bytes]:
            while True:
                yield await queue.get()

    reader = asyncio.create_task(shared._read(_Live([])))  # type: ignore[arg-type]
    try:
        changed = shared.changed
        await queue.put(_event(1))
        async with asyncio.timeout(5):
            await changed.wait()
        assert shared.after(0) == (_event(1), 1)
    finally:
        reader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reader
    assert shared.ended


def test_tui_web_considers_a_full_collection_ten_times_less_often(tmp_path: Path) -> None:
    """A full collection walks every open stream's objects and holds every follower back while
    it runs: the server `tui web` and `tui relay` run considers one after 100 collections of the
    middle generation, not Python's 10."""
    from tui.store import StatePaths
    from tui.web.bridge import WebBridge
    from tui.web.server import server_for

    before = gc.get_threshold()
    try:
        server_for(WebBridge(StatePaths(tmp_path), "digest", host="127.0.0.1", port=1, tls=False))
        assert gc.get_threshold() == (before[0], before[1], 100)
    finally:
        gc.set_threshold(*before)


class _Transport:
    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)


class _Wire:
    """A follower's connection as the shared stream sees it (`tui.web.wire.Wire`)."""

    def __init__(self, *, chunked: bool) -> None:
        self.transport = _Transport()
        self.chunked = chunked
        self.writable = True


def _share(seq: int) -> bytes:
    return b'id: %d\nevent: share_changed\ndata: {"seq":%d}\n\n' % (seq, seq)


async def test_caught_up_followers_are_written_in_one_pass_until_one_cannot_be() -> None:
    """Each held follower gets the new events framed for its connection (a participant's without
    the share lines); one whose transport is paused is let go of at the seq it was sent."""
    shared = Shared("sock", "/events", lambda s: None)
    queue: asyncio.Queue[bytes] = asyncio.Queue()

    class _Live(_Upstream):
        async def aiter_raw(self) -> AsyncIterator[bytes]:
            while True:
                yield await queue.get()

    reader = asyncio.create_task(shared._read(_Live([])))  # type: ignore[arg-type]
    wires = [_Wire(chunked=True), _Wire(chunked=False), _Wire(chunked=True)]
    followers = [
        fanout.Direct(wire, asyncio.Lock(), everything=everything, chunked=wire.chunked)  # type: ignore[arg-type]
        for wire, everything in zip(wires, (True, True, False), strict=True)
    ]
    holding = [asyncio.create_task(shared.hold(f, 0)) for f in followers]
    try:
        await asyncio.sleep(0)  # one turn of the loop: the reader and the holds start
        assert len(shared.held) == 3
        changed = shared.changed
        await queue.put(_event(1) + _share(2))
        async with asyncio.timeout(5):
            await changed.wait()
        both, mine = _event(1) + _share(2), _event(1)
        assert wires[0].transport.written == [b"%x\r\n%b\r\n" % (len(both), both)]
        assert wires[1].transport.written == [both]
        assert wires[2].transport.written == [b"%x\r\n%b\r\n" % (len(mine), mine)]
        assert [f.sent for f in followers] == [2, 2, 2]
        # The second's client reads slowly: it is let go of, at what it was sent, not written.
        wires[1].writable = False
        await queue.put(_event(3))
        async with asyncio.timeout(5):
            assert await holding[1] == 2
        assert wires[1].transport.written == [both]
        assert wires[0].transport.written[-1] == b"%x\r\n%b\r\n" % (len(_event(3)), _event(3))
        assert list(shared.held) == [followers[0], followers[2]]
    finally:
        reader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reader
    # The stream's end lets go of every follower still held.
    async with asyncio.timeout(5):
        assert await asyncio.gather(holding[0], holding[2]) == [3, 3]
