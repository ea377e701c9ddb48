"""Every route's refusals: each bad input gets a clear code, and the worker keeps serving."""

from __future__ import annotations

import asyncio
import getpass
import json
import stat

import httpx
from helpers import RUNS_UNTIL_STOPPED, TIMEOUT, Sse, eventually, wait_until

from tui.protocol import Presence
from tui.store import read_sidecar
from worker.conftest import Worker

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


async def test_info_names_the_session_and_its_features(worker: Worker) -> None:
    info = (await worker.client().get("/info")).json()
    assert info["app"] == "tui-worker"
    assert info["session_id"] == worker.session_id
    assert info["epoch"] == 1 and info["agent"] == "python" and info["model"] is None
    assert info["reply_format"] == "verbatim" and info["commands"] == []
    assert {
        "turns",
        "queue",
        "unqueue",
        "interrupt",
        "questions",
        "images",
        "stats",
        "model",
        "transcript",
    } <= set(info["features"])
    sock = worker.sidecar.socket
    import os

    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(sock)).st_mode) == 0o700


async def test_bad_requests_get_clear_codes_and_the_worker_keeps_serving(worker: Worker) -> None:
    client = worker.client()
    no_image = {"prompt": "1", "images": [{"file": "nope.png", "name": "x"}]}
    not_pending = "question_not_pending"
    cases: list[tuple[httpx.Response, int, str]] = [
        (await client.get("/nowhere"), 404, "not_found"),
        (await client.post("/turn", content=b"{not json"), 400, "invalid_request"),
        (await client.post("/turn", json={"prompt": 42}), 400, "invalid_request"),
        (await client.post("/turn", json={}), 400, "invalid_request"),
        (await client.post("/turn", json={"prompt": "1", "delivery": "later"}), 400, "invalid_request"),
        (await client.post("/turn", json={"prompt": "1", "surprise": True}), 400, "invalid_request"),
        (await client.post("/turn", content=b"x" * (4 * 1024 * 1024 + 1)), 413, "too_large"),
        (await client.get("/events", params={"cursor": 999}), 409, "bad_cursor"),
        (await client.get("/events", params={"cursor": "soon"}), 400, "invalid_request"),
        (await client.get("/transcript", params={"limit": -1}), 400, "invalid_request"),
        (await client.get("/transcript", params={"before": "t-nope"}), 404, "not_found"),
        (await client.delete("/queue/q-nope"), 404, "not_found"),
        (await client.post("/answer", json={"question_id": "ask-x", "selected": ["a"]}), 409, not_pending),
        (await client.post("/question/dismiss", json={"question_id": "ask-x"}), 409, not_pending),
        (await client.post("/model", json={"model": "gpt-9"}), 400, "invalid_model"),
        (await client.post("/answer", json={"question_id": 7}), 400, "invalid_request"),
        (await client.post("/images", content=b"just text"), 415, "not_an_image"),
        (await client.post("/images", content=PNG + b"\x00" * (4 * 1024 * 1024)), 413, "too_large"),
        (await client.post("/turn", json=no_image), 400, "invalid_request"),
    ]
    for reply, status, code in cases:
        body = reply.json()
        assert (reply.status_code, body["error"]) == (status, code), (reply.request.url, body)
        assert isinstance(body["detail"], str) and body["detail"]
    wrong_type = (await client.post("/turn", json={"prompt": 42})).json()
    assert "prompt" in wrong_type["detail"] and wrong_type["field"] == "prompt"
    # A cursor under another name is refused, naming it (it was followed from 0, as a stream).
    async with client.stream("GET", "/events", params={"after": "abc"}) as refused:
        assert refused.status_code == 400
        after = json.loads(await refused.aread())
    assert after["error"] == "invalid_request" and after["field"] == "after" and "cursor=N" in after["detail"]
    ended = await worker.turn("print('fine')")
    assert ended["reply"] == "fine\n"


async def test_images_are_kept_by_content_and_can_go_with_a_turn(worker: Worker) -> None:
    client = worker.client()
    stored = await client.post("/images", params={"name": "shot.png"}, content=PNG)
    assert stored.status_code == 201
    ref = stored.json()
    assert ref["name"] == "shot.png" and ref["file"].endswith(".png")
    assert (worker.paths.images / ref["file"]).read_bytes() == PNG
    ended = await worker.turn("print('seen')", images=[ref])
    assert ended["outcome"] == "completed"


async def test_transcript_pages_back_through_ended_turns(worker: Worker) -> None:
    for n in range(5):
        await worker.turn(f"print({n})")
    client = worker.client()
    last = (await client.get("/transcript", params={"limit": 2})).json()
    assert [t["reply"] for t in last["turns"]] == ["3\n", "4\n"]
    assert last["has_more"] and last["state"] == "idle" and last["current"] is None
    assert last["cursor"] == (await client.get("/stats")).json()["events"]
    older = (
        await client.get("/transcript", params={"limit": 10, "before": last["turns"][0]["turn_id"]})
    ).json()
    assert [t["reply"] for t in older["turns"]] == ["0\n", "1\n", "2\n"] and not older["has_more"]


async def test_transcript_shows_the_turn_in_progress_and_the_question(worker: Worker) -> None:
    client = worker.client()
    follower = worker.follow()
    await client.post("/turn", json={"prompt": "print('half', flush=True)\nask('more?')"})
    asked = await follower.until(lambda e: e.type == "question_asked")
    lead_in = await follower.until(lambda e: e.type == "text")
    assert lead_in.seq < asked.seq, "what the program printed before asking comes first"
    t = (await client.get("/transcript")).json()
    assert t["current"]["prompt"].startswith("print('half'") and t["current"]["reply"] == "half\n"
    assert t["question"]["text"] == "more?" and t["state"] == "asking"
    assert [e.seq for e in follower.events][-1] <= t["cursor"]


