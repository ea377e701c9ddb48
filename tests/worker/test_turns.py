"""Turns of the python agent, end to end through a real worker: replies, failures, prose, queue,
interrupt, idempotent request ids."""

from __future__ import annotations

import asyncio

from helpers import RUNS_UNTIL_STOPPED

from worker.conftest import Worker


async def test_a_program_streams_its_output_and_its_final_value(worker: Worker) -> None:
    follower = worker.follow()
    ended = await worker.turn("for i in range(3):\n    print('line', i)\n6 * 7")
    assert ended["outcome"] == "completed"
    assert ended["reply"] == "line 0\nline 1\nline 2\n42\n"
    texts = [e.data["text"] for e in follower.of("text") if e.data["turn_id"] == ended["turn_id"]]
    await follower.until(lambda e: e.type == "turn_ended")
    texts = [e.data["text"] for e in follower.of("text")]
    assert "".join(texts) == ended["reply"], "the reply is exactly the streamed text"
    kinds = [e.type for e in follower.events]
    assert kinds[:2] == ["worker_started", "status"]
    assert kinds.index("turn_started") < kinds.index("text") < kinds.index("turn_ended")
    seqs = [e.seq for e in follower.events]
    assert seqs == list(range(1, len(seqs) + 1))


async def test_globals_persist_from_turn_to_turn(worker: Worker) -> None:
    await worker.turn("x = 20")
    ended = await worker.turn("x + 1")
    assert ended["reply"] == "21\n"


async def test_an_exception_fails_the_turn_with_its_traceback(worker: Worker) -> None:
    ended = await worker.turn("print('before')\nraise ValueError('boom')")
    assert ended["outcome"] == "failed"
    assert ended["reply"].startswith("before\n")
    assert "ValueError: boom" in ended["reply"]
    assert "Traceback" in ended["reply"]
    assert ended["error"] and "ValueError: boom" in ended["error"]


async def test_prose_gets_a_short_answer_not_a_traceback(worker: Worker) -> None:
    ended = await worker.turn("please deploy the app to staging")
    assert ended["outcome"] == "completed"
    assert "runs Python" in ended["reply"]
    assert "tui --model NAME" in ended["reply"]
    assert "Traceback" not in ended["reply"]


async def test_the_same_request_id_starts_one_turn_even_after_a_restart(worker: Worker) -> None:
    client = worker.client()
    body = {"prompt": "print('once')", "request_id": "req-1", "client_id": "test:1"}
    first = await client.post("/turn", json=body)
    again = await client.post("/turn", json=body)
    assert first.status_code == again.status_code == 202
    assert first.json() == again.json()
    follower = worker.follow()
    await follower.until(lambda e: e.type == "turn_ended")
    worker.kill()
    worker.restart()
    third = await worker.client().post("/turn", json=body)
    assert third.json() == first.json()
    follower = worker.follow()
    await follower.until(lambda e: e.type == "worker_started" and e.data["epoch"] == 2)
    starts = [e for e in follower.events if e.type == "turn_started"]
    assert len(starts) == 1 and starts[0].data["request_id"] == "req-1"


