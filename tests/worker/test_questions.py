"""`ask` inside a program: answered (first answer wins), refused answers, dismissed."""

from __future__ import annotations

import asyncio

from tui.worker.agents.python import DISMISSED
from worker.conftest import Worker

PROGRAM = "choice = ask('Deploy where?', options=['staging', 'prod'])\nprint('to', choice)"


async def test_the_first_answer_wins_and_the_program_gets_the_label(worker: Worker) -> None:
    client = worker.client()
    follower = worker.follow()
    await client.post("/turn", json={"prompt": PROGRAM})
    asked = await follower.until(lambda e: e.type == "question_asked")
    assert [o["label"] for o in asked.data["options"]] == ["staging", "prod"]
    assert (await client.get("/transcript")).json()["state"] == "asking"
    qid = asked.data["question_id"]
    first, second = await asyncio.gather(
        client.post("/answer", json={"question_id": qid, "selected": ["prod"], "client_id": "a"}),
        client.post("/answer", json={"question_id": qid, "selected": ["staging"], "client_id": "b"}),
    )
    assert sorted([first.status_code, second.status_code]) == [200, 409]
    loser = first if first.status_code == 409 else second
    assert loser.json()["error"] == "question_not_pending"
    winner = "prod" if first.status_code == 200 else "staging"
    resolved = await follower.until(lambda e: e.type == "question_resolved")
    assert resolved.data["how"] == "answered" and resolved.data["selected"] == [winner]
    assert resolved.data["by"]["kind"] == "owner" and resolved.data["by"]["name"]
    ended = await follower.until(lambda e: e.type == "turn_ended")
    assert ended.data["reply"] == f"to {winner}\n"
    tools = follower.of("tool_started")
    assert [t.data["name"] for t in tools] == ["ask"]
    # The call's line names what the program wrote, not the defaults it left alone ("… +2 more").
    assert tools[0].data["args"] == {"question": "Deploy where?", "options": ["staging", "prod"]}
    tool_end = follower.of("tool_ended")[0]
    assert tool_end.data["status"] == "completed" and tool_end.data["value"] == winner


async def test_answers_that_do_not_fit_the_question_are_refused(worker: Worker) -> None:
    client = worker.client()
    follower = worker.follow()
    program = "r = ask('Which?', options=['a', 'b'], freeform=False)\nprint(r)"
    await client.post("/turn", json={"prompt": program})
    qid = (await follower.until(lambda e: e.type == "question_asked")).data["question_id"]
    for bad in (
        {"selected": ["c"]},
        {"selected": ["a", "b"]},
        {"freeform": "something else"},
        {},
    ):
        reply = await client.post("/answer", json={"question_id": qid, **bad})
        assert reply.status_code == 400, bad
        assert reply.json()["error"] == "invalid_answer"
    wrong = await client.post("/answer", json={"question_id": "ask-nope", "selected": ["a"]})
    assert wrong.status_code == 409 and wrong.json()["error"] == "question_not_pending"
    ok = await client.post("/answer", json={"question_id": qid, "selected": ["b"]})
    assert ok.status_code == 200
    assert (await follower.until(lambda e: e.type == "turn_ended")).data["reply"] == "b\n"


async def test_multiple_and_freeform_answers_reach_the_program(worker: Worker) -> None:
    client = worker.client()
    follower = worker.follow()
    program = "r = ask('Pick', options=['x', 'y', 'z'], multiple=True)\nt = ask('Why?')\nprint(r, t)"
    await client.post("/turn", json={"prompt": program})
    q1 = await follower.until(lambda e: e.type == "question_asked")
    await client.post("/answer", json={"question_id": q1.data["question_id"], "selected": ["x", "z"]})
    q2 = await follower.until(lambda e: e.type == "question_asked" and e.seq > q1.seq)
    assert q2.data["options"] == []
    await client.post("/answer", json={"question_id": q2.data["question_id"], "freeform": "because"})
    ended = await follower.until(lambda e: e.type == "turn_ended")
    assert ended.data["reply"] == "['x', 'z'] because\n"
    record = (await client.get("/transcript")).json()["turns"][-1]
    assert len(record["answered"]) == 2 and "because" in record["answered"][1]
    assert [t["args"] for t in record["tools"]] == [
        {"question": "Pick", "options": ["x", "y", "z"], "multiple": True},
        {"question": "Why?"},
    ]


async def test_a_dismissed_question_raises_in_the_program(worker: Worker) -> None:
    client = worker.client()
    follower = worker.follow()
    program = "try:\n    ask('Sure?', options=['yes'])\nexcept ToolError as e:\n    print('got', e)"
    await client.post("/turn", json={"prompt": program})
    qid = (await follower.until(lambda e: e.type == "question_asked")).data["question_id"]
    reply = await client.post("/question/dismiss", json={"question_id": qid})
    assert reply.status_code == 200
    again = await client.post("/question/dismiss", json={"question_id": qid})
    assert again.status_code == 409 and again.json()["error"] == "question_not_pending"
    resolved = await follower.until(lambda e: e.type == "question_resolved")
    assert resolved.data["how"] == "dismissed"
    ended = await follower.until(lambda e: e.type == "turn_ended")
    assert ended.data["outcome"] == "completed"
    assert ended.data["reply"] == "got dismissed\n"


async def test_a_dismissal_the_program_does_not_catch_fails_the_turn_in_one_line(worker: Worker) -> None:
    client = worker.client()
    follower = worker.follow()
    await client.post("/turn", json={"prompt": "print('asking')\nask('Sure?', options=['yes'])"})
    qid = (await follower.until(lambda e: e.type == "question_asked")).data["question_id"]
    await client.post("/question/dismiss", json={"question_id": qid})
    ended = await follower.until(lambda e: e.type == "turn_ended")
    assert ended.data["outcome"] == "failed"
    assert ended.data["error"] == DISMISSED
    assert ended.data["reply"] == "asking\n"  # no traceback of the ask
    assert follower.of("tool_ended")[0].data["status"] == "terminated"
    assert not follower.of("tool_ended")[0].data.get("error")


async def test_interrupt_withdraws_a_pending_question(worker: Worker) -> None:
    client = worker.client()
    follower = worker.follow()
    await client.post("/turn", json={"prompt": "ask('Wait for me?')"})
    qid = (await follower.until(lambda e: e.type == "question_asked")).data["question_id"]
    assert (await client.post("/interrupt", json={})).json() == {"interrupted": True}
    resolved = await follower.until(lambda e: e.type == "question_resolved")
    assert resolved.data == {**resolved.data, "question_id": qid, "how": "cancelled"}
    ended = await follower.until(lambda e: e.type == "turn_ended")
    assert ended.data["outcome"] == "interrupted"
    late = await client.post("/answer", json={"question_id": qid, "freeform": "yes"})
    assert late.status_code == 409
