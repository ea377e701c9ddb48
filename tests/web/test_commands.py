"""`tui web`, `tui remote add|list|remove` and `tui share` as a person types them."""

from __future__ import annotations

import contextlib
import io
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from tui.cli import main

from .conftest import Web


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def tui(state: Path, *args: str) -> Ran:
    """Run one command line in this process, as `tui --state-dir STATE ARGS…`."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["--state-dir", str(state), *args])
        except SystemExit as exc:
            code = int(exc.code or 0)
    return Ran(code, out.getvalue(), err.getvalue())


def test_web_on_a_loopback_address_says_it_serves_this_machine_only(web: Web) -> None:
    """`tui web` listens on 127.0.0.1 by default: it names no address another machine cannot reach,
    and says how to serve others."""
    assert web.proc.stdout is not None
    said = "".join(web.proc.stdout.readline() for _ in range(3))  # the token's line, this one, Ctrl+C
    assert "this machine only" in said and "`tui web --host ADDR --token-file FILE`" in said, said
    assert "on another machine" not in said and "stop with Ctrl+C" in said


def test_share_prints_the_guests_line_and_the_token_works(web: Web, tmp_path: Path) -> None:
    sid = web.session()
    token_file = tmp_path / "guest.token"
    out = tui(
        web.state,
        "share",
        sid[:8],
        "--name",
        "ana",
        "--kind",
        "collaborator",
        "--ttl",
        "2h",
        "--turns",
        "3",
        "--token-file",
        str(token_file),
    )
    assert out.returncode == 0, out.stderr
    assert f"tui remote add NAME {web.url} --token-file F" in out.stdout
    assert f"tui --remote NAME attach {sid[:8]}" in out.stdout
    assert oct(token_file.stat().st_mode & 0o777) == "0o600"
    token = token_file.read_text().strip()
    assert token not in out.stdout
    who = web.client(token).get("/api/info").json()["principal"]
    assert (who["kind"], who["name"], who["session_id"], who["turns_left"]) == ("collaborator", "ana", sid, 3)

    listed = tui(web.state, "share", "list", sid[:8])
    assert listed.returncode == 0
    row = listed.stdout.splitlines()[1].split()
    assert row[:3] == ["ana", "collaborator", "active"] and "0/3" in row, listed.stdout

    revoked = tui(web.state, "share", "revoke", sid[:8], "--participant", "ana")
    assert revoked.returncode == 0
    assert "revoked ana" in revoked.stdout
    reply = web.client(token).get("/api/info")
    assert reply.status_code == 401
    assert reply.json()["error"] == "token_revoked"


def test_share_without_a_token_file_shows_the_token_once(web: Web) -> None:
    sid = web.session()
    out = tui(web.state, "share", sid, "--name", "bo", "--kind", "viewer")
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("token (shown once"))
    token = line.rsplit(" ", 1)[1]
    assert web.client(token).get(f"/api/sessions/{sid}").status_code == 200


def test_a_share_without_ttl_says_how_it_ends(web: Web) -> None:
    sid = web.session()
    out = tui(web.state, "share", sid[:8], "--name", "bo b", "--kind", "viewer")
    assert out.returncode == 0, out.stderr
    assert "expires never" in out.stdout
    assert f"it lasts until revoked: `tui share revoke {sid[:8]} --participant 'bo b'` ends it" in out.stdout
    timed = tui(web.state, "share", sid[:8], "--name", "cy", "--kind", "viewer", "--ttl", "2h")
    assert "lasts until revoked" not in timed.stdout


def test_remote_is_refused_where_it_means_nothing(tmp_path: Path) -> None:
    for args in (["web", "--remote", "lab"], ["remote", "list", "--remote", "lab"]):
        out = tui(tmp_path, *args)
        assert out.returncode == 2 and "unrecognized arguments: --remote" in out.stderr, out.stderr
    before = tui(tmp_path, "--remote", "lab", "remote", "list")
    assert before.returncode == 2 and "`tui remote` works on this machine" in before.stderr


def test_web_help_says_what_each_option_is(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["web", "--help"])
    text = capsys.readouterr().out
    assert "--host ADDR" in text and "the address to listen on" in text
    assert "--remote" not in text


def test_share_refuses_what_makes_no_sense(web: Web) -> None:
    sid = web.session()
    assert tui(web.state, "share", sid).returncode == 2
    bad = tui(web.state, "share", sid, "--name", "x", "--kind", "viewer", "--turns", "3")
    assert bad.returncode == 2 and "collaborator" in bad.stderr
    ttl = tui(web.state, "share", sid, "--name", "x", "--kind", "viewer", "--ttl", "soon")
    assert ttl.returncode == 2 and "2h" in ttl.stderr  # a bad option: exit 2, as a ttl without its unit
    missing = tui(web.state, "share", "ffffffff", "--name", "x", "--kind", "viewer")
    assert missing.returncode == 1 and "tui sessions" in missing.stderr


def test_remote_add_checks_the_server_and_keeps_no_token(web: Web, tmp_path: Path) -> None:
    client_state = tmp_path / "client"
    client_state.mkdir()
    token_file = tmp_path / "owner.token"
    token_file.write_text(web.token + "\n")
    out = tui(client_state, "remote", "add", "lab", web.url, "--token-file", str(token_file))
    assert out.returncode == 0, out.stderr
    assert "as owner" in out.stdout
    toml = (client_state / "remotes.toml").read_text()
    assert web.url in toml and str(token_file) in toml
    assert web.token not in toml
    listed = tui(client_state, "remote", "list")
    header, row = listed.stdout.splitlines()
    assert header.split() == ["NAME", "URL", "TOKEN", "FILE"]
    assert row.split() == ["lab", web.url, str(token_file)]
    assert header.index("URL") == row.index(web.url) and "\t" not in listed.stdout
    # A name not set up: said so, with the names there are (not how to add it).
    nope = tui(client_state, "remote", "remove", "nope")
    assert nope.returncode == 1 and "tui remote add" not in nope.stderr, nope.stderr
    assert "no remote named 'nope' to remove: the remotes are lab (`tui remote list`" in nope.stderr
    assert tui(client_state, "remote", "remove", "lab").returncode == 0
    assert "lab" not in tui(client_state, "remote", "list").stdout


def test_remote_add_refuses_a_wrong_token(web: Web, tmp_path: Path) -> None:
    token_file = tmp_path / "bad.token"
    token_file.write_text("not-the-token\n")
    out = tui(tmp_path, "remote", "add", "lab", web.url, "--token-file", str(token_file))
    assert out.returncode == 6
    assert "token" in out.stderr
    assert not (tmp_path / "remotes.toml").exists()


@pytest.fixture
def old_server() -> Iterator[str]:
    """An HTTP server that says it is a tui web without the features the commands need."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"app": "tui-web", "version": "0.0.1", "features": []}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_remote_add_refuses_a_server_too_old(old_server: str, tmp_path: Path) -> None:
    token_file = tmp_path / "t"
    token_file.write_text("x\n")
    out = tui(tmp_path, "remote", "add", "old", old_server, "--token-file", str(token_file))
    assert out.returncode == 1
    assert "too old: update it there" in out.stderr


