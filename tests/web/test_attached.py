"""Who is attached, end to end: the owner's TUI through a real `tui web` and worker shows a
participant attaching and leaving; the participant's link knows it is a viewer."""

from __future__ import annotations

import asyncio
import getpass

from helpers import app_until

from tui.access.remote import RemoteAccess
from tui.link.follow import Follower
from tui.link.remote import WebClient
from tui.protocol import Status
from tui.store.remotes import Remote
from tui.ui import TuiApp

from .conftest import TIMEOUT, Web


async def test_the_owners_status_row_shows_a_viewer_attaching_and_leaving(web: Web) -> None:
    sid = web.session()
    token = web.share(sid, "viewer", name="ana")
    owner = RemoteAccess(Remote("lab", web.url, ""), web=WebClient("lab", web.url, web.token))
    guest = RemoteAccess(Remote("lab", web.url, ""), web=WebClient("lab", web.url, token))
    me = getpass.getuser()
    owner_link = await owner.link(sid, client_id="tui:test:1")
    guest_link = await guest.link(sid, client_id="tui:test:2")
    follower = Follower(guest_link)
    app = TuiApp(owner_link, gone_exit_after=None)
    try:
        principal = await guest_link.whoami()
        assert (principal.kind, principal.name) == ("viewer", "ana")
        assert not principal.may("write")
        assert (await owner_link.whoami()).kind == "owner"
        async with app.run_test() as pilot:
            row = app.session.status.link_row
            await app_until(pilot, lambda: f"attached: {me}" in row(), timeout=TIMEOUT)
            assert "ana" not in row()

            async def follow() -> None:
                async for item in follower:
                    if isinstance(item, Status) and any(p.name == "ana" for p in item.attached):
                        return

            async with asyncio.timeout(TIMEOUT):
                await follow()
            await app_until(pilot, lambda: f"attached: {me}, ana (viewer)" in row(), timeout=TIMEOUT)
            await follower.aclose()
            await guest_link.close()
            await app_until(pilot, lambda: "ana" not in row(), timeout=TIMEOUT)
            assert f"attached: {me}" in row()
    finally:
        await follower.aclose()
        await guest_link.close()
        await owner.web.close()
        await guest.web.close()
