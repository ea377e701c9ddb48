"""Participants: the permission matrix of remote.md, for each kind, route and token state."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tui.store import StatePaths
from tui.web.participants import Participant, ParticipantStore
from tui.web.paths import WebPaths

from .conftest import Web, until_event, wake

# (method, path under /api, body, the level the route needs, changes the session)
ROUTES: list[tuple[str, str, object, str, bool]] = [
    ("GET", "/api/info", None, "any", False),
    ("GET", "/api/sessions", None, "read", False),  # a participant sees its one session
    ("POST", "/api/sessions", {"working_directory": "/no/such/folder"}, "owner", False),
    ("GET", "/api/sessions/resolve?id={sid}", None, "read", False),
    ("GET", "/api/sessions/{sid}", None, "read", False),
    ("GET", "/api/sessions/{sid}/worker", None, "read", False),
    ("GET", "/api/sessions/{sid}/export", None, "read", False),
    ("GET", "/api/sessions/{sid}/info", None, "read", False),
    ("GET", "/api/sessions/{sid}/transcript", None, "read", False),
    ("GET", "/api/sessions/{sid}/stats", None, "read", False),
    ("GET", "/api/sessions/{sid}/events", None, "read", False),
    ("POST", "/api/sessions/{sid}/turn", {"prompt": "1"}, "write", False),
    ("POST", "/api/sessions/{sid}/answer", {"question_id": "q"}, "write", False),
    ("POST", "/api/sessions/{sid}/question/dismiss", {"question_id": "q"}, "write", False),
    ("POST", "/api/sessions/{sid}/interrupt", {}, "write", False),
    ("DELETE", "/api/sessions/{sid}/queue/q1", None, "write", False),
    ("POST", "/api/sessions/{sid}/images?name=a.png", b"\x89PNG", "write", False),
    ("POST", "/api/sessions/{sid}/model", {"model": "x"}, "owner", False),
    ("POST", "/api/sessions/{sid}/children", {"child_id": "0123456789abcdef"}, "owner", False),
    ("GET", "/api/sessions/{sid}/participants", None, "owner", False),
    ("POST", "/api/sessions/{sid}/participants", {"name": "zed", "kind": "viewer"}, "owner", False),
    ("DELETE", "/api/sessions/{sid}/participants?participant=nobody", None, "owner", False),
    ("POST", "/api/sessions/{sid}/stop", {}, "owner", True),
    ("POST", "/api/sessions/{sid}/archive", {}, "owner", True),
    ("DELETE", "/api/sessions/{sid}", None, "owner", True),
]
ALLOWED = {
    "owner": {"any", "read", "write", "owner"},
    "collaborator": {"any", "read", "write"},
    "viewer": {"any", "read"},
}


def _call(c: httpx.Client, method: str, path: str, body: object, sid: str) -> httpx.Response:
    url = path.format(sid=sid)
    if isinstance(body, bytes):
        return c.request(method, url, content=body, headers={"content-type": "image/png"})
    return c.request(method, url, json=body)


def _set(web: Web, token_name: str, **changes: object) -> None:
    store = ParticipantStore(WebPaths.of(web.state))

    def change(people: list[Participant]) -> None:
        for i, p in enumerate(people):
            if p.name == token_name:
                people[i] = p.model_copy(update=changes)

    store._change(change)


@pytest.mark.parametrize("kind", ["owner", "collaborator", "viewer"])
def test_the_matrix_for_valid_tokens(shared_web: Web, kind: str) -> None:
    sid = shared_web.session()
    token = "owner" if kind == "owner" else shared_web.share(sid, kind, name=f"{kind}-m", turns=100)
    c = shared_web.client(token)
    for method, path, body, level, destructive in ROUTES:
        target = shared_web.session() if destructive and kind == "owner" else sid
        reply = _call(c, method, path, body, target)
        error = (
            reply.json().get("error")
            if reply.headers.get("content-type", "").startswith("application/json")
            and isinstance(reply.json(), dict)
            else None
        )
        if level in ALLOWED[kind]:
            assert reply.status_code not in (401, 403, 429), (kind, method, path, reply.text)
        else:
            assert reply.status_code == 403, (kind, method, path, reply.text)
            assert error == "not_permitted"
            assert reply.json()["detail"]


@pytest.mark.parametrize("kind", ["collaborator", "viewer"])
def test_a_participant_on_another_session_is_not_permitted(shared_web: Web, kind: str) -> None:
    mine, other = shared_web.session(), shared_web.session()
    c = shared_web.client(shared_web.share(mine, kind, name=f"{kind}-o"))
    for method, path, body, level, _ in ROUTES:
        if level == "any" or "{sid}" not in path:
            continue
        reply = _call(c, method, path, body, other)
        assert reply.status_code == 403, (method, path)
        assert reply.json()["error"] == "not_permitted"
    assert c.get("/api/sessions/resolve", params={"id": other[:6]}).json()["error"] == "not_permitted"
    assert c.get("/api/sessions/resolve", params={"id": mine[:6]}).json()["id"] == mine


@pytest.mark.parametrize("kind", ["collaborator", "viewer"])
@pytest.mark.parametrize("state", ["expired", "revoked"])
def test_an_expired_or_revoked_token_is_refused_everywhere(shared_web: Web, kind: str, state: str) -> None:
    sid = shared_web.session()
    name = f"{kind}-{state}"
    c = shared_web.client(shared_web.share(sid, kind, name=name, ttl="1h"))
    assert c.get("/api/info").status_code == 200
    past = datetime.now(UTC) - timedelta(seconds=1)
    _set(shared_web, name, **({"expires_at": past} if state == "expired" else {"revoked_at": past}))
    for method, path, body, _, _ in ROUTES:
        reply = _call(c, method, path, body, sid)
        assert reply.status_code == 401, (method, path)
        assert reply.json()["error"] == f"token_{state}"
        assert "ask its owner" in reply.json()["detail"]


def test_a_collaborator_over_its_turn_limit_gets_too_many_turns(shared_web: Web) -> None:
    sid = shared_web.session()
    c = shared_web.client(shared_web.share(sid, "collaborator", name="capped", turns=0))
    reply = c.post(f"/api/sessions/{sid}/turn", json={"prompt": "print(1)"})
    assert reply.status_code == 429
    assert reply.json()["error"] == "too_many_turns"
    # Reading, answering and interrupting are not turns: still allowed.
    assert c.get(f"/api/sessions/{sid}").status_code == 200
    assert c.post(f"/api/sessions/{sid}/interrupt", json={}).status_code not in (401, 403, 429)


def test_info_tells_a_participant_who_it_is(shared_web: Web) -> None:
    sid = shared_web.session()
    c = shared_web.client(shared_web.share(sid, "collaborator", name="ana", turns=4, ttl="2h"))
    who = c.get("/api/info").json()["principal"]
    assert who["kind"] == "collaborator"
    assert who["name"] == "ana"
    assert who["session_id"] == sid
    assert who["turns_left"] == 4
    assert who["expires_at"] is not None


def test_share_and_revoke_through_the_routes_take_effect_at_once(web: Web) -> None:
    sid = web.session()
    owner = web.client()
    made = owner.post(f"/api/sessions/{sid}/participants", json={"name": "bo", "kind": "viewer", "ttl": "2h"})
    assert made.status_code == 201
    token = made.json()["token"]
    assert web.url in made.json()["command"]
    guest = web.client(token)
    assert guest.get(f"/api/sessions/{sid}").status_code == 200
    listed = owner.get(f"/api/sessions/{sid}/participants").json()["participants"]
    assert [(p["name"], p["kind"], p["state"]) for p in listed] == [("bo", "viewer", "active")]
    assert "digest" not in listed[0]
    again = owner.post(f"/api/sessions/{sid}/participants", json={"name": "bo", "kind": "viewer"})
    assert again.status_code == 400
    revoked = owner.delete(f"/api/sessions/{sid}/participants", params={"participant": "bo"})
    assert [p["name"] for p in revoked.json()["revoked"]] == ["bo"]
    assert guest.get(f"/api/sessions/{sid}").json()["error"] == "token_revoked"
    # Both are said in the session's journal, where its chain covers them (`tui audit`).
    journal = StatePaths(web.state).session(sid).journal.read_text().splitlines()
    said = [json.loads(line) for line in journal if '"share_changed"' in line]
    assert [(e["change"], e["name"], e["kind"], e["by"]["kind"]) for e in said] == [
        ("made", "bo", "viewer", "owner"),
        ("revoked", "bo", "viewer", "owner"),
    ]


def test_the_token_is_stored_only_as_a_digest(web: Web) -> None:
    sid = web.session()
    token = web.share(sid, "viewer", name="dee")
    files = b"".join(p.read_bytes() for p in (web.state / "web").iterdir() if p.is_file())
    assert token.encode() not in files
    assert web.token.encode() not in files
    assert oct((web.state / "web" / "participants.json").stat().st_mode & 0o777) == "0o600"


def test_a_note_that_starts_a_turn_spends_one_of_a_collaborators_turns(web: Web) -> None:
    sid = web.session()
    wake(web, sid)
    c = web.client(web.share(sid, "collaborator", name="noter", turns=1))
    s = f"/api/sessions/{sid}"
    started = c.post(f"{s}/notes", json={"text": "the build is green", "now": True})
    assert started.status_code == 200, started.text
    assert started.json()["turn_id"] is not None
    until_event(c, s, started.json()["seq"], "turn_ended")
    assert c.get("/api/info").json()["principal"]["turns_left"] == 0
    # Its one turn is spent: a note that would start another is refused; one for later is not.
    again = c.post(f"{s}/notes", json={"text": "and again", "now": True})
    assert again.status_code == 429 and again.json()["error"] == "too_many_turns", again.text
    later = c.post(f"{s}/notes", json={"text": "read this next time"})
    assert later.status_code == 200 and later.json()["turn_id"] is None
    assert c.post(f"{s}/turn", json={"prompt": "print(1)"}).status_code == 429


def test_a_child_started_in_a_collaborators_turn_spends_one_of_its_turns(web: Web) -> None:
    sid = web.session()
    wake(web, sid)
    c = web.client(web.share(sid, "collaborator", name="parent-of-two", turns=3))
    s = f"/api/sessions/{sid}"
    grandchild = "print(delegate('print(6 * 7)').strip())"
    program = (
        f"for prompt in ({grandchild!r}, 'print(1)'):\n    try:\n        print(delegate(prompt).strip())\n"
        "    except Exception as exc:\n        print('refused:', exc)\n"
    )
    sent = c.post(f"{s}/turn", json={"prompt": program})
    assert sent.status_code == 202, sent.text
    until_event(c, s, sent.json()["seq"], "turn_ended")
    reply = c.get(f"{s}/transcript").json()["turns"][-1]["reply"]
    # The turn spent one, its first child another and that child's own child the last: the
    # second child is refused.
    assert reply.splitlines() == [
        "42",
        "refused: parent-of-two has used all 3 turns of this share; "
        "ask the session's owner for a new share with more `--turns`",
    ], reply
    assert c.get("/api/info").json()["principal"]["turns_left"] == 0
