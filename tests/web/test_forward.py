"""The routes of protocol.md forwarded through a real `tui web` to real workers."""

from __future__ import annotations

import asyncio
import os
import signal

import httpx
from helpers import RUNS_UNTIL_STOPPED, eventually, read_sse

from tui.store import StatePaths, read_sidecar
from tui.web.participants import ParticipantStore
from tui.web.paths import WebPaths

from .conftest import TIMEOUT, Web, events_until, wake


def _async(web: Web, token: str | None = "owner") -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {web.token if token == 'owner' else token}"}
    return httpx.AsyncClient(base_url=web.url, headers=headers, timeout=TIMEOUT)


def _ended(event: object) -> bool:
    return getattr(event, "type", "") == "turn_ended"


async def test_create_with_a_prompt_then_follow_its_reply_through_the_bridge(web: Web) -> None:
    async with _async(web) as c:
        made = await c.post("/api/sessions", json={"prompt": "print(6 * 7)", "wait": TIMEOUT})
        assert made.status_code == 201, made.text
        sid = made.json()["id"]
        assert made.json()["turn"]["turn_id"]
        seen = await events_until(c, f"/api/sessions/{sid}/events", _ended)
        assert seen[0].type == "worker_started"
        assert [e.seq for e in seen] == list(range(1, len(seen) + 1))
        assert seen[-1].data["reply"] == "42\n"
        assert seen[-1].data["outcome"] == "completed"
        shown = (await c.get(f"/api/sessions/{sid}")).json()
        assert shown["live"] is True
        assert shown["folder"] == str(web.state)
        transcript = (await c.get(f"/api/sessions/{sid}/transcript")).json()
        assert transcript["turns"][-1]["reply"] == "42\n"
        assert (await c.get(f"/api/sessions/{sid}/info")).json()["session_id"] == sid
        assert (await c.get(f"/api/sessions/{sid}/stats")).json()["turns"] >= 1


async def test_the_stream_through_the_bridge_is_the_workers_stream(web: Web) -> None:
    sid = web.session()
    wake(web, sid)
    async with _async(web) as c:
        await c.post(f"/api/sessions/{sid}/turn", json={"prompt": "for i in range(5): print(i)"})
        remote = await events_until(c, f"/api/sessions/{sid}/events", _ended)
    car = read_sidecar(StatePaths(web.state).session(sid).sidecar)
    assert car is not None
    transport = httpx.AsyncHTTPTransport(uds=car.socket)
    async with httpx.AsyncClient(transport=transport, base_url="http://worker", timeout=TIMEOUT) as w:
        local = await events_until(w, "/events", _ended)
    assert [(e.seq, e.type, e.data) for e in remote] == [(e.seq, e.type, e.data) for e in local]
    # A cursor picks up where it left off, and Last-Event-ID wins over it.
    async with _async(web) as c:
        later = await events_until(c, f"/api/sessions/{sid}/events", _ended, cursor=remote[2].seq)
        assert later[0].seq == remote[3].seq
        ahead = await c.get(f"/api/sessions/{sid}/events", params={"cursor": 10_000})
        assert ahead.status_code == 409
        assert ahead.json()["error"] == "bad_cursor"


