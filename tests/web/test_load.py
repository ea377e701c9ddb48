"""Load through `tui web`: many open streams of one session neither starve its requests nor end
together, and every follower hears every event."""

from __future__ import annotations

import asyncio

import httpx
from helpers import read_sse

from .conftest import Web, wake

FOLLOWERS = 200


async def test_two_hundred_followers_through_tui_web_all_complete(web: Web) -> None:
    sid = web.session()
    wake(web, sid)
    limits = httpx.Limits(max_connections=FOLLOWERS + 20)
    headers = {"Authorization": f"Bearer {web.token}"}
    async with httpx.AsyncClient(base_url=web.url, headers=headers, timeout=60.0, limits=limits) as c:
        cursor = (await c.get(f"/api/sessions/{sid}/transcript", params={"limit": 0})).json()["cursor"]
        opened = 0
        all_open = asyncio.Event()

        async def follow() -> list[str]:
            nonlocal opened
            seen: list[str] = []
            path = f"/api/sessions/{sid}/events"
            async with c.stream("GET", path, params={"cursor": cursor}) as r:
                assert r.status_code == 200, await r.aread()
                opened += 1
                if opened == FOLLOWERS:
                    all_open.set()
                async for event in read_sse(r):
                    seen.append(event.type)
                    if event.type == "turn_ended":
                        return seen
            raise AssertionError("a stream ended before its turn did")

        async with asyncio.timeout(90):
            tasks = [asyncio.create_task(follow()) for _ in range(FOLLOWERS)]
            await all_open.wait()
            # With every stream open, a plain request still gets through at once.
            async with asyncio.timeout(10):
                sent = await c.post(f"/api/sessions/{sid}/turn", json={"prompt": "print('hi')"})
            assert sent.status_code == 202, sent.text
            results = await asyncio.gather(*tasks)
    assert len(results) == FOLLOWERS
    assert all(seen.count("turn_started") == 1 and seen[-1] == "turn_ended" for seen in results)
