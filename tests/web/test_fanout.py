"""Many followers of one session through a real `tui web`: one stream from the worker, shared;
every follower gets every event once and in order, a late one replays from its cursor, a
revoked one is cut, and the worker still counts each follower as attached."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import Sse, eventually, read_sse

from tui.protocol import Presence
from tui.protocol.wording import attached_text
from tui.web.participants import ParticipantStore
from tui.web.paths import WebPaths

from .conftest import TIMEOUT, Web, start_web, wake

FOLLOWERS = 50


def _client(web: Web, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=web.url,
        headers={"Authorization": f"Bearer {token}"},
        timeout=TIMEOUT,
        limits=httpx.Limits(max_connections=FOLLOWERS + 10),
    )


async def _stats(c: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    reply = await c.get(f"/api/sessions/{sid}/stats")
    assert reply.status_code == 200, reply.text
    stats: dict[str, Any] = reply.json()
    return stats


async def _until_ended(events: AsyncIterator[Sse], turns: int = 1) -> list[Sse]:
    seen: list[Sse] = []
    async with asyncio.timeout(TIMEOUT):
        async for event in events:
            seen.append(event)
            if event.type == "turn_ended":
                turns -= 1
                if turns == 0:
                    return seen
    raise AssertionError(f"the stream ended before turn_ended: {[e.type for e in seen]}")


async def test_fifty_followers_share_one_worker_stream_and_each_gets_every_event_once(web: Web) -> None:
    sid = web.session()
    wake(web, sid)
    viewer = web.share(sid, "viewer", name="ana")
    async with contextlib.AsyncExitStack() as stack:
        c = await stack.enter_async_context(_client(web, web.token))
        guest = await stack.enter_async_context(_client(web, viewer))
        cursor = (await c.get(f"/api/sessions/{sid}/transcript", params={"limit": 0})).json()["cursor"]
        path = f"/api/sessions/{sid}/events"
        followers = []
        for i in range(FOLLOWERS):
            params = {"cursor": cursor, "client_id": f"script:test:{i}"}
            response = await stack.enter_async_context(c.stream("GET", path, params=params))
            assert response.status_code == 200
            followers.append(read_sse(response))
        watched = await stack.enter_async_context(
            guest.stream("GET", path, params={"cursor": cursor, "client_id": "script:test:ana"})
        )
        assert watched.status_code == 200
        ana = read_sse(watched)

        # The worker counts every follower as attached, and sends events on one stream.
        async def all_attached() -> bool:
            stats = await _stats(c, sid)
            return len(stats["attached"]) == FOLLOWERS + 1 and stats["streams"] == 1

        await eventually(all_attached, "every follower attached, one stream from the worker")

        turn = await c.post(f"/api/sessions/{sid}/turn", json={"prompt": "for i in range(20): print(i)"})
        assert turn.status_code == 202, turn.text
        seen = await asyncio.gather(*(_until_ended(f) for f in [*followers, ana]))
        first = [(e.seq, e.type) for e in seen[0]]
        assert [e.seq for e in seen[0]] == list(range(cursor + 1, cursor + 1 + len(first)))
        assert any(e.type == "text" for e in seen[0])
        assert all([(e.seq, e.type) for e in got] == first for got in seen)
        assert (await _stats(c, sid))["streams"] == 1

        # Its status says each person once, with how many streams: its size does not grow with them.
        attached = [e for e in seen[0] if e.type == "status"][-1].data["attached"]
        assert attached == [
            {"name": "root", "kind": "owner", "via": ["script"], "streams": {"script": FOLLOWERS}},
            {"name": "ana", "kind": "viewer", "via": ["script"], "streams": {}},
        ]
        people = [Presence.model_validate(p) for p in attached]
        assert attached_text(people) == f"root · {FOLLOWERS} scripts, ana (viewer) · script"

        # A follower that comes late from far back replays from its cursor, then joins the rest.
        late = await stack.enter_async_context(
            c.stream("GET", path, params={"cursor": 0, "client_id": "script:test:late"})
        )
        assert late.status_code == 200
        behind = read_sse(late)
        caught_up = await _until_ended(behind)
        assert [e.seq for e in caught_up] == list(range(1, first[-1][0] + 1))

        # A revoked participant's stream is cut; the others go on and the worker stops counting it.
        ParticipantStore(WebPaths.of(web.state)).revoke(sid, "ana")
        async with asyncio.timeout(TIMEOUT):  # the stream ends (a hang guard, not a speed bound)
            async for _ in ana:
                pass

        async def ana_gone() -> bool:
            stats = await _stats(c, sid)
            return "script:test:ana" not in stats["attached"] and stats["streams"] == 1

        await eventually(ana_gone, "the revoked follower no longer attached")

        turn = await c.post(f"/api/sessions/{sid}/turn", json={"prompt": "print('again')"})
        assert turn.status_code == 202, turn.text
        again = await asyncio.gather(*(_until_ended(f) for f in [*followers, behind]))
        after = [(e.seq, e.type) for e in again[0]]
        assert after[0][0] == first[-1][0] + 1
        assert [e.seq for e in again[0]] == list(range(after[0][0], after[-1][0] + 1))
        assert all([(e.seq, e.type) for e in got] == after for got in again)
        assert any(e.type == "text" and e.data.get("text") == "again\n" for e in again[-1])


@pytest.fixture
def small_disk_web() -> Iterator[Web]:
    """A `tui web` whose state dir is a 4 MiB tmpfs (root only): a real disk that fills."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    with tempfile.TemporaryDirectory(prefix="tui-disk-", dir="/tmp") as d:
        made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", d], capture_output=True)
        if made.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
        try:
            web = start_web(Path(d))
            try:
                yield web
            finally:
                web.stop()
        finally:
            subprocess.run(["umount", "-l", d], check=False)


async def test_a_follower_through_tui_web_hears_the_workers_disk_full_and_ok(small_disk_web: Web) -> None:
    """The worker's ``: disk_full`` and ``: disk_ok`` reach each follower of the shared stream."""
    web = small_disk_web
    sid = web.session()
    wake(web, sid)
    async with _client(web, web.token) as c:
        path = f"/api/sessions/{sid}/events"
        async with asyncio.timeout(TIMEOUT), c.stream("GET", path) as stream:
            assert stream.status_code == 200
            lines = stream.aiter_lines()
            filler = web.state / "filler"
            with contextlib.suppress(OSError), filler.open("wb") as f:
                while True:
                    f.write(b"x" * 4096)
                    f.flush()
            refused = await c.post(f"/api/sessions/{sid}/turn", json={"prompt": "p" * 50_000})
            assert refused.status_code == 507, refused.text
            async for line in lines:
                if line.startswith(": disk_full"):
                    break
            assert "could not append to the journal" in line
            filler.unlink()
            # The next write that succeeds says space is back.
            accepted = await c.post(f"/api/sessions/{sid}/turn", json={"prompt": "print(1)"})
            assert accepted.status_code == 202, accepted.text
            async for line in lines:
                if line.startswith(": disk_ok"):
                    break
            else:
                raise AssertionError("the stream ended before : disk_ok")
