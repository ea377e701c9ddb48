"""What every request meets first: the token, the Host, the Origin, the body's size and form."""

from __future__ import annotations

import httpx
import pytest

from .conftest import Web


def test_info_names_the_app_its_features_and_the_owner(shared_web: Web) -> None:
    reply = shared_web.client().get("/api/info")
    assert reply.status_code == 200
    body = reply.json()
    assert body["app"] == "tui-web"
    assert {"session_commands", "remote_attach", "participants"} <= set(body["features"])
    assert body["principal"]["kind"] == "owner"
    assert body["principal"]["session_id"] is None


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": "Basic abc"},
        {"Authorization": "Bearer"},
    ],
    ids=["no token", "wrong token", "other scheme", "empty bearer"],
)
def test_without_a_good_token_every_route_is_unauthorized(shared_web: Web, headers: dict[str, str]) -> None:
    c = shared_web.client(token=None, headers=headers)
    for method, path in [("GET", "/api/info"), ("GET", "/api/sessions"), ("POST", "/api/sessions")]:
        reply = c.request(method, path)
        assert reply.status_code == 401, (method, path)
        assert reply.json()["error"] == "unauthorized"
        assert "Authorization: Bearer" in reply.json()["detail"] or "token" in reply.json()["detail"]


def test_a_token_in_the_url_is_ignored(shared_web: Web) -> None:
    c = shared_web.client(token=None)
    for query in ({"token": shared_web.token}, {"access_token": shared_web.token}):
        reply = c.get("/api/info", params=query)
        assert reply.status_code == 401
        assert reply.json()["error"] == "unauthorized"


def test_a_wrong_host_is_misdirected(shared_web: Web) -> None:
    c = shared_web.client()
    port = shared_web.url.rsplit(":", 1)[1]
    for host in ("evil.example", f"evil.example:{port}", "127.0.0.1:1", "10.0.0.1"):
        reply = c.get("/api/info", headers={"Host": host})
        assert reply.status_code == 421, host
        assert reply.json()["error"] == "misdirected"
        assert shared_web.url in reply.json()["detail"]
    assert c.get("/api/info", headers={"Host": f"localhost:{port}"}).status_code == 200


def test_a_foreign_origin_is_forbidden(shared_web: Web) -> None:
    c = shared_web.client()
    reply = c.get("/api/info", headers={"Origin": "http://evil.example"})
    assert reply.status_code == 403
    assert reply.json()["error"] == "forbidden"
    assert "access-control-allow-origin" not in reply.headers
    same = c.get("/api/info", headers={"Origin": shared_web.url})
    assert same.status_code == 200
    assert "access-control-allow-origin" not in same.headers


def test_a_body_over_4_mib_gets_413(shared_web: Web) -> None:
    sid = shared_web.session()
    c = shared_web.client()
    big = b"x" * (10 * 1024 * 1024)
    for path in ("/api/sessions", f"/api/sessions/{sid}/turn", f"/api/sessions/{sid}/images"):
        reply = c.post(path, content=big, headers={"content-type": "application/json"})
        assert reply.status_code == 413, path
        assert reply.json()["error"] == "too_large"


def test_malformed_json_is_invalid_request(shared_web: Web) -> None:
    sid = shared_web.session()
    c = shared_web.client()
    for path in ("/api/sessions", f"/api/sessions/{sid}/wake", f"/api/sessions/{sid}/turn"):
        reply = c.post(path, content=b"{not json", headers={"content-type": "application/json"})
        assert reply.status_code == 400, path
        assert reply.json()["error"] == "invalid_request"
    reply = c.post("/api/sessions", json={"wait": "soon"})
    assert reply.status_code == 400
    assert reply.json()["error"] == "invalid_request"
    assert "wait" in reply.json()["detail"]


