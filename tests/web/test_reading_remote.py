"""Reading a session through a real web bridge: search, a turn's whole output streamed through,
pages after a turn, and resuming a held queue, each with the permission it needs."""

from __future__ import annotations

import asyncio

import pytest

from tui.access.remote import RemoteAccess
from tui.errors import NotPermitted, UnknownTurn
from tui.link.remote import RemoteLink, WebClient
from tui.protocol import TurnEnded
from tui.store.remotes import Remote

from .conftest import TIMEOUT, Web

LINES = 50_000


async def _link(web: Web, sid: str, token: str) -> tuple[RemoteAccess, RemoteLink]:
    access = RemoteAccess(Remote("lab", web.url, ""), web=WebClient("lab", web.url, token))
    link = await access.link(sid, client_id="tui:test:1")
    assert isinstance(link, RemoteLink)
    return access, link


async def _turn(link: RemoteLink, prompt: str, rid: str) -> str:
    cursor = (await link.transcript(0)).cursor
    accepted = await link.send_turn(prompt, request_id=rid)
    async for item in link.open_stream(cursor):
        if isinstance(item, TurnEnded) and item.turn_id == accepted.turn_id:
            return item.turn_id
    raise AssertionError("the stream ended before the turn did")


async def test_a_collaborator_reads_and_a_viewer_may_not_resume(web: Web) -> None:
    sid = web.session()
    access, link = await _link(web, sid, web.share(sid, "collaborator", name="ana"))
    viewer_access, viewer = await _link(web, sid, web.share(sid, "viewer", name="bo"))
    try:
        async with asyncio.timeout(TIMEOUT * 3):
            first = await _turn(link, "print('pelican')", "r1")
            big = await _turn(link, f"for i in range({LINES}):\n    print('row', i)", "r2")
            found = await viewer.search("PELICAN")
            assert [(h.turn_id, h.where) for h in found.hits] == [(first, "prompt"), (first, "reply")]
            text = "".join([piece async for piece in viewer.turn_output(big)])
            rows = text.splitlines()
            assert len(rows) == LINES and rows[-1] == f"row {LINES - 1}"
            page = await viewer.transcript(5, after=first)
            assert [t.turn_id for t in page.turns] == [big] and not page.has_newer
            with pytest.raises(UnknownTurn, match="no turn 't-nope'"):
                [piece async for piece in viewer.turn_output("t-nope")]
            with pytest.raises(NotPermitted):
                await viewer.resume_queue()
            assert await link.resume_queue() is False
    finally:
        for a, one in ((access, link), (viewer_access, viewer)):
            await one.close()
            await a.web.close()