async def test_refusals_of_the_worker_come_through_as_they_are(web: Web) -> None:
    sid = web.session()
    wake(web, sid)
    async with _async(web) as c:
        running = await c.post(f"/api/sessions/{sid}/turn", json={"prompt": RUNS_UNTIL_STOPPED})
        assert running.status_code == 202
        busy = await c.post(f"/api/sessions/{sid}/turn", json={"prompt": "1"})
        assert busy.status_code == 409
        assert busy.json()["error"] == "busy"
        queued = await c.post(f"/api/sessions/{sid}/turn", json={"prompt": "2", "delivery": "queue"})
        assert queued.status_code == 202
        qid = queued.json()["queue_id"]
        assert (await c.delete(f"/api/sessions/{sid}/queue/{qid}")).status_code == 200
        gone = await c.delete(f"/api/sessions/{sid}/queue/{qid}")
        assert gone.status_code == 404
        assert gone.json()["error"] == "not_found"
        answer = await c.post(f"/api/sessions/{sid}/answer", json={"question_id": "nope", "selected": ["a"]})
        assert answer.status_code == 409
        assert answer.json()["error"] == "question_not_pending"
        bad = await c.post(f"/api/sessions/{sid}/turn", json={"prompt": 3})
        assert bad.status_code == 400
        assert bad.json()["error"] == "invalid_request"
        interrupted = await c.post(f"/api/sessions/{sid}/interrupt", json={})
        assert interrupted.json() == {"interrupted": True}
        image = await c.post(f"/api/sessions/{sid}/images", params={"name": "a.txt"}, content=b"not an image")
        assert image.status_code == 415


async def test_a_collaborators_turns_and_answers_carry_their_name(web: Web) -> None:
    sid = web.session()
    wake(web, sid)
    token = web.share(sid, "collaborator", name="ana", turns=5)
    async with _async(web, token) as c:
        prompt = 'print(ask("colour?", options=["red", "blue"]))'
        sent = await c.post(
            f"/api/sessions/{sid}/turn", json={"prompt": prompt}, headers={"X-Tui-By": '{"name": "mallory"}'}
        )
        assert sent.status_code == 202, sent.text
        asked = await events_until(c, f"/api/sessions/{sid}/events", lambda e: e.type == "question_asked")
        started = next(e for e in asked if e.type == "turn_started")
        assert started.data["by"] == {"kind": "participant", "name": "ana"}
        qid = asked[-1].data["question_id"]
        answered = await c.post(
            f"/api/sessions/{sid}/answer", json={"question_id": qid, "selected": ["blue"]}
        )
        assert answered.status_code == 200, answered.text
        done = await events_until(c, f"/api/sessions/{sid}/events", _ended, cursor=asked[-1].seq)
        resolved = next(e for e in done if e.type == "question_resolved")
        assert resolved.data["by"] == {"kind": "participant", "name": "ana"}
        assert done[-1].data["reply"] == "blue\n"
        who = (await c.get("/api/info")).json()["principal"]
        assert who["turns_left"] == 4
    async with _async(web) as owner:
        await owner.post(f"/api/sessions/{sid}/turn", json={"prompt": "print(1)"})
        seen = await events_until(owner, f"/api/sessions/{sid}/events", _ended, cursor=done[-1].seq)
        assert next(e for e in seen if e.type == "turn_started").data["by"]["kind"] == "owner"


async def test_twenty_turns_racing_against_a_limit_of_five(web: Web) -> None:
    sid = web.session()
    wake(web, sid)
    async with _async(web) as owner:
        await owner.post(f"/api/sessions/{sid}/turn", json={"prompt": RUNS_UNTIL_STOPPED})
    token = web.share(sid, "collaborator", name="racer", turns=5)
    clients = [_async(web, token) for _ in range(20)]
    try:
        replies = await asyncio.gather(
            *(
                c.post(f"/api/sessions/{sid}/turn", json={"prompt": f"print({i})", "delivery": "queue"})
                for i, c in enumerate(clients)
            )
        )
    finally:
        for c in clients:
            await c.aclose()
    codes = sorted(r.status_code for r in replies)
    assert codes == [202] * 5 + [429] * 15
    assert {r.json()["error"] for r in replies if r.status_code == 429} == {"too_many_turns"}
    person = next(p for p in ParticipantStore(WebPaths.of(web.state)).load() if p.name == "racer")
    assert person.turns_used == 5