def test_unknown_routes_and_sessions_are_not_found(shared_web: Web) -> None:
    c = shared_web.client()
    reply = c.get("/api/nothing-here")
    assert reply.status_code == 404
    assert reply.json()["error"] == "not_found"
    reply = c.get("/api/sessions/0123456789abcdef")
    assert reply.status_code == 404
    assert reply.json()["error"] == "not_found"
    reply = c.get("/api/sessions/0123456789abcdef/transcript")
    assert reply.status_code == 404
    assert reply.json()["error"] == "not_found"


def test_a_session_without_a_worker_answers_no_worker_on_forwarded_routes(shared_web: Web) -> None:
    sid = shared_web.session()
    c = shared_web.client()
    for method, path in [
        ("GET", "info"),
        ("GET", "events"),
        ("GET", "transcript"),
        ("GET", "stats"),
        ("POST", "turn"),
        ("POST", "interrupt"),
    ]:
        body = {"prompt": "1"} if path == "turn" else {}
        reply = c.request(method, f"/api/sessions/{sid}/{path}", json=body if method == "POST" else None)
        assert reply.status_code == 503, path
        assert reply.json()["error"] == "no_worker"
        assert "wake" in reply.json()["detail"]
    worker = c.get(f"/api/sessions/{sid}/worker").json()
    assert worker["live"] is False


def test_prefixes_resolve_and_ambiguity_lists_the_matches(web: Web) -> None:
    ids = [web.session() for _ in range(20)]
    c = web.client()
    one = ids[0]
    reply = c.get("/api/sessions/resolve", params={"id": one[:10]})
    assert reply.status_code == 200
    assert reply.json()["id"] == one
    assert c.get(f"/api/sessions/{one[:10]}").json()["id"] == one
    firsts: dict[str, list[str]] = {}
    for sid in ids:
        firsts.setdefault(sid[0], []).append(sid)
    shared = next((v for v in firsts.values() if len(v) > 1), None)
    if shared is not None:
        reply = c.get("/api/sessions/resolve", params={"id": shared[0][0]})
        assert reply.status_code == 409
        assert reply.json()["error"] == "ambiguous_id"
        assert sorted(shared) == sorted(reply.json()["matches"])
    reply = c.get("/api/sessions/resolve", params={"id": "zzzz"})
    assert reply.status_code == 404


def test_session_list_show_archive_and_delete(web: Web) -> None:
    a, b = web.session(), web.session()
    c = web.client()
    listed = c.get("/api/sessions").json()
    assert {row["id"] for row in listed} == {a, b}
    assert all(row["state"] == "stopped" and row["live"] is False for row in listed)
    assert c.post(f"/api/sessions/{a}/archive").json()["archived"] is True
    assert [row["id"] for row in c.get("/api/sessions").json()] == [b]
    assert {row["id"] for row in c.get("/api/sessions", params={"archived": 1}).json()} == {a, b}
    assert c.get(f"/api/sessions/{a}").json()["state"] == "archived"
    viewer = web.client(web.share(a, "viewer", name="vee"))
    assert viewer.post(f"/api/sessions/{a}/unarchive").status_code == 403
    assert c.post(f"/api/sessions/{a}/unarchive").json()["archived"] is False
    assert {row["id"] for row in c.get("/api/sessions").json()} == {a, b}
    assert c.delete(f"/api/sessions/{a}").json()["deleted"] is True
    assert c.get(f"/api/sessions/{a}").status_code == 404


def test_stopping_server_answers_server_stopping() -> None:
    import asyncio
    import tempfile
    from pathlib import Path

    from tui.store import StatePaths
    from tui.web.app import WebBridge, create_app

    async def main() -> None:
        with tempfile.TemporaryDirectory(prefix="tui-", dir="/tmp") as d:
            bridge = WebBridge(StatePaths(Path(d)), "0" * 64, port=80)
            app = create_app(bridge)
            bridge.begin_stop()
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
                reply = await c.get("/api/info")
            assert reply.status_code == 503
            assert reply.json()["error"] == "server_stopping"

    asyncio.run(main())
