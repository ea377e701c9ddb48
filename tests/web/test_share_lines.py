"""A share made or revoked is said to the owner and to no participant (docs/remote.md, "Participants"):
through a real `tui web`, the owner's event stream, page, transcript and export say it; a
viewer's say nothing of it (nor of any other participant)."""

from __future__ import annotations

import asyncio

import httpx
from helpers import TIMEOUT, read_sse

from .conftest import Web, wake

MARK = "after the shares"


async def _events(client: httpx.AsyncClient, path: str, opened: asyncio.Event) -> list[str]:
    """The types of the events of `path` from the start up to the note `MARK`."""
    seen: list[str] = []
    async with client.stream("GET", f"{path}/events", params={"cursor": 0}) as r:
        assert r.status_code == 200, await r.aread()
        async for event in read_sse(r):
            seen.append(event.type)
            opened.set()
            if event.type == "note" and event.data["text"] == MARK:
                return seen
    raise AssertionError(f"the stream ended first: {seen}")


async def _page(client: httpx.AsyncClient, path: str, opened: asyncio.Event) -> str:
    """Every change the page of `path` is sent, as one text, up to the line of the note `MARK`."""
    said: list[str] = []
    async with client.stream("GET", f"{path}/changes") as r:
        assert r.status_code == 200, await r.aread()
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                said.append(line[6:])
                opened.set()
                if MARK in line:
                    return "\n".join(said)
    raise AssertionError(f"the page's stream ended first: {said}")


async def test_a_share_is_said_to_the_owner_and_to_no_participant(web: Web) -> None:
    sid = web.session()
    wake(web, sid)
    path = f"/api/sessions/{sid}"
    viewer_token = web.share(sid, "viewer", name="vic")

    def client(token: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=web.url, headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT
        )

    async with client(web.token) as owner, client(viewer_token) as viewer:
        # Each follows the session before the shares are made: they come on the live streams.
        opened = [asyncio.Event() for _ in range(4)]
        reading = asyncio.gather(
            _events(owner, path, opened[0]),
            _events(viewer, path, opened[1]),
            _page(owner, path, opened[2]),
            _page(viewer, path, opened[3]),
        )
        async with asyncio.timeout(TIMEOUT):
            await asyncio.wait([asyncio.ensure_future(o.wait()) for o in opened])
        made = await owner.post(
            f"{path}/participants", json={"name": "ana", "kind": "collaborator", "turns": 3}
        )
        assert made.status_code == 201, made.text
        gone = await owner.delete(f"{path}/participants", params={"participant": "ana"})
        assert [p["name"] for p in gone.json()["revoked"]] == ["ana"]
        assert (await owner.post(f"{path}/notes", json={"text": MARK})).status_code == 200
        async with asyncio.timeout(TIMEOUT):
            owner_events, viewer_events, owner_page, viewer_page = await reading

        assert owner_events.count("share_changed") == 2, owner_events
        assert "share_changed" not in viewer_events and "note" in viewer_events, viewer_events
        made_line = "shared with ana as collaborator (3 turns) by "
        assert made_line in owner_page and "share of ana revoked by " in owner_page, owner_page
        assert "shared with" not in viewer_page and "share of" not in viewer_page, viewer_page
        assert MARK in viewer_page

        # What each reads afterwards: the transcript (a page joining now), the export.
        owner_notes = (await owner.get(f"{path}/transcript")).json()["notes"]
        viewer_notes = (await viewer.get(f"{path}/transcript")).json()["notes"]
        assert any(n.startswith(made_line) for n in owner_notes), owner_notes
        assert not any("ana" in n for n in viewer_notes) and any(MARK in n for n in viewer_notes), (
            viewer_notes
        )
        for fmt in ("text", "jsonl"):
            mine = (await owner.get(f"{path}/export", params={"format": fmt})).text
            theirs = (await viewer.get(f"{path}/export", params={"format": fmt})).text
            assert "ana" in mine and MARK in mine, mine
            assert "ana" not in theirs and MARK in theirs, theirs
