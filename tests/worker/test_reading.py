"""Reading a session through a real worker and its clients: pages after or around a turn, search
over the whole session, a turn's whole output, and the queue held after an interrupt."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import ClassVar

import pytest
from helpers import RUNS_UNTIL_STOPPED, TIMEOUT, worker_here

from tui.errors import InvalidRequest, NotFound, UnknownCall, UnknownTurn
from tui.link.local import LocalLink
from tui.protocol import Event, TurnRequest
from tui.protocol.state import SessionState
from tui.worker.agent import Agent, AgentContext, TurnIO, TurnOutcome
from tui.worker.agents import register
from tui.worker.core import SessionWorker
from worker.conftest import Worker


@pytest.fixture
async def link(worker: Worker) -> AsyncIterator[LocalLink]:
    link = LocalLink(worker.state, worker.session_id, client_id="test:reader:1")
    yield link
    await link.close()


async def _turns(worker: Worker, count: int) -> list[str]:
    ids = []
    for i in range(1, count + 1):
        word = "zebra" if i == 3 else "horse"
        ended = await worker.turn(f"print('turn {i}', {word!r})")
        ids.append(ended["turn_id"])
    return ids


async def test_pages_after_and_around_a_turn(worker: Worker, link: LocalLink) -> None:
    ids = await _turns(worker, 7)
    after = await link.transcript(3, after=ids[1])
    assert [t.turn_id for t in after.turns] == ids[2:5]
    assert after.has_more and after.has_newer
    tail = await link.transcript(3, after=ids[4])
    assert [t.turn_id for t in tail.turns] == ids[5:]
    assert not tail.has_newer
    around = await link.transcript(4, around=ids[3])
    assert [t.turn_id for t in around.turns] == ids[1:5]
    assert around.has_more and around.has_newer
    first = await link.transcript(4, around=ids[0])
    assert [t.turn_id for t in first.turns] == ids[:4] and not first.has_more
    opening = await link.transcript(3, first=True)
    assert [t.turn_id for t in opening.turns] == ids[:3]
    assert not opening.has_more and opening.has_newer and opening.current is None
    whole = await link.transcript(50, first=True)
    assert [t.turn_id for t in whole.turns] == ids and not whole.has_newer
    with pytest.raises(NotFound, match="a turn id comes from"):
        await link.transcript(3, after="t-nope")
    both = await worker.client().get("/transcript", params={"before": ids[3], "after": ids[1]})
    assert both.status_code == 400 and both.json()["error"] == "invalid_request"
    mixed = await worker.client().get("/transcript", params={"first": "1", "before": ids[3]})
    assert mixed.status_code == 400 and "give one of before, after, around and first" in mixed.text


async def test_search_finds_a_word_of_turn_three_and_in_the_running_turn(
    worker: Worker, link: LocalLink
) -> None:
    ids = await _turns(worker, 6)
    found = await link.search("ZEBRA")
    # In turn 3's prompt (the program names it) and in its reply (the program printed it).
    assert [(h.turn_id, h.where) for h in found.hits] == [(ids[2], "prompt"), (ids[2], "reply")]
    assert found.total == 2 and not found.more
    assert found.hits[1].snippet == "turn 3 zebra"
    many = await link.search("horse", limit=3)
    assert len(many.hits) == 3 and many.total == 10 and many.more
    assert [h.turn_id for h in many.hits] == [ids[0], ids[0], ids[1]], "oldest first"
    follower = worker.follow()
    await worker.client().post("/turn", json={"prompt": RUNS_UNTIL_STOPPED})
    await follower.until(lambda e: e.type == "text" and "started" in e.data["text"])
    running = await link.search("Started")
    assert running.hits[-1].where == "reply"
    assert running.hits[-1].turn_id == (await link.transcript(0)).current.turn_id  # type: ignore[union-attr]
    with pytest.raises(InvalidRequest, match="q: give the text"):
        await link.search("  ")
    await link.interrupt()


async def test_a_turns_whole_output_streams_every_line(worker: Worker, link: LocalLink) -> None:
    ended = await worker.turn("for i in range(100_000):\n    print('line', i)")
    pieces = [piece async for piece in link.turn_output(ended["turn_id"])]
    text = "".join(pieces)
    lines = text.splitlines()
    assert len(lines) == 100_000 and lines[-1] == "line 99999"
    assert len(pieces) > 1, "streamed in pieces"
    with pytest.raises(UnknownTurn, match=r"no turn 't-nope'.*GET /transcript"):
        [piece async for piece in link.turn_output("t-nope")]
    with pytest.raises(UnknownCall, match="leave call_id out"):
        [piece async for piece in link.turn_output(ended["turn_id"], call_id="call-nope")]


async def test_after_an_interrupt_the_queue_waits_until_resumed(worker: Worker, link: LocalLink) -> None:
    client = worker.client()
    follower = worker.follow()
    other = worker.follow(client_id="test:other:2")
    await client.post("/turn", json={"prompt": RUNS_UNTIL_STOPPED})
    await follower.until(lambda e: e.type == "text" and "started" in e.data["text"])
    queued = await client.post("/turn", json={"prompt": "print('queued')", "delivery": "queue"})
    assert queued.status_code == 202
    assert await link.interrupt()
    held = await other.until(lambda e: e.type == "queue_changed" and e.data["held"])
    assert [i["prompt"] for i in held.data["items"]] == ["print('queued')"]
    page = await link.transcript(0)
    assert page.queue_held and page.state == "idle" and [i.prompt for i in page.queue] == ["print('queued')"]
    # A new prompt typed now runs; the queue keeps waiting behind it.
    typed = await worker.turn("print('typed')")
    assert typed["reply"] == "typed\n"
    assert (await link.transcript(0)).queue_held
    assert [e.data["prompt"] for e in follower.of("turn_started")] == [RUNS_UNTIL_STOPPED, "print('typed')"]
    assert await link.resume_queue()
    ran = await other.until(lambda e: e.type == "turn_ended" and e.data["reply"] == "queued\n")
    assert ran.data["outcome"] == "completed"
    assert not (await link.transcript(0)).queue_held
    assert not await link.resume_queue(), "nothing is held any more"


async def test_taking_back_the_last_held_prompt_ends_the_hold(worker: Worker, link: LocalLink) -> None:
    client = worker.client()
    follower = worker.follow()
    await client.post("/turn", json={"prompt": RUNS_UNTIL_STOPPED})
    await follower.until(lambda e: e.type == "text" and "started" in e.data["text"])
    queued = (await client.post("/turn", json={"prompt": "print(1)", "delivery": "queue"})).json()
    await link.interrupt()
    await follower.until(lambda e: e.type == "queue_changed" and e.data["held"])
    await link.unqueue(queued["queue_id"])
    emptied = await follower.until(lambda e: e.type == "queue_changed" and not e.data["items"])
    assert emptied.data["held"] is False


# --- tool calls, in a worker of this process ------------------------------------------------------
@register("reading")
class ToolAgent(Agent):
    """Each turn calls one tool whose output names a word, the prompt, then replies."""

    name: ClassVar[str] = "reading"

    def __init__(self, context: AgentContext) -> None:
        self.context = context

    @classmethod
    def from_context(cls, context: AgentContext) -> ToolAgent:
        return cls(context)

    async def run_turn(self, turn: TurnIO) -> TurnOutcome:
        call = turn.tool_started("shell", {"command": f"grep {turn.prompt}"}, title="Search the files")
        turn.tool_output(call, f"found: Kingfisher of {turn.prompt}\n" + "filler\n" * 10)
        turn.tool_ended(call, "completed")
        turn.text("done")
        return TurnOutcome("completed")


@pytest.fixture
async def in_process(state_dir: Path, tmp_path: Path) -> AsyncIterator[SessionWorker]:
    worker = worker_here(state_dir, tmp_path, "reading")
    yield worker
    await worker.leave("test over")


async def _run(worker: SessionWorker, prompt: str) -> str:
    accepted = worker.control.submit(TurnRequest(prompt=prompt))
    task = worker.control.turn.task if worker.control.turn is not None else None
    assert task is not None and accepted.turn_id is not None
    await asyncio.wait_for(task, TIMEOUT)
    return accepted.turn_id


async def test_search_finds_words_in_a_tools_arguments_and_output(in_process: SessionWorker) -> None:
    first = await _run(in_process, "alpha")
    second = await _run(in_process, "beta")
    found = await in_process.search("kingfisher")
    assert [(h.turn_id, h.where) for h in found.hits] == [(first, "tool"), (second, "tool")]
    assert found.hits[0].snippet == "found: Kingfisher of alpha"
    args = await in_process.search("GREP BETA")
    assert [(h.turn_id, h.where) for h in args.hits] == [(second, "tool")]
    record = in_process.writer.turn_store.get(second)
    assert in_process.turn_output(second, record.tools[0].call_id).startswith("found: Kingfisher of beta\n")


async def test_each_written_event_is_handed_on_with_the_state_after_it(in_process: SessionWorker) -> None:
    """`SessionWorker.listeners` hear every event once it is in the journal, in order, with the
    state it made; a listener that fails neither stops the turn nor the listeners after it."""
    seen: list[tuple[int, str, str]] = []

    def broken(event: Event, state: SessionState) -> None:
        raise RuntimeError("a broken listener")

    in_process.writer.listeners.append(broken)
    in_process.writer.listeners.append(lambda event, state: seen.append((event.seq, event.type, state.state)))
    turn_id = await _run(in_process, "gamma")
    written = [json.loads(line) for line in in_process.writer.paths.journal.read_bytes().splitlines()]
    first = seen[0][0]
    tail = [(e["seq"], e["type"]) for e in written if e["seq"] >= first]
    assert [(seq, typ) for seq, typ, _ in seen] == tail
    assert ("turn_started", "working") in [(typ, state) for _, typ, state in seen]
    assert ("turn_ended", "idle") in [(typ, state) for _, typ, state in seen]
    assert in_process.turn_output(turn_id) == "done"
