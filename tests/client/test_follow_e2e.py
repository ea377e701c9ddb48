"""The follower against real workers: a SIGKILLed worker is restarted and no event is lost or repeated."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from helpers import TIMEOUT, stop_workers, wait_until

from client.helpers import journal_seqs, kill_worker
from tui.access.local import LocalAccess
from tui.link.base import Gone, Live, Reconnecting
from tui.link.follow import Follower
from tui.link.launch import start_worker
from tui.protocol import Event, TextChunk, TurnEnded, WorkerStarted
from tui.store import StatePaths, create_session, is_live

SLOW = "import time; print('started', flush=True); time.sleep(60)"


async def test_every_event_exactly_once_across_a_killed_worker(state_dir: Path) -> None:
    access = LocalAccess(StatePaths(state_dir))
    sid = await access.create(working_directory=str(state_dir))
    link = await access.link(sid, client_id="test")
    follower = Follower(link, 0)
    events: list[Event] = []
    states: list[object] = []

    async def until(done: type, check: object = None) -> Event:
        async with asyncio.timeout(30):
            async for item in follower:
                if isinstance(item, (Live, Reconnecting)):
                    states.append(item)
                    continue
                events.append(item)  # type: ignore[arg-type]
                if isinstance(item, done) and (check is None or check(item)):  # type: ignore[operator]
                    return item  # type: ignore[return-value]
        raise AssertionError("the follower ended")

    first = await link.send_turn(SLOW, request_id="slow")
    await until(TextChunk, lambda e: e.text.startswith("started"))
    kill_worker(state_dir, sid)
    ended = await until(TurnEnded, lambda e: e.turn_id == first.turn_id)
    assert isinstance(ended, TurnEnded) and ended.outcome == "failed"
    second = await link.send_turn("print('after')", request_id="after")
    done = await until(TurnEnded, lambda e: e.turn_id == second.turn_id)
    assert isinstance(done, TurnEnded) and done.reply == "after\n"

    seqs = [e.seq for e in events]
    assert seqs == journal_seqs(state_dir, sid)[: len(seqs)]
    assert seqs == list(range(1, len(seqs) + 1))
    assert [e.epoch for e in events if isinstance(e, WorkerStarted)] == [1, 2]
    assert any(isinstance(s, Reconnecting) for s in states)
    assert isinstance(states[-1], Live) and states[-1].epoch == 2
    await follower.aclose()
    await link.close()


async def test_a_worker_that_keeps_dying_is_given_up_after_three_restarts(state_dir: Path) -> None:
    access = LocalAccess(StatePaths(state_dir))
    sid = await access.create(working_directory=str(state_dir))
    link = await access.link(sid, client_id="test")
    follower = Follower(link, 0)
    kills = 0
    gone: Gone | None = None
    async with asyncio.timeout(60):
        async for item in follower:
            if isinstance(item, Live):
                kill_worker(state_dir, sid)
                kills += 1
            elif isinstance(item, Gone):
                gone = item
                break
    assert kills == 4
    assert gone is not None and gone.exit_code == 4
    assert "died 3 times within 60 s" in gone.reason and f"tui attach {sid[:8]}" in gone.reason
    await link.close()


async def test_send_waits_for_the_restart_of_a_worker_that_died_before_the_turn(state_dir: Path) -> None:
    """Killed before the turn is posted: the link restarts the worker and the turn is sent once."""
    from tui.link.local import LocalLink
    from tui.link.watch import SessionWatch

    state = StatePaths(state_dir)
    sid = create_session(state, working_directory=state_dir).id
    try:
        car = start_worker(state, sid, timeout=TIMEOUT)
        link = LocalLink(state, sid)
        watch = await SessionWatch.open(link)
        os.kill(car.pid, signal.SIGKILL)
        wait_until(lambda: not is_live(state.session(sid).lock), "the killed worker's lock to be free")
        async with asyncio.timeout(TIMEOUT):
            rid = await watch.send("print('after the kill')")
            result = await watch.wait_turn(rid)
        assert result.reply == "after the kill\n"
        await watch.close()
        await link.close()
    finally:
        stop_workers(state_dir, sid)


async def test_a_slow_worker_start_is_starting_not_gone(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restart that outlasts the start timeout (a long journal) leaves the session starting."""
    from tui.errors import WorkerStarting
    from tui.link import launch
    from tui.link.local import LocalLink

    state = StatePaths(state_dir)
    sid = create_session(state, working_directory=state_dir).id

    async def slow(*args: object, **kwargs: object) -> None:
        raise WorkerStarting("the worker is still starting")

    monkeypatch.setattr(launch, "start_worker_async", slow)
    link = LocalLink(state, sid)
    assert (await link.locate()).status == "starting"
    assert link._starting is not None
    await asyncio.wait({link._starting})
    assert (await link.locate()).status == "starting"
    await link.close()