async def test_revoking_a_share_closes_its_open_stream(web: Web) -> None:
    sid = web.session()
    wake(web, sid)
    token = web.share(sid, "viewer", name="watcher")
    async with _async(web, token) as c, c.stream("GET", f"/api/sessions/{sid}/events") as stream:
        assert stream.status_code == 200
        events = read_sse(stream)
        first = await anext(events)
        assert first.type == "worker_started"
        ParticipantStore(WebPaths.of(web.state)).revoke(sid, "watcher")
        async with asyncio.timeout(TIMEOUT):  # the stream ends (a hang guard, not a speed bound)
            async for _ in events:
                pass
        again = await c.get(f"/api/sessions/{sid}/worker")
        assert again.status_code == 401
        assert again.json()["error"] == "token_revoked"


async def test_a_participant_may_hold_three_streams_not_four(web: Web) -> None:
    sid = web.session()
    wake(web, sid)
    token = web.share(sid, "viewer", name="many")
    async with _async(web, token) as c:
        streams = [c.stream("GET", f"/api/sessions/{sid}/events") for _ in range(3)]
        opened = [await s.__aenter__() for s in streams]
        try:
            assert [r.status_code for r in opened] == [200, 200, 200]
            fourth = await c.get(f"/api/sessions/{sid}/events")
            assert fourth.status_code == 429
            assert fourth.json()["error"] == "cap_reached"
        finally:
            for s in streams:
                await s.__aexit__(None, None, None)

        async def a_place_is_free() -> bool:
            async with c.stream("GET", f"/api/sessions/{sid}/events") as r:
                return r.status_code == 200

        await eventually(a_place_is_free, "closed streams to free their places")


async def test_the_bridge_stays_up_when_a_worker_dies_and_wake_brings_one_back(web: Web) -> None:
    sid = web.session()
    first = wake(web, sid)
    async with _async(web) as c:
        os.killpg(first["pid"], signal.SIGKILL)

        async def dead() -> bool:
            return not (await c.get(f"/api/sessions/{sid}/worker")).json()["live"]

        await eventually(dead, "the bridge to see the worker dead")
        reply = await c.get(f"/api/sessions/{sid}/transcript")
        assert reply.status_code == 503
        assert reply.json()["error"] == "no_worker"
        assert (await c.get("/api/info")).status_code == 200
        woke = await c.post(f"/api/sessions/{sid}/wake", json={"wait": TIMEOUT})
        assert woke.json()["live"] is True
        assert woke.json()["epoch"] > first["epoch"]
        assert (await c.get(f"/api/sessions/{sid}/transcript")).status_code == 200


async def test_stop_restart_and_delete_with_force(web: Web) -> None:
    sid = web.session()
    first = wake(web, sid)
    async with _async(web) as c:
        stopped = await c.post(f"/api/sessions/{sid}/stop", json={})
        assert stopped.json()["stopped"] is True
        assert (await c.get(f"/api/sessions/{sid}/worker")).json()["live"] is False
        assert (await c.post(f"/api/sessions/{sid}/stop", json={})).json()["stopped"] is False
        restarted = await c.post(f"/api/sessions/{sid}/restart", json={"wait": TIMEOUT})
        assert restarted.json()["worker"]["epoch"] > first["epoch"]
        refused = await c.delete(f"/api/sessions/{sid}")
        assert refused.status_code == 409
        assert refused.json()["error"] == "worker_running"
        deleted = await c.delete(f"/api/sessions/{sid}", params={"force": 1})
        assert deleted.json() == {"id": sid, "deleted": True, "stopped": True}
        assert (await c.get(f"/api/sessions/{sid}")).status_code == 404


async def test_shutdown_ends_open_streams(web: Web) -> None:
    sid = web.session()
    wake(web, sid)
    async with _async(web) as c, c.stream("GET", f"/api/sessions/{sid}/events") as stream:
        events = read_sse(stream)
        await anext(events)
        web.proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(TIMEOUT):
            async for _ in events:
                pass
    assert await asyncio.to_thread(web.proc.wait, TIMEOUT) == 0