async def test_stats_name_the_attached_clients(worker: Worker) -> None:
    await worker.turn("print(1)")
    follower = worker.follow(client_id="tui:test:1")
    await follower.until(lambda e: e.type == "worker_started")
    stats = (await worker.client().get("/stats")).json()
    assert stats["turns"] == 1 and stats["events"] >= 5 and stats["uptime"] > 0
    assert "tui:test:1" in stats["attached"]


async def test_last_event_id_wins_over_the_cursor(worker: Worker) -> None:
    await worker.turn("print(1)")
    client = worker.client()
    async with client.stream("GET", "/events", params={"cursor": 0}, headers={"Last-Event-ID": "3"}) as r:
        first = None
        async for line in r.aiter_lines():
            if line.startswith("id: "):
                first = int(line[4:])
                break
    assert first == 4


async def test_leave_ends_streams_and_lets_go(worker: Worker) -> None:
    follower = worker.follow()
    await follower.until(lambda e: e.type == "status")
    client = worker.client()
    await client.post("/turn", json={"prompt": RUNS_UNTIL_STOPPED})
    await follower.until(lambda e: e.type == "turn_started")
    reply = await client.post("/leave", json={})
    assert reply.json() == {"released": True}
    ended = await follower.until(lambda e: e.type == "turn_ended")
    assert ended.data["outcome"] == "interrupted"
    leaving = await follower.until(lambda e: e.type == "worker_leaving")
    assert leaving.seq == follower.events[-1].seq
    assert follower.task is not None
    await asyncio.wait_for(follower.task, TIMEOUT)
    assert read_sidecar(worker.paths.sidecar) is None
    import os

    def gone() -> bool:
        try:
            os.kill(worker.sidecar.pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_until(gone, "the worker process to end")


async def test_a_client_attaching_after_everyone_left_hears_who_is_attached(worker: Worker) -> None:
    """The journal's last status may still name the one who left; a new stream gets a fresh one."""
    first = worker.follow(client_id="tui:test:1")
    await first.until(lambda e: e.type == "status" and bool(e.data["attached"]))
    assert first.task is not None
    first.task.cancel()

    async def nobody() -> bool:
        return (await worker.client().get("/transcript", params={"limit": 0})).json()["attached"] == []

    await eventually(nobody, "the first stream to close")
    cursor = (await worker.client().get("/transcript", params={"limit": 0})).json()["cursor"]
    second = worker.follow(cursor, client_id="tui:test:2")
    status = await second.until(lambda e: e.type == "status")
    assert [p["name"] for p in status.data["attached"]] == [getpass.getuser()]


async def test_the_status_says_what_each_person_is_attached_with(worker: Worker) -> None:
    one = worker.follow(client_id="tui:test:1")
    two = worker.follow(client_id="script:test:2")
    status = await two.until(
        lambda e: e.type == "status" and bool(e.data["attached"]) and len(e.data["attached"][0]["via"]) == 2
    )
    assert status.data["attached"] == [
        {"name": getpass.getuser(), "kind": "owner", "via": ["script", "terminal"], "streams": {}}
    ]
    assert one.task is not None


async def test_a_participant_the_web_bridge_names_is_attached_with_their_share(worker: Worker) -> None:
    """``X-Tui-By`` names a participant and their share: the status lists them with it, their turn
    is marked with their name, and the share is not written into the journal."""
    by = json.dumps({"kind": "participant", "name": "carol", "share": "collaborator"})
    follower = worker.follow(client_id="script:test:1", headers={"X-Tui-By": by})
    status = await follower.until(
        lambda e: e.type == "status" and any(p["name"] == "carol" for p in e.data["attached"])
    )
    assert {"name": "carol", "kind": "collaborator", "via": ["script"], "streams": {}} in status.data[
        "attached"
    ]
    sent = await worker.client().post("/turn", json={"prompt": "1"}, headers={"X-Tui-By": by})
    assert sent.status_code == 202, sent.text
    started = await follower.until(lambda e: e.type == "turn_started")
    assert started.data["by"] == {"kind": "participant", "name": "carol"}
    bad = json.dumps({"kind": "participant", "name": "carol", "share": "owner"})
    refused = await worker.client().post("/turn", json={"prompt": "2"}, headers={"X-Tui-By": bad})
    assert refused.status_code == 400 and "X-Tui-By" in refused.text


async def test_many_streams_opening_at_once_are_told_in_a_few_statuses(worker: Worker) -> None:
    """Each status names everyone attached: one per stream opened would make a burst of n
    followers cost n² in the journal and on every stream."""
    count = 40
    cursor = (await worker.client().get("/transcript", params={"limit": 0})).json()["cursor"]
    followers = [worker.follow(cursor, client_id=f"script:test:{i}") for i in range(count)]

    def streams(e: Sse) -> int:
        return int(Presence.model_validate(e.data["attached"][0]).counts().get("script", 0))

    def everyone(e: Sse) -> bool:
        return e.type == "status" and bool(e.data["attached"]) and streams(e) == count

    await followers[0].until(everyone)
    statuses = [e for e in followers[0].events if e.type == "status"]
    assert len(statuses) < count, [streams(e) for e in statuses if e.data["attached"]]
    for follower in followers:
        assert follower.task is not None
        follower.task.cancel()
