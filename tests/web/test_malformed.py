"""Malformed requests to `tui web` (a viewer's token is enough to send them): each is a JSON 4xx
with its code, never a 500, a redirect or plain text."""

from __future__ import annotations

import httpx

from .conftest import Web, wake


def _refused(reply: httpx.Response, status: int, code: str) -> None:
    assert reply.status_code == status, (reply.status_code, reply.text[:300])
    assert reply.headers["content-type"] == "application/json"
    assert reply.json()["error"] == code


def test_malformed_requests_get_json_refusals(web: Web) -> None:
    sid = web.session()
    wake(web, sid)
    viewer = web.client(web.share(sid, "viewer"))
    owner = web.client()
    events = f"/api/sessions/{sid}/events"
    for last_id in ("☃".encode(), b"1_0", "²".encode(), b"9" * 4301, b"1" * 5000):
        _refused(viewer.get(events, headers={"Last-Event-ID": last_id}), 400, "invalid_request")
    # A cursor given under another name is refused, naming it, not followed from 0.
    with viewer.stream("GET", events, params={"after": "abc"}) as after:  # it was followed from 0
        assert after.status_code == 400
        after.read()
    _refused(after, 400, "invalid_request")
    assert after.json()["field"] == "after" and "cursor=N" in after.json()["detail"]
    _refused(owner.delete(f"/api/sessions/{sid}/queue/%E2%98%83%00"), 404, "not_found")
    _refused(owner.delete(f"/api/sessions/{sid}/queue/{'q' * 10_000}"), 404, "not_found")
    _refused(owner.get("/api/sessions/"), 404, "not_found")
    _refused(owner.get("/api/sessions", headers={"X-Note": "n" * 100_000}), 413, "too_large")
    _refused(owner.post(f"/api/sessions/{sid}/turn", content=b"\r"), 400, "invalid_request")
    _refused(owner.post(f"/api/sessions/{sid}/interrupt", content=b" "), 400, "invalid_request")
    assert web.proc.poll() is None
