"""The attachment against `WorkerLink` (a real worker core in this process): what it hands out
for each thing a session does.

The same attachment runs against real workers in test_attachment_e2e.py.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from helpers import TIMEOUT, eventually

from client.helpers import changes_until, link_became, of
from tui.errors import WorkerUnavailable
from tui.link import changes as ch
from tui.link.attachment import Attachment
from tui.link.base import Gone, Live, Located, Reconnecting
from tui.link.slash import format_context
from tui.protocol import TextChunk, Transcript
from tui.protocol.messages import ContextEntry, ContextList
from tui.protocol.principal import Principal
from tui.testing.double import WorkerLink


async def attached(link: WorkerLink) -> Attachment:
    attachment = Attachment(link)
    await changes_until(attachment, link_became(Live))
    return attachment


async def test_a_turn_comes_as_typed_changes_in_order() -> None:
    link = WorkerLink()
    attachment = Attachment(link)
    first = await changes_until(attachment, lambda c: isinstance(c, ch.Attached))
    assert of(ch.Attached, first)[0].info is not None
    turn = link.start_turn("print(1)")
    started = await changes_until(attachment, lambda c: isinstance(c, ch.TurnStarted))
    assert of(ch.TurnStarted, started)[0].record.turn_id == turn
    assert ch.StateChanged("working") in started
    link.emit(TextChunk(turn_id=turn, text="1\n"))
    said = await changes_until(attachment, lambda c: isinstance(c, ch.Output))
    assert [c.event.text for c in of(ch.Output, said)] == ["1\n"]
    await link.end_turn()
    ended = await changes_until(attachment, lambda c: isinstance(c, ch.TurnEnded))
    record = of(ch.TurnEnded, ended)[0].record
    assert (record.turn_id, record.outcome, record.reply) == (turn, "completed", "1\n")
    assert attachment.session.state == "idle"
    await attachment.close()


async def test_turns_that_start_and_end_in_one_batch_come_caught_up_once() -> None:
    link = WorkerLink()
    attachment = await attached(link)
    for n in range(3):
        link.start_turn(f"print({n})")
        await link.reply(f"{n}\n")
    # Taken at once: everything the worker wrote reached the attachment before it is applied.
    follower = attachment.follower
    assert follower is not None
    await eventually(lambda: follower.cursor == link.last_seq, "the last turn read")
    batch = await changes_until(attachment, lambda c: isinstance(c, ch.CaughtUp))
    caught = of(ch.CaughtUp, batch)
    assert [r.reply for c in caught for r in c.records] == ["0\n", "1\n", "2\n"]
    assert not of(ch.TurnStarted, batch) and not of(ch.Output, batch)
    await attachment.close()


async def test_a_prompt_typed_while_the_worker_is_away_is_sent_once_when_it_is_back() -> None:
    link = WorkerLink()
    link.no_worker_timeout = 600.0
    attachment = await attached(link)
    link.located = Located("starting")
    link.drop("the worker restarted")
    await changes_until(attachment, link_became(Reconnecting))
    sent = attachment.submit("print(2)")
    waiting = await changes_until(attachment, lambda c: isinstance(c, ch.OutboxChanged) and c.waiting)
    assert [o.prompt for o in of(ch.OutboxChanged, waiting)[-1].items] == ["print(2)"]
    link.located = Located("live")
    attachment.retry_now()
    started = await changes_until(attachment, lambda c: isinstance(c, ch.TurnStarted))
    assert of(ch.TurnStarted, started)[0].own
    assert sent.settled and sent.turn_id == of(ch.TurnStarted, started)[0].record.turn_id
    assert len({r.body["request_id"] for r in link.requests if r.route == "turn"}) == 1
    assert sum(1 for e in link.journal if e.type == "turn_started") == 1
    assert not attachment.outbox
    await attachment.close()


async def test_the_worker_queues_a_prompt_sent_while_a_turn_runs_and_a_script_waits_for_idle() -> None:
    link = WorkerLink()
    app, script = await attached(link), await attached(link)
    running = link.start_turn("slow()")  # the attachments may not have seen it start: no matter
    queued = app.submit("print('app')")
    waiting = script.submit("print('script')", when_busy="wait")
    await eventually(lambda: queued.settled, "the app's prompt queued by the worker")
    assert queued.error is None and not queued.turn_id
    assert [i.prompt for i in link.session.queue] == ["print('app')"]
    # The app's prompt is one request the worker decided on; the script's is refused busy first.
    sent = [(r.body["prompt"], r.body["delivery"]) for r in link.requests if r.route == "turn"]
    assert ("print('app')", "auto") in sent and sent.count(("print('app')", "auto")) == 1
    await eventually(lambda: waiting.waiting == "idle", "the script's prompt waiting for idle")
    assert not waiting.settled
    await link.end_turn()  # the queued prompt starts; the script's is sent once that one ends
    started = await changes_until(
        app, lambda c: isinstance(c, ch.TurnStarted) and c.record.prompt == "print('app')"
    )
    assert of(ch.TurnStarted, started)[-1].record.turn_id != running
    await link.end_turn()
    await changes_until(
        script, lambda c: isinstance(c, ch.TurnStarted) and c.record.prompt == "print('script')"
    )
    assert waiting.settled and waiting.error is None
    await app.close()
    await script.close()


class SlowStart(WorkerLink):
    """A worker that answers `/transcript` only on its third try, asking for 0.2 s between."""

    tries = 0

    async def transcript(self, limit: int = 50, **kw: Any) -> Transcript:
        self.tries += 1
        if self.tries < 3:
            self.retry_hint = 0.2
            raise WorkerUnavailable("the worker is starting")
        return await super().transcript(limit, **kw)


async def test_the_first_transcript_is_retried_under_the_followers_policy() -> None:
    link = SlowStart()
    link.located = Located("starting")
    attachment = Attachment(link)
    waits: list[float] = []
    seen: list[ch.Change] = []
    async with asyncio.timeout(TIMEOUT):
        while not of(ch.Attached, seen):
            batch = await attachment.next()
            assert batch is not None
            seen.extend(batch)
            for c in of(ch.LinkChanged, batch):
                if isinstance(c.state, Reconnecting):
                    waits.append(c.state.delay)
                    if len(waits) == 2:
                        link.located = Located("live")
    assert len(waits) == 2 and all(w >= 0.2 for w in waits)  # the retry: hint is a minimum
    await attachment.close()


async def test_no_worker_for_the_links_timeout_is_gone() -> None:
    link = SlowStart()
    link.tries = -(10**6)
    link.retry_hint = None
    link.no_worker_timeout = 0.0
    attachment = Attachment(link)
    changes = await changes_until(attachment, link_became(Gone))
    gone = of(ch.LinkChanged, changes)[-1].state
    assert "no worker was live for 0 s" in gone.reason and "tui attach 3f2a9c0e" in gone.reason
    assert attachment.ended
    await attachment.close()


async def test_a_worker_gone_ends_the_running_turn_and_the_question() -> None:
    link = WorkerLink()
    attachment = await attached(link)
    link.start_turn("ask()")
    await link.ask("Ready?", ["yes"])
    asked = await changes_until(attachment, lambda c: isinstance(c, ch.QuestionChanged))
    assert of(ch.QuestionChanged, asked)[-1].question.text == "Ready?"
    link.located = Located("gone", "the session was deleted")
    link.drop()
    changes = await changes_until(attachment, lambda c: isinstance(c, ch.StateChanged) and c.state == "ended")
    ended = of(ch.TurnEnded, changes)[0].record
    assert ended.outcome == "interrupted" and "the session was deleted" in (ended.error or "")
    assert of(ch.QuestionChanged, changes) == [ch.QuestionChanged(None)]
    await attachment.close()


async def test_an_answer_resolves_the_question_with_its_line() -> None:
    link = WorkerLink()
    attachment = await attached(link)
    link.start_turn("ask()")
    qid = await link.ask("Ready?", ["yes", "no"])
    await changes_until(attachment, lambda c: isinstance(c, ch.QuestionChanged))
    await link.answer(qid, ["yes"])
    resolved = of(
        ch.QuestionResolved, await changes_until(attachment, lambda c: isinstance(c, ch.QuestionResolved))
    )
    assert resolved[0].question_id == qid and "yes" in resolved[0].line and not resolved[0].elsewhere
    await attachment.close()


async def test_slash_model_alone_says_what_the_model_is_and_how_to_switch() -> None:
    attachment = await attached(WorkerLink(agent="model"))
    assert await attachment.command("/model") == ch.Usage(
        "/model", "The model is the default; type /model NAME (a [models] profile or PROVIDER:MODEL)."
    )
    await attachment.close()


async def test_slash_commands_answer_with_what_they_did() -> None:
    link = WorkerLink()
    attachment = await attached(link)
    stats = await attachment.command("/stats")
    assert isinstance(stats, ch.StatsShown) and stats.line.startswith("stats: ")
    assert await attachment.command("/model") == ch.Usage(
        "/model",
        "This session runs Python, which has no model; `tui --model NAME` starts a model session "
        "(`tui models` lists them).",
    )
    assert await attachment.command("/model big") == ch.Done("model")
    assert await attachment.command("/nope") == ch.Unknown("/nope")
    assert await attachment.command("/help") == ch.Local("/help", "")
    assert await attachment.command("/find x", surface="piped") == ch.Unknown("/find")
    assert await attachment.command("/queue") == ch.QueueShown(())
    assert await attachment.command("/resume") == ch.Resumed(False)
    assert await attachment.command("/detach") == ch.Leave()
    link.start_turn("slow()")
    assert await attachment.command("/queue print(3)") == ch.Done("queue")
    await changes_until(attachment, lambda c: isinstance(c, ch.QueueChanged) and len(c.queue) == 1)
    unqueued = await attachment.command("/unqueue")
    assert isinstance(unqueued, ch.Unqueued) and unqueued.item is not None
    assert unqueued.item.prompt == "print(3)"
    assert await attachment.command("/exit") == ch.Stopped(deleted=False)
    await attachment.close()


async def test_note_context_and_restart_answer_with_what_they_did() -> None:
    link = WorkerLink()
    attachment = await attached(link)
    assert await attachment.command("/note") == ch.Usage(
        "/note", "Type /note TEXT: the agent reads it with its next turn."
    )
    noted = await attachment.command("/note the build is green")
    assert noted == ch.Done("note", "note left; the agent reads it with its next turn")
    lines = await changes_until(attachment, lambda c: isinstance(c, ch.Line))
    assert ch.Line("note from alice: the build is green") in lines
    listed = await attachment.command("/context")
    assert isinstance(listed, ch.ContextShown) and listed.text.startswith("context: none; `tui context add ")
    usage = await attachment.command("/context drop ci")
    assert isinstance(usage, ch.Usage) and "/context remove NAME" in usage.text
    link.start_turn("slow()")
    await changes_until(attachment, lambda c: isinstance(c, ch.TurnStarted))
    busy = await attachment.command("/restart")
    assert isinstance(busy, ch.Failed) and "once it is idle" in str(busy.error)
    await link.end_turn()
    await changes_until(attachment, lambda c: isinstance(c, ch.TurnEnded))
    restarted = await attachment.command("/restart")
    assert restarted == ch.Done(
        "restart", "the session runs in a new worker; its programs' variables are gone"
    )
    assert [r.route for r in link.requests].count("restart") == 1
    await attachment.close()


def test_context_lists_each_sources_age_size_and_a_failing_commands_error() -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    listed = ContextList(
        now=now,
        sources=[
            ContextEntry(
                name="ci",
                kind="cmd",
                cmd="make ci",
                every=60,
                value="ok\n",
                size=1234,
                at=now - timedelta(seconds=12),
            ),
            ContextEntry(
                name="broken",
                kind="cmd",
                cmd="false",
                every=5,
                error=True,
                value="no such target\n(exit status 2)",
                size=30,
                at=now - timedelta(minutes=3),
            ),
            ContextEntry(name="notes", kind="push"),
        ],
    )
    assert format_context(listed, "tui context add X").splitlines() == [
        "context: 3 sources",
        "  ci      12 s old, 1,234 chars  · every 60 s: make ci",
        "  broken  3 min old, 30 chars  · every 5 s: false  · failed: no such target (exit status 2)",
        "  notes   no value yet  · pushed",
    ]


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("/exit", "for the session's owner"),
        ("/queue x", "viewing as"),
        ("/note hi", "viewing as"),
        ("/restart", "for the session's owner"),
        ("/context remove ci", "for the session's owner"),
    ],
)
async def test_what_this_client_may_not_do_is_refused_in_one_line(line: str, says: str) -> None:
    link = WorkerLink(principal=Principal(kind="viewer", name="ana", session_id="3f2a9c0e1b7d4a55"))
    attachment = await attached(link)
    refused = await attachment.command(line)
    assert isinstance(refused, ch.NotPermitted) and says in refused.text
    assert not any(r.route in ("stop", "turn", "note", "restart", "context_remove") for r in link.requests)
    # A viewer may read the sources.
    assert isinstance(await attachment.command("/context"), ch.ContextShown)
    await attachment.close()


async def test_a_scripts_prompt_refused_as_busy_is_sent_again_once_the_session_is_idle() -> None:
    """`SessionWatch.send` (``tui send --wait``, the piped surface) goes through the outbox: a
    turn of another client runs, so the prompt waits for idle rather than queueing."""
    from tui.link.watch import SessionWatch

    link = WorkerLink()
    other = link.start_turn("someone_elses()")
    watch = await SessionWatch.open(link)
    sending = asyncio.create_task(watch.send("print('mine')"))
    outbox = watch.attachment.outbox
    # The worker refused it as busy: it waits in the outbox for the session to be idle.
    await eventually(lambda: outbox and outbox[0].waiting == "idle", "the prompt refused as busy")
    async with asyncio.timeout(TIMEOUT):
        await link.reply("theirs\n")
        rid = await sending
        turn = watch.by_request[rid]
    assert turn != other and rid in watch.own_requests and turn in watch.own_turns
    sent = [r.body for r in link.requests if r.route == "turn"]
    assert {s["request_id"] for s in sent} == {rid} and all(s["delivery"] == "now" for s in sent)
    assert len(sent) == 2  # refused as busy once, then taken
    await watch.close()
