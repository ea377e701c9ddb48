"""The web bridge's session commands refuse what they cannot do, and only that, at once."""

from __future__ import annotations

from .conftest import TIMEOUT, Web


def test_a_short_wake_that_started_the_worker_answers_2xx(web: Web) -> None:
    sid = web.session()
    reply = web.client().post(f"/api/sessions/{sid}/wake", json={"wait": 0})
    assert reply.status_code == 200, reply.text
    worker = reply.json()
    assert worker["live"] or worker["starting"], worker
    again = web.client().post(f"/api/sessions/{sid}/wake", json={"wait": TIMEOUT})
    assert again.status_code == 200 and again.json()["live"], again.text


def test_a_boolean_is_not_a_number_of_seconds(web: Web) -> None:
    sid = web.session()
    for path in (f"/api/sessions/{sid}/wake", f"/api/sessions/{sid}/restart", f"/api/sessions/{sid}/stop"):
        reply = web.client().post(path, json={"wait": True})
        assert reply.status_code == 400, (path, reply.text)
        assert reply.json()["error"] == "invalid_request" and reply.json()["field"] == "wait"
    share = web.client().post(
        f"/api/sessions/{sid}/participants", json={"name": "a", "kind": "collaborator", "turns": True}
    )
    assert share.status_code == 400 and share.json()["field"] == "turns"
