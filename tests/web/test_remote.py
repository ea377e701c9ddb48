"""`tui --remote NAME …`: the session commands and the attach link through a real web bridge."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from helpers import wait_until

import tui.errors
from tui.access.remote import RemoteAccess
from tui.cli import main
from tui.errors import Refused
from tui.link.base import Gone, Live, Reconnecting
from tui.link.follow import Follower
from tui.link.remote import WebClient
from tui.protocol import TurnEnded
from tui.store import StatePaths
from tui.store.chain import GENESIS, chain_path, link
from tui.store.remotes import Remote, add_remote
from tui.web.participants import ParticipantStore
from tui.web.paths import WebPaths

from .conftest import TIMEOUT, Web, until_event, wake


@dataclass
class Ran:
    code: int
    out: str
    err: str


@dataclass
class Lab:
    """A web bridge (the remote machine's state dir) and a client state dir that knows it as `lab`."""

    web: Web
    client: Path
    capfd: pytest.CaptureFixture[str]

    def here(self, *args: str) -> Ran:
        """A command on the web bridge's machine."""
        return self._run(self.web.state, *args)

    def there(self, *args: str, remote: str = "lab") -> Ran:
        """The same command from the client machine, through the web bridge."""
        return self._run(self.client, "--remote", remote, *args)

    def _run(self, state: Path, *args: str) -> Ran:
        self.capfd.readouterr()
        try:
            code = main(["--state-dir", str(state), *args])
        except SystemExit as exc:
            code = int(exc.code or 0)
        got = self.capfd.readouterr()
        return Ran(code, got.out, got.err)

    def add_guest(self, name: str, token: str) -> None:
        path = self.client / f"{name}.token"
        path.write_text(token + "\n")
        add_remote(StatePaths(self.client), Remote(name, self.web.url, str(path)))


@pytest.fixture
def lab(web: Web, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> Iterator[Lab]:
    client = tmp_path / "client"
    client.mkdir()
    token_file = client / "lab.token"
    token_file.write_text(web.token + "\n")
    add_remote(StatePaths(client), Remote("lab", web.url, str(token_file)))
    yield Lab(web, client, capfd)


def _remote_spelling(text: str) -> str:
    return text.replace("`tui ", "`tui --remote lab ")


def test_sessions_lists_the_same_rows_remote_and_local(lab: Lab) -> None:
    a, b = lab.web.session(), lab.web.session()
    wake(lab.web, a)
    here = lab.here("sessions", "--json")
    there = lab.there("sessions", "--json")
    assert here.code == there.code == 0
    # What a live worker measures now (its memory, how long it has been idle) moves between asks.
    moving = ("memory", "idle_seconds", "quiet_seconds")

    def steady(rows: list[dict[str, object]]) -> list[dict[str, object]]:
        return [{k: v for k, v in row.items() if k not in moving} for row in rows]

    assert steady(json.loads(there.out)) == steady(json.loads(here.out))
    live = next(row for row in json.loads(there.out) if row["id"] == a)
    assert isinstance(live["memory"], int) and isinstance(live["idle_seconds"], float)
    assert {row["id"] for row in json.loads(here.out)} == {a, b}
    table = lab.there("sessions")
    assert a[:8] in table.out and b[:8] in table.out


def test_send_wait_gives_the_same_reply_remote_and_local(lab: Lab) -> None:
    here = lab.here("send", "--new", "print(2 + 3)", "--wait", "--timeout", str(TIMEOUT))
    there = lab.there("send", "--new", "print(2 + 3)", "--wait", "--timeout", str(TIMEOUT))
    assert (here.code, here.out) == (there.code, there.out) == (0, "5\n")
    sid = there.err.split()[0]
    again = lab.there("send", sid[:8], "print('again')", "--wait", "--timeout", str(TIMEOUT))
    assert (again.code, again.out) == (0, "again\n")
    row = next(r for r in json.loads(lab.here("sessions", "--json").out) if r["id"] == sid)
    assert row["folder"] == str(lab.web.state)


def test_refusals_read_the_same_remote_and_local(lab: Lab) -> None:
    for args in (("stop", "ffffeeee"), ("archive", "zz"), ("answer", "ffffeeee", "--option", "1")):
        here, there = lab.here(*args), lab.there(*args)
        assert here.code == there.code == 1, args
        assert there.err == _remote_spelling(here.err), args
    sid = lab.web.session()
    wake(lab.web, sid)
    here, there = lab.here("delete", sid[:8]), lab.there("delete", sid[:8])
    assert here.code == there.code == 1
    assert there.err == _remote_spelling(here.err)
    assert f"`tui --remote lab delete {sid[:8]} --force`" in there.err
    no_question = lab.there("dismiss", sid[:8])
    assert no_question.code == lab.here("dismiss", sid[:8]).code


def test_stop_archive_and_delete_through_the_remote(lab: Lab) -> None:
    sid = lab.web.session()
    wake(lab.web, sid)
    stopped = lab.there("stop", sid[:8])
    assert stopped.code == 0
    assert f"stopped session {sid[:8]}: what it held in memory" in stopped.err and "variables" in stopped.err
    assert f"`tui --remote lab attach {sid[:8]}` resumes it" in stopped.err
    again = lab.there("stop", sid[:8])
    assert "had no live worker" in again.err
    archived = lab.there("archive", sid[:8])
    assert archived.code == 0 and "tui --remote lab sessions --all" in archived.err
    assert json.loads(lab.there("sessions", "--json").out) == []
    back = lab.there("unarchive", sid[:8])
    assert back.code == 0 and f"`tui --remote lab attach {sid[:8]}` resumes it" in back.err, back.err
    assert [row["id"] for row in json.loads(lab.there("sessions", "--json").out)] == [sid]
    assert lab.there("delete", sid[:8]).code == 0
    assert json.loads(lab.there("sessions", "--all", "--json").out) == []


def test_a_note_through_the_remote_names_who_left_it_and_a_viewer_may_not(lab: Lab) -> None:
    sid = lab.web.session()
    wake(lab.web, sid)
    lab.add_guest("viewer", lab.web.share(sid, "viewer", name="vee"))
    lab.add_guest("collab", lab.web.share(sid, "collaborator", name="cee", turns=1))
    refused = lab.there("note", sid[:8], "hello", remote="viewer")
    assert refused.code == 6 and "viewer" in refused.err, refused.err
    left = lab.there("note", sid[:8], "from afar", "--source", "ci", remote="collab")
    assert left.code == 0, left.err
    assert f"session {sid[:8]} reads it with its next turn" in left.err
    mine = lab.there("note", sid[:8], "mine too")
    assert mine.code == 0, mine.err
    read = lab.there("send", sid[:8], "print([n['text'] for n in notes()])", "--wait")
    assert (read.code, read.out) == (0, "['from afar', 'mine too']\n"), read.err
    shown = lab.there("transcript", sid[:8]).out
    assert "note from cee (participant) via ci: from afar" in shown


def test_context_sources_through_the_remote_are_the_owners_and_a_push_needs_write(lab: Lab) -> None:
    sid = lab.web.session()
    wake(lab.web, sid)
    lab.add_guest("viewer", lab.web.share(sid, "viewer", name="vee"))
    lab.add_guest("collab", lab.web.share(sid, "collaborator", name="cee"))
    assert lab.there("context", "add", sid[:8], "ci", "--push", remote="collab").code == 6
    added = lab.there("context", "add", sid[:8], "ci", "--push", "--why", "CI status")
    assert added.code == 0, added.err
    assert lab.there("context", "remove", sid[:8], "ci", remote="collab").code == 6
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdin", io.StringIO("green\n"))
        assert lab.there("context", "push", sid[:8], "ci", remote="viewer").code == 6
        patch.setattr("sys.stdin", io.StringIO("green\n"))
        pushed = lab.there("context", "push", sid[:8], "ci", remote="collab")
        assert pushed.code == 0, pushed.err
    listed = lab.there("context", "list", sid[:8], remote="viewer")
    assert listed.code == 0 and listed.out.startswith("NAME\tKIND"), listed.err
    assert listed.out.splitlines()[1].split("\t")[:2] == ["ci", "push"]
    assert listed.out.splitlines()[1].split("\t")[3] == "6"  # "green\n"
    removed = lab.there("context", "remove", sid[:8], "ci")
    assert removed.code == 0, removed.err
    assert "ci" not in lab.there("context", "list", sid[:8]).out.splitlines()[1:]


def test_a_guest_may_do_what_its_share_allows_and_nothing_after_a_revoke(lab: Lab) -> None:
    sid = lab.web.session()
    wake(lab.web, sid)
    lab.add_guest("viewer", lab.web.share(sid, "viewer", name="vee"))
    lab.add_guest("collab", lab.web.share(sid, "collaborator", name="cee", turns=1))
    refused = lab.there("send", sid[:8], "print(1)", remote="viewer")
    assert refused.code == 6
    assert "viewer" in refused.err
    sent = lab.there("send", sid[:8], "print(7)", "--wait", "--timeout", str(TIMEOUT), remote="collab")
    assert (sent.code, sent.out) == (0, "7\n")
    over = lab.there("send", sid[:8], "print(8)", remote="collab")
    assert over.code == 6
    assert "turns" in over.err
    listed = lab.there("sessions", "--json", remote="viewer")
    assert listed.code == 0, listed.err
    assert [row["id"] for row in json.loads(listed.out)] == [sid], "a guest sees the one session shared"
    ParticipantStore(WebPaths.of(lab.web.state)).revoke(sid)
    gone = lab.there("stop", sid[:8], remote="viewer")
    assert gone.code == 6
    assert "revoked" in gone.err


async def test_the_remote_link_follows_across_a_killed_worker_and_ends_on_revoke(web: Web) -> None:
    sid = web.session()
    token = web.share(sid, "collaborator", name="ana")
    access = RemoteAccess(Remote("lab", web.url, ""), web=WebClient("lab", web.url, token))
    link = await access.link(sid, client_id="tui:test:1")
    assert link.where == "remote lab"
    assert link.paths_complete is False
    assert link.command("attach", sid[:8]) == f"tui --remote lab attach {sid[:8]}"
    follower = Follower(link)
    seen: list[object] = []
    try:
        async with asyncio.timeout(TIMEOUT * 2):
            await link.send_turn("print('one')", request_id="r1")
            async for item in follower:
                seen.append(item)
                if isinstance(item, TurnEnded):
                    break
            assert item.reply == "one\n"  # type: ignore[attr-defined]
            pid = (await access.web.request("GET", f"/api/sessions/{sid}/worker"))["pid"]
            os.killpg(pid, signal.SIGKILL)
            states: list[object] = []
            async for item in follower:
                if isinstance(item, Reconnecting | Live):
                    states.append(item)
                if isinstance(item, Live) and any(isinstance(s, Reconnecting) for s in states):
                    break
            ParticipantStore(WebPaths.of(web.state)).revoke(sid, "ana")
            async for item in follower:
                if isinstance(item, Gone):
                    break
        assert isinstance(item, Gone)
        assert item.exit_code == 6
        assert "revoked" in item.reason
    finally:
        await follower.aclose()
        await link.close()
        await access.web.close()


async def test_a_stopping_web_bridge_is_asked_again_after_a_second() -> None:
    calls: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if request.url.path == "/api/info":
            return httpx.Response(
                200, json={"app": "tui-web", "features": ["session_commands", "remote_attach"]}
            )
        if len(calls) < 3:
            return httpx.Response(503, json={"error": "server_stopping", "detail": "shutting down"})
        return httpx.Response(200, json=[])

    web = WebClient("lab", "http://lab:7433", "t", transport=httpx.MockTransport(answer))
    access = RemoteAccess(Remote("lab", "http://lab:7433", ""), web=web)
    assert await access.list_sessions() == []
    assert calls == ["/api/info", "/api/sessions", "/api/sessions"]
    await web.close()


async def test_a_refused_token_raises_the_same_exception_with_exit_6() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": "token_expired", "detail": "expired; ask its owner"})

    web = WebClient("lab", "http://lab:7433", "t", transport=httpx.MockTransport(answer))
    with pytest.raises(Refused) as caught:
        await RemoteAccess(Remote("lab", "http://lab:7433", ""), web=web).resolve("ab")
    assert caught.value.code == "token_expired"
    assert caught.value.exit_code == 6
    await web.close()


# Every code of remote.md, as a web bridge sends it, raises what a local command would.
CODES = [
    ("unauthorized", 401, "Refused", 6),
    ("token_revoked", 401, "Refused", 6),
    ("token_expired", 401, "Refused", 6),
    ("forbidden", 403, "Refused", 6),
    ("misdirected", 421, "Refused", 6),
    ("not_permitted", 403, "Refused", 6),
    ("too_many_turns", 429, "Refused", 6),
    ("cap_reached", 429, "Refused", 6),
    ("not_found", 404, "NotFound", 1),
    ("ambiguous_id", 409, "AmbiguousId", 1),
    ("busy", 409, "Conflict", 1),
    ("no_worker", 503, "WorkerUnavailable", 4),
    ("question_not_pending", 409, "Conflict", 1),
    ("invalid_request", 400, "InvalidRequest", 1),
]


@pytest.mark.parametrize(("code", "status", "kind", "exit_code"), CODES)
async def test_each_code_of_the_web_bridge_maps_to_its_exception(
    code: str, status: int, kind: str, exit_code: int
) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/info":
            return httpx.Response(
                200, json={"app": "tui-web", "features": ["session_commands", "remote_attach"]}
            )
        detail = "session 3f2a1b2c has a live worker; `tui delete 3f2a1b2c --force` stops it first"
        return httpx.Response(status, json={"error": code, "detail": detail, "matches": ["a", "b"]})

    web = WebClient("lab", "http://lab:7433", "t", transport=httpx.MockTransport(answer))
    with pytest.raises(Exception) as caught:
        await RemoteAccess(Remote("lab", "http://lab:7433", ""), web=web).show("3f2a1b2c")
    error = caught.value
    assert isinstance(error, getattr(tui.errors, kind))
    assert type(error).code == code, "each wire code is its own class"
    assert getattr(error, "exit_code", None) == exit_code
    assert "`tui --remote lab delete 3f2a1b2c --force`" in str(error)
    await web.close()


def test_a_script_piped_into_a_remote_attach(lab: Lab) -> None:
    import subprocess
    import sys

    sid = lab.web.session()
    script = "print(1 + 1)\nprint('done')\n"
    env = {**os.environ, "TUI_STATE_DIR": str(lab.client)}
    ran = subprocess.run(
        [sys.executable, "-m", "tui", "--remote", "lab", "attach", sid[:8]],
        input=script,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 3,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "2\ndone\n"


def test_share_list_and_revoke_from_another_machine(lab: Lab) -> None:
    sid = lab.web.session()
    token_file = lab.client / "guest.token"
    made = lab.there("share", sid[:8], "--name", "ana", "--kind", "viewer", "--token-file", str(token_file))
    assert made.code == 0, made.err
    assert f"tui remote add NAME {lab.web.url} --token-file F" in made.out
    guest = token_file.read_text().strip()
    assert lab.web.client(guest).get(f"/api/sessions/{sid}").status_code == 200
    assert f"it lasts until revoked: `tui --remote lab share revoke {sid[:8]} --participant ana`" in made.out
    listed = lab.there("share", "list", sid[:8])
    header, row = listed.out.splitlines()
    assert header.split() == ["NAME", "KIND", "STATE", "EXPIRES", "TURNS", "LAST", "SEEN"]
    assert row.split()[:5] == ["ana", "viewer", "active", "never", "0"]
    assert header.index("KIND") == row.index("viewer") and "\t" not in listed.out
    assert listed.out == lab.here("share", "list", sid[:8]).out
    lab.add_guest("guest", guest)
    assert lab.there("share", sid[:8], "--name", "eve", "--kind", "viewer", remote="guest").code == 6
    revoked = lab.there("share", "revoke", sid[:8], "--participant", "ana")
    assert "revoked ana" in revoked.out
    assert lab.web.client(guest).get(f"/api/sessions/{sid}").json()["error"] == "token_revoked"


def test_a_transcript_exports_the_same_remote_and_local_with_or_without_a_worker(lab: Lab) -> None:
    made = lab.here("send", "--new", "print('hello')", "--wait", "--timeout", str(TIMEOUT))
    assert made.code == 0, made.err
    sid = made.err.split()[0]
    assert lab.here("send", sid[:8], "1/0", "--wait", "--timeout", str(TIMEOUT)).code == 1
    for fmt in ("text", "markdown", "jsonl"):
        here = lab.here("transcript", sid[:8], "--format", fmt)
        there = lab.there("transcript", sid[:8], "--format", fmt)
        assert here.code == there.code == 0, there.err
        assert here.out == there.out
    text = lab.here("transcript", sid[:8]).out
    assert "\u276f print('hello')" in text and "hello\n" in text
    assert "ZeroDivisionError: division by zero" in text and "✗ failed: ZeroDivisionError" in text
    journal = (lab.web.state / "sessions" / sid / "journal.jsonl").read_text()
    assert lab.there("transcript", sid[:8], "--format", "jsonl").out == journal
    assert lab.here("stop", sid[:8]).code == 0
    stopped = lab.there("transcript", sid[:8])
    # A stopped session exports the same, and where its worker stopped.
    assert (stopped.code, stopped.out) == (0, text + "· the worker is leaving: stopped on request\n\n")
    assert lab.there("transcript", "ffffffff").code == 1


def test_interrupt_through_the_remote_ends_the_running_turn(lab: Lab) -> None:
    sid = lab.web.session()
    wake(lab.web, sid)
    c = lab.web.client()
    s = f"/api/sessions/{sid}"
    cursor = c.get(f"{s}/transcript", params={"limit": 0}).json()["cursor"]
    sent = c.post(f"{s}/turn", json={"prompt": "import time; time.sleep(60)", "request_id": "slow"})
    assert sent.status_code == 202, sent.text
    until_event(c, s, cursor, "turn_started")
    out = lab.there("interrupt", sid[:8])
    assert out.code == 0, out.err
    assert f"interrupted the running turn of session {sid[:8]}" in out.err
    assert f"`tui --remote lab attach {sid[:8]}`" in out.err
    until_event(c, s, cursor, "turn_ended")
    again = lab.there("interrupt", sid[:8])
    assert again.code == 0 and "has no running turn" in again.err


def test_a_viewers_send_while_a_question_waits_is_refused_and_offers_no_answer(lab: Lab) -> None:
    sid = lab.web.session()
    wake(lab.web, sid)
    c = lab.web.client()
    s = f"/api/sessions/{sid}"
    cursor = c.get(f"{s}/transcript", params={"limit": 0}).json()["cursor"]
    ask = "x = ask('Proceed?', options=['yes', 'no'])"
    assert c.post(f"{s}/turn", json={"prompt": ask, "request_id": "q"}).status_code == 202
    until_event(c, s, cursor, "question_asked")
    lab.add_guest("viewer", lab.web.share(sid, "viewer", name="vee"))
    refused = lab.there("send", sid[:8], "print(1)", remote="viewer")
    assert refused.code == 6, refused.err
    assert "a viewer may follow and read this session" in refused.err
    assert "tui --remote viewer answer" not in refused.err
    owner = lab.there("send", sid[:8], "print(1)")
    assert owner.code == 3 and f"tui --remote lab answer {sid[:8]} --option 1" in owner.err


def test_send_new_parent_makes_a_child_remote_in_the_parents_folder(lab: Lab, tmp_path: Path) -> None:
    folder = tmp_path / "proj"
    folder.mkdir()
    made = lab.here(
        "send", "--new", "--dir", str(folder), "print('parent')", "--wait", "--timeout", str(TIMEOUT)
    )
    assert made.code == 0, made.err
    parent = made.err.split()[0]
    there = lab.there(
        "send",
        "--new",
        "--parent",
        parent[:8],
        "import os; print(os.getcwd())",
        "--wait",
        "--timeout",
        str(TIMEOUT),
    )
    assert (there.code, there.out) == (0, f"{folder}\n"), there.err
    child = there.err.split()[0]
    rows = {row["id"]: row for row in json.loads(lab.there("sessions", "--json").out)}
    assert rows[child]["parent_id"] == parent and rows[child]["folder"] == str(folder)
    assert "└ import os" in lab.there("sessions").out

    # The parent's worker follows it, told through the web bridge (the owner's token).
    def events(kind: str) -> list[dict[str, object]]:
        lines = (lab.web.state / "sessions" / parent / "journal.jsonl").read_text().splitlines()
        return [e for e in map(json.loads, lines) if e["type"] == kind]

    wait_until(lambda: events("child_ended"), "the parent to see its child end")
    (started,) = events("child_started")
    assert started["child_id"] == child and started["prompt"] == "import os; print(os.getcwd())"
    (ended,) = events("child_ended")
    assert ended["child_id"] == child and ended["outcome"] == "completed"


def _forge(journal: Path, old: bytes, new: bytes) -> None:
    """Change a journal line and write its whole chain again, as someone who can write both files
    would: `tui verify` finds the chain intact, only a head kept elsewhere shows the change."""
    lines = journal.read_bytes().replace(old, new).splitlines()
    journal.write_bytes(b"".join(line + b"\n" for line in lines))
    chain = chain_path(journal)
    links, head = [chain.read_bytes().splitlines()[0]], GENESIS
    for line in lines:
        head = link(head, line)
        links.append(b"%d %s" % (json.loads(line)["seq"], head.encode()))
    chain.write_bytes(b"".join(one + b"\n" for one in links))


def test_verify_and_audit_of_a_remote_session_are_made_there_and_print_as_here(lab: Lab) -> None:
    made = lab.here("send", "--new", "print(6 * 7)", "--wait", "--timeout", str(TIMEOUT))
    assert made.code == 0, made.err
    sid = made.err.split()[0]
    assert lab.here("stop", sid[:8]).code == 0
    for args in (("audit",), ("audit", "--json"), ("verify",), ("verify", "--json")):
        here, there = lab.here(args[0], sid[:8], *args[1:]), lab.there(args[0], sid[:8], *args[1:])
        assert (there.code, there.out, there.err) == (here.code, here.out, here.err), there.err
        assert there.code == 0
    head = json.loads(lab.there("audit", sid[:8], "--json").out)["chain"]["head"]
    kept = lab.there("verify", sid[:8], "--head", head)
    assert kept.code == 0 and "kept elsewhere is in it" in kept.out, kept.err
    # The journal rewritten on the remote, its chain too: only the head this client kept tells.
    _forge(StatePaths(lab.web.state).session(sid).journal, b"print(6 * 7)", b"print(6 * 9)")
    assert lab.there("verify", sid[:8]).code == 0
    here, there = lab.here("verify", sid[:8], "--head", head), lab.there("verify", sid[:8], "--head", head)
    assert (there.code, there.err) == (here.code, here.err) == (1, there.err), there.err
    assert f"the head {head} kept elsewhere is not in the journal's chain" in there.err
    bad = lab.there("verify", sid[:8], "--head", "12:nothex")
    assert bad.code == 2 and "--head '12:nothex': give the SEQ:HASH" in bad.err, bad.err
    # A participant may not: the journal's record is the owner's.
    lab.add_guest("viewer", lab.web.share(sid, "viewer", name="vee"))
    for command in ("verify", "audit"):
        refused = lab.there(command, sid[:8], remote="viewer")
        assert refused.code == 6 and refused.err.count("\n") == 1, refused.err
        assert "only the owner of this machine may" in refused.err, refused.err
