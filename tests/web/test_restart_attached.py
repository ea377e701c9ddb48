"""`/note`, `/context` and `/restart` of a client attached through `tui web`: the owner's restart
goes through the web bridge's `…/restart` and the attachment follows the new worker, seeing every
event once; a collaborator may leave a note but not restart or remove a source; a viewer neither."""

from __future__ import annotations

from client.helpers import changes_until, link_became

from tui.access.remote import RemoteAccess
from tui.link import changes as ch
from tui.link.attachment import Attachment
from tui.link.base import Live
from tui.link.remote import WebClient
from tui.protocol.events import EventBase
from tui.store.remotes import Remote

from .conftest import Web, wake


def _access(web: Web, token: str) -> RemoteAccess:
    return RemoteAccess(Remote("lab", web.url, ""), web=WebClient("lab", web.url, token))


async def test_the_owner_restarts_through_the_web_bridge_and_the_attachment_follows(web: Web) -> None:
    sid = web.session()
    wake(web, sid)
    access = _access(web, web.token)
    attachment = Attachment(await access.link(sid, client_id="tui:test:1"), keep_turns=None)
    seqs: list[int] = []
    try:
        await changes_until(attachment, link_became(Live))
        assert await attachment.command("/note the build is green") == ch.Done(
            "note", "note left; the agent reads it with its next turn"
        )
        said = await changes_until(attachment, lambda c: isinstance(c, ch.Line))
        assert any(isinstance(c, ch.Line) and c.text.endswith(": the build is green") for c in said)
        listed = await attachment.command("/context")
        assert isinstance(listed, ch.ContextShown) and "`tui --remote lab context add " in listed.text
        restarted = await attachment.command("/restart")
        assert restarted == ch.Done(
            "restart", "the session runs in a new worker; its programs' variables are gone"
        )
        attachment.submit("print('after')")
        after: list[ch.Change] = []
        while True:
            step = await attachment.step(within=None)
            assert step is not None
            item, changes = step
            after += changes
            if isinstance(item, EventBase):
                seqs.append(item.seq)
            if any(isinstance(c, ch.TurnEnded) and c.record.reply == "after\n" for c in changes):
                break
        assert seqs == sorted(set(seqs)), "every event once, in order"
        lines = [c.text for c in after if isinstance(c, ch.Line)]
        assert "the worker is restarting: restarted onto tui 0.1.0; its programs' variables are gone" in lines
        assert [c.version for c in after if isinstance(c, ch.WorkerStarted)] == ["0.1.0"]
    finally:
        await attachment.close()
        await attachment.link.close()
        await access.web.close()


async def test_a_participant_is_told_in_one_line_what_it_may_not_do(web: Web) -> None:
    sid = web.session()
    wake(web, sid)
    for kind, refused, allowed in (
        ("collaborator", ("/restart", "/context remove ci"), ("/note from a collaborator", "/context")),
        ("viewer", ("/note hi", "/restart"), ("/context",)),
    ):
        access = _access(web, web.share(sid, kind, name=f"bo-{kind}"))
        attachment = Attachment(await access.link(sid, client_id="tui:test:2"))
        try:
            await changes_until(attachment, link_became(Live))
            for line in refused:
                outcome = await attachment.command(line)
                assert isinstance(outcome, ch.NotPermitted), (kind, line, outcome)
                assert "bo" in outcome.text and "\n" not in outcome.text
            for line in allowed:
                assert isinstance(await attachment.command(line), ch.Done | ch.ContextShown), (kind, line)
        finally:
            await attachment.close()
            await attachment.link.close()
            await access.web.close()
