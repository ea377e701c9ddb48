"""The attachment against real workers: a client that only reads typed changes sees a session's
turns, interrupts, commands and a killed worker, and its outbox sends a prompt once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import wait_until

from client.helpers import changes_until, kill_worker, link_became, of
from tui.access.local import LocalAccess
from tui.link import changes as ch
from tui.link.attachment import Attachment
from tui.link.base import Gone, Live
from tui.protocol import TextChunk
from tui.store import StatePaths, is_live


def ended(changes: list[ch.Change]) -> list[Any]:
    """The turns that ended among `changes` (shown live or caught up at once)."""
    return [c.record for c in of(ch.TurnEnded, changes)] + [
        r for c in of(ch.CaughtUp, changes) for r in c.records
    ]


async def test_a_session_as_typed_changes_from_a_real_worker(state_dir: Path) -> None:
    access = LocalAccess(StatePaths(state_dir))
    sid = await access.create(working_directory=str(state_dir))
    link = await access.link(sid, client_id="tui:test:1")
    attachment = Attachment(link)
    first = await changes_until(attachment, lambda c: isinstance(c, ch.Attached))
    assert of(ch.Attached, first)[0].info.prompt_syntax == "python"

    sent = attachment.submit("print('hello')")
    changes = await changes_until(attachment, lambda c: bool(ended([c])))
    assert [r.reply for r in ended(changes)] == ["hello\n"]
    assert sent.settled and sent.turn_id == ended(changes)[0].turn_id

    attachment.submit("import time; print('started', flush=True); time.sleep(30)")
    await changes_until(attachment, lambda c: isinstance(c, ch.Output) and isinstance(c.event, TextChunk))
    assert attachment.session.state == "working"
    assert await link.interrupt()
    stopped = ended(await changes_until(attachment, lambda c: bool(ended([c]))))
    assert stopped[0].outcome == "interrupted"

    stats = await attachment.command("/stats")
    assert isinstance(stats, ch.StatsShown) and "2 turns" in stats.line
    await attachment.close()
    await link.close()


async def test_a_prompt_sent_while_the_worker_is_dead_runs_once_on_the_next_worker(state_dir: Path) -> None:
    access = LocalAccess(StatePaths(state_dir))
    sid = await access.create(working_directory=str(state_dir))
    link = await access.link(sid, client_id="tui:test:1")
    attachment = Attachment(link)
    await changes_until(attachment, link_became(Live))
    kill_worker(state_dir, sid)
    wait_until(lambda: not is_live(StatePaths(state_dir).session(sid).lock), "the killed worker's lock")
    sent = attachment.submit("print('after the kill')")
    changes = await changes_until(attachment, lambda c: bool(ended([c])))
    assert [r.reply for r in ended(changes)] == ["after the kill\n"]
    assert sent.settled and sent.error is None
    assert len(of(ch.TurnStarted, changes)) <= 1 and not attachment.outbox
    assert attachment.session.turns_started == 1  # sent once, though sent again after the restart

    assert await attachment.command("/exit") == ch.Stopped(deleted=False)
    gone = await changes_until(attachment, link_became(Gone))
    assert "the worker stopped" in of(ch.LinkChanged, gone)[-1].state.reason
    assert attachment.ended
    await attachment.close()
    await link.close()