def test_remote_add_says_when_nothing_answers(tmp_path: Path) -> None:
    token_file = tmp_path / "t"
    token_file.write_text("x\n")
    out = tui(tmp_path, "remote", "add", "gone", "http://127.0.0.1:9", "--token-file", str(token_file))
    assert out.returncode == 1
    assert "tui web" in out.stderr


def test_web_refuses_a_lan_address_without_a_token(tmp_path: Path) -> None:
    out = tui(tmp_path, "web", "--host", "0.0.0.0", "--port", "0")
    assert out.returncode == 2
    assert "--token-file" in out.stderr


def test_web_writes_server_json_and_removes_it_on_stop(tmp_path: Path) -> None:
    from .conftest import start_web

    w = start_web(tmp_path)
    server = json.loads((tmp_path / "web" / "server.json").read_text())
    assert server["url"] == w.url
    assert server["pid"] == w.proc.pid
    assert oct((tmp_path / "owner.token").stat().st_mode & 0o777) == "0o600"
    assert w.stop() == 0
    assert not (tmp_path / "web" / "server.json").exists()


def test_web_refuses_a_lan_address_when_the_token_was_only_printed(tmp_path: Path) -> None:
    from tui.web.paths import WebPaths
    from tui.web.server import setup_owner_token

    printed = setup_owner_token(WebPaths.of(tmp_path), None)
    assert printed.token is not None and printed.written_to is None
    out = tui(tmp_path, "web", "--host", "0.0.0.0", "--port", "0")
    assert out.returncode == 2
    assert "--token-file" in out.stderr


def test_web_refuses_a_weak_or_readable_owner_token_file(tmp_path: Path) -> None:
    token_file = tmp_path / "owner.token"
    token_file.write_text("a\n")
    token_file.chmod(0o600)
    weak = tui(tmp_path, "web", "--port", "0", "--token-file", str(token_file))
    assert weak.returncode == 2 and "too weak" in weak.stderr and str(token_file) in weak.stderr
    token_file.write_text("Zq3-vT9_kLm2Xw8RpA5sNc7YhJ4eFgB6uDiO1\n")
    token_file.chmod(0o644)
    readable = tui(tmp_path, "web", "--port", "0", "--token-file", str(token_file))
    assert readable.returncode == 2 and "read by others" in readable.stderr and "chmod 600" in readable.stderr
    assert not (tmp_path / "web" / "owner.sha256").exists()


def test_share_list_or_revoke_without_an_id_asks_for_one(tmp_path: Path) -> None:
    for action in ("list", "revoke"):
        out = tui(tmp_path, "share", action)
        assert out.returncode == 2, out
        assert f"tui share {action} ID" in out.stderr and "tui sessions" in out.stderr
        assert "no session matches" not in out.stderr