async def test_now_while_a_turn_runs_is_busy_and_queue_runs_in_order(worker: Worker) -> None:
    client = worker.client()
    follower = worker.follow()
    running = await client.post("/turn", json={"prompt": "x = ask('go on?')"})
    assert running.status_code == 202
    await follower.until(lambda e: e.type == "question_asked")
    busy = await client.post("/turn", json={"prompt": "print(2)"})
    assert busy.status_code == 409
    assert busy.json()["error"] == "busy"
    q1 = (await client.post("/turn", json={"prompt": "print('first')", "delivery": "queue"})).json()
    q2 = (await client.post("/turn", json={"prompt": "print('second')", "delivery": "queue"})).json()
    q3 = (await client.post("/turn", json={"prompt": "print('third')", "delivery": "queue"})).json()
    assert q1["queue_id"] and q1["turn_id"] is None
    changed = await follower.until(lambda e: e.type == "queue_changed" and len(e.data["items"]) == 3)
    assert [i["prompt"] for i in changed.data["items"]] == [
        "print('first')",
        "print('second')",
        "print('third')",
    ]
    removed = await client.delete(f"/queue/{q2['queue_id']}")
    assert removed.status_code == 200
    transcript = (await client.get("/transcript")).json()
    assert [i["queue_id"] for i in transcript["queue"]] == [q1["queue_id"], q3["queue_id"]]
    question = transcript["question"]
    await client.post("/answer", json={"question_id": question["question_id"], "freeform": "yes"})
    last = await follower.until(lambda e: e.type == "turn_ended" and e.data["reply"] == "third\n", within=30)
    starts = follower.of("turn_started")
    assert [s.data["origin"] for s in starts] == ["user", "queue", "queue"]
    assert [s.data["queue_id"] for s in starts[1:]] == [q1["queue_id"], q3["queue_id"]]
    assert last.data["outcome"] == "completed"
    gone = await client.delete(f"/queue/{q1['queue_id']}")
    assert gone.status_code == 404
    assert gone.json()["error"] == "not_found"


async def test_two_auto_sends_at_once_to_an_idle_session_start_one_and_queue_the_other(
    worker: Worker,
) -> None:
    """``delivery: auto`` is the worker's to decide, in one step: neither is refused busy, and
    not both start."""
    first, second = worker.client(), worker.client()  # two clients, two connections
    follower = worker.follow()
    answers = await asyncio.gather(
        first.post("/turn", json={"prompt": "x = ask('go on?')", "delivery": "auto", "client_id": "a"}),
        second.post("/turn", json={"prompt": "x = ask('go on?')", "delivery": "auto", "client_id": "b"}),
    )
    assert [a.status_code for a in answers] == [202, 202]
    bodies = [a.json() for a in answers]
    started = [b for b in bodies if b["turn_id"]]
    queued = [b for b in bodies if b["queue_id"]]
    assert len(started) == len(queued) == 1 and not (started[0]["queue_id"] or queued[0]["turn_id"])
    asked = await follower.until(lambda e: e.type == "question_asked")
    await first.post("/answer", json={"question_id": asked.data["question_id"], "freeform": "y"})
    later = await follower.until(lambda e: e.type == "turn_started" and e.data["origin"] == "queue")
    assert later.data["queue_id"] == queued[0]["queue_id"]
    starts = follower.of("turn_started")
    assert [s.data["turn_id"] for s in starts] == [started[0]["turn_id"], later.data["turn_id"]]


async def test_interrupt_ends_the_running_turn_interrupted(worker: Worker) -> None:
    client = worker.client()
    follower = worker.follow()
    idle = await client.post("/interrupt", json={})
    assert idle.json() == {"interrupted": False}
    await client.post("/turn", json={"prompt": RUNS_UNTIL_STOPPED})
    await follower.until(lambda e: e.type == "text" and "started" in e.data["text"])
    stopped = await client.post("/interrupt", json={"client_id": "test:1"})
    assert stopped.json() == {"interrupted": True}
    ended = await follower.until(lambda e: e.type == "turn_ended")
    assert ended.data["outcome"] == "interrupted"
    status = await follower.until(lambda e: e.type == "status" and e.seq > ended.seq)
    assert status.data["state"] == "idle"
    after = await worker.turn("print('still here')")
    assert after["reply"] == "still here\n"


async def test_a_queued_send_to_an_idle_session_starts_at_once(worker: Worker) -> None:
    client = worker.client()
    follower = worker.follow()
    accepted = (await client.post("/turn", json={"prompt": "print(1)", "delivery": "queue"})).json()
    started = await follower.until(lambda e: e.type == "turn_started")
    assert started.data["queue_id"] == accepted["queue_id"]
    assert started.data["origin"] == "queue"
    await asyncio.wait_for(follower.until(lambda e: e.type == "turn_ended"), 20)
