"""`tui remote add NAME ssh://…` and every session command through a real OpenSSH server."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pty
import select
import signal
import socket
import subprocess

import pytest
from helpers import app_until, wait_until

from tui.access.remote import RemoteAccess
from tui.cli import parse
from tui.commands.machines import pick
from tui.errors import UsageError
from tui.link import ssh as ssh_link
from tui.link.base import Live
from tui.store import StatePaths, create_session
from tui.store.remotes import Remote, add_remote
from tui.ui import TuiApp
from tui.ui.widgets.turn import TurnView

from .conftest import TIMEOUT, TUI, Machines, ssh_children


def test_send_new_wait_prints_42_on_the_remote(machines: Machines) -> None:
    added = machines.add_lab()
    assert "remote lab: ssh://root@127.0.0.1" in added.out and "over ssh" in added.out

    sent = machines.run(
        "--remote", "lab", "send", "--new", "--dir", str(machines.work), "print(6*7)", "--wait"
    )
    assert sent.code == 0, sent.err
    assert sent.out == "42\n"
    sid = sent.err.splitlines()[0].strip()
    # The session is the other machine's, not this one's.
    assert (machines.there / "sessions" / sid).is_dir()
    assert not (machines.here / "sessions").exists() or not (machines.here / "sessions" / sid).exists()

    listed = machines.run("--remote", "lab", "sessions")
    assert listed.code == 0 and sid[:8] in listed.out
    shown = machines.run("--remote", "lab", "transcript", sid[:8])
    assert shown.code == 0 and "42" in shown.out
    # The journal is checked where it is, over the same connection.
    audit = machines.run("--remote", "lab", "audit", sid[:8], "--json")
    head = json.loads(audit.out)["chain"]["head"]
    verified = machines.run("--remote", "lab", "verify", sid[:8], "--head", head)
    assert verified.code == 0 and "kept elsewhere is in it" in verified.out, verified.err
    stopped = machines.run("--remote", "lab", "stop", sid[:8])
    assert stopped.code == 0 and "tui --remote lab attach" in stopped.err


def _new_session(machines: Machines) -> str:
    sent = machines.run("--remote", "lab", "send", "--new", "--dir", str(machines.work), "n = 6", "--wait")
    assert sent.code == 0, sent.err
    return sent.err.splitlines()[0].strip()


def test_attach_runs_a_piped_script_on_the_remote_session(machines: Machines) -> None:
    machines.add_lab()
    sid = _new_session(machines)
    ran = subprocess.run(
        [TUI, "--remote", "lab", "attach", sid[:8]],
        input="print(n * 7)\nprint('done')\n",
        capture_output=True,
        text=True,
        env=machines.env(),
        timeout=TIMEOUT * 3,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "42\ndone\n"


GATED = "\n".join(
    [
        "import os, time",
        "print('before', flush=True)",
        "while not os.path.exists('go'):",
        "    time.sleep(0.02)",
        "for i in range(5):",
        "    print(i, flush=True)",
    ]
)
"""A turn that prints, waits for the test's file `go` in its folder, then prints the rest."""


def test_a_killed_ssh_connection_mid_turn_loses_nothing(machines: Machines) -> None:
    machines.add_lab()
    proc = subprocess.Popen(
        [TUI, "--remote", "lab", "send", "--new", "--dir", str(machines.work), GATED, "--wait"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=machines.env(),
    )
    try:
        assert proc.stdout is not None
        assert _readline(proc, TIMEOUT * 2) == "before\n"
        (first,) = ssh_children(proc.pid)
        os.kill(first, signal.SIGKILL)
        # The follower reconnects through a new ssh connection of its own.
        wait_until(lambda: [p for p in ssh_children(proc.pid) if p != first], "a new ssh connection")
        (machines.work / "go").touch()
        out, err = proc.communicate(timeout=TIMEOUT * 2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert out == "0\n1\n2\n3\n4\n"
    # Every relay there ended with its connection: the killed one's, the client's last one, and
    # (once it is closed) this process's own.
    ssh_link.close_all()
    wait_until(lambda: not list((machines.there / "relay").glob("*.sock")), "the relays to end")


def _readline(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline() if ready else ""


def test_a_remote_without_tui_is_one_line_saying_what_to_run(machines: Machines) -> None:
    ran = machines.run("remote", "add", "lab", machines.sshd.url(), "--tui", "/nowhere/tui")
    assert ran.code != 0
    (line,) = ran.err.splitlines()
    assert "`/nowhere/tui` is not a command there" in line
    assert "--tui /path/to/tui" in line
    assert "Traceback" not in ran.err
    assert machines.run("remote", "list").out.startswith("no remotes yet")


def test_a_host_that_refuses_is_one_line(machines: Machines) -> None:
    ran = machines.run("remote", "add", "lab", machines.sshd.url(user="nobody-here"), "--tui", TUI)
    assert ran.code != 0
    (line,) = ran.err.splitlines()
    assert "ssh could not connect" in line and "Permission denied" in line
    assert "ssh -p" in line  # what to run to check


def test_an_ssh_remote_asked_to_share_says_shares_stay_with_tui_web(machines: Machines) -> None:
    machines.add_lab()
    sid = _new_session(machines)
    ran = machines.run("--remote", "lab", "share", sid[:8], "--name", "ana", "--kind", "viewer")
    assert ran.code == 2
    assert "share links and participants stay with `tui web`" in ran.err


def test_sessions_everywhere_lists_every_machine_a_waiting_question_first(machines: Machines) -> None:
    machines.add_lab()
    mine = create_session(StatePaths(machines.here), working_directory=machines.work).id
    idle = _new_session(machines)
    asking = _new_session(machines)
    asked = machines.run(
        "--remote", "lab", "send", asking[:8], "x = ask('Proceed?', options=['yes', 'no'])", "--wait"
    )
    assert asked.code == 3, asked.err  # a question waits
    add_remote(StatePaths(machines.here), Remote("gone", f"ssh://root@127.0.0.1:{_closed_port()}", "", TUI))

    table = machines.run("sessions", "--everywhere")
    assert table.code == 0, table.err
    lines = table.out.splitlines()
    assert lines[0].split()[:4] == ["WHERE", "ID", "TITLE", "STATE"]
    assert lines[1].split()[:2] == ["lab", asking[:8]] and " asking " in lines[1]
    rows = {line.split()[1]: line.split()[0] for line in lines[1:]}
    assert rows[idle[:8]] == "lab" and rows[mine[:8]] == "here"
    (gone,) = [line for line in lines if line.startswith("gone")]
    assert "no answer: remote gone: ssh could not connect" in gone and "Connection refused" in gone
    assert lines[-1] == gone  # one row, after the sessions

    listed = json.loads(machines.run("sessions", "--everywhere", "--json").out)
    first = listed["sessions"][0]
    assert (first["where"], first["id"]) == ("lab", asking)
    assert {s["id"] for s in listed["sessions"]} == {mine, idle, asking}
    machines_seen = {m["where"]: m for m in listed["machines"]}
    assert machines_seen["here"]["answered"] and machines_seen["lab"]["sessions"] == 2
    assert not machines_seen["gone"]["answered"] and "Connection refused" in machines_seen["gone"]["error"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_the_app_on_an_ssh_remote_survives_a_killed_connection_mid_turn(machines: Machines) -> None:
    remote = Remote("lab", machines.sshd.url(), "", machines.tui_there)
    access = RemoteAccess(remote)
    sid = await access.create(working_directory=str(machines.work))
    link = await access.link(sid, client_id="tui:test:1")
    app = TuiApp(link, gone_exit_after=None)
    try:
        async with app.run_test(size=(100, 40)) as pilot:
            await app_until(pilot, app.session.attached.is_set, timeout=TIMEOUT)
            assert "remote lab" in app.session.status.link_row()
            app.session.submit(GATED)
            await app_until(
                pilot,
                lambda: app.session.turn is not None and "before" in app.session.turn.reply,
                timeout=TIMEOUT,
            )
            killed = access.web.tunnel.pid
            assert killed is not None
            os.kill(killed, signal.SIGKILL)
            await app_until(pilot, lambda: access.web.tunnel.pid not in (None, killed), timeout=TIMEOUT)
            (machines.work / "go").touch()
            await app_until(pilot, lambda: not app.session.busy and ended(app), timeout=TIMEOUT)
            assert ended(app)[-1].record.reply == "before\n0\n1\n2\n3\n4\n"
            assert isinstance(app.session.link_state, Live)
    finally:
        await link.close()
        await access.web.close()


def ended(app: TuiApp) -> list[TurnView]:
    return app.session.transcript.turn_views()


def test_attach_without_an_id_picks_from_every_machine(machines: Machines) -> None:
    machines.add_lab()
    mine = create_session(StatePaths(machines.here), working_directory=machines.work).id
    theirs = _new_session(machines)
    args = parse(["--state-dir", str(machines.here), "attach"])
    shown = io.StringIO()
    asked: list[str] = []

    def answer(prompt: str) -> str:
        asked.append(prompt)
        return "1"

    chosen = pick(args, read=answer, out=shown)
    assert chosen is not None and (chosen[0], chosen[1].id) == ("lab", theirs)  # live and idle first
    lines = shown.getvalue().splitlines()
    assert lines[0].split()[:3] == ["#", "WHERE", "ID"]
    assert lines[1].split()[:3] == ["1", "lab", theirs[:8]]
    assert lines[2].split()[:3] == ["2", "here", mine[:8]]
    assert asked == ["attach which? (1-2, Enter: 1, q: none) "]
    assert pick(args, read=lambda _: "q", out=io.StringIO()) is None
    with pytest.raises(UsageError, match="'7' is not one of 1-2"):
        pick(args, read=lambda _: "7", out=io.StringIO())


def test_attach_without_an_id_in_a_terminal_shows_the_picker(machines: Machines) -> None:
    create_session(StatePaths(machines.here), working_directory=machines.work)
    pid, fd = pty.fork()
    if pid == 0:  # the child: `tui attach` with the pty as its terminal
        os.execve(TUI, [TUI, "attach"], machines.env())
    seen = b""
    try:
        with contextlib.suppress(OSError):
            while b"attach which?" not in seen:
                ready, _, _ = select.select([fd], [], [], TIMEOUT)
                assert ready, seen
                seen += os.read(fd, 4096)
        os.write(fd, b"q\n")
        with contextlib.suppress(OSError):
            while chunk := os.read(fd, 4096):
                seen += chunk
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    text = seen.decode(errors="replace")
    assert "here" in text and "attach which? (1-1, Enter: 1, q: none)" in text


def test_attach_without_an_id_and_without_a_terminal_says_to_give_one(machines: Machines) -> None:
    ran = subprocess.run(
        [TUI, "attach"],
        input="",
        capture_output=True,
        text=True,
        env=machines.env(),
        timeout=TIMEOUT,
        check=False,
    )
    assert ran.returncode == 2
    assert ran.stderr == "tui: `tui attach` without a terminal needs an id: `tui attach ID < script`\n"


def test_search_everywhere_finds_a_word_here_over_ssh_and_through_tui_web(machines: Machines) -> None:
    """One `tui search --everywhere`: a stopped, archived session here, a session on an SSH
    remote, one behind a `tui web` remote, merged newest first; a dead remote is one line."""
    from web.conftest import start_web, until_event

    word = "print('quet' + 'zal', 'bird')"
    here = machines.run("send", "--new", "--dir", str(machines.work), word, "--wait")
    assert here.code == 0, here.err
    mine = here.err.splitlines()[0].strip()
    assert machines.run("stop", mine[:8]).code == 0 and machines.run("archive", mine[:8]).code == 0
    machines.add_lab()
    lab = machines.run("--remote", "lab", "send", "--new", "--dir", str(machines.work), word, "--wait")
    assert lab.code == 0, lab.err
    there = lab.err.splitlines()[0].strip()
    web_state = machines.here.parent / "web-state"
    web_state.mkdir()
    web = start_web(web_state)
    try:
        owner = web.client()
        made = owner.post("/api/sessions", json={"prompt": word, "wait": TIMEOUT})
        assert made.status_code == 201, made.text
        far = made.json()["id"]
        until_event(owner, f"/api/sessions/{far}", 0, "turn_ended")
        token = machines.here.parent / "web.token"
        token.write_text(web.token)
        assert machines.run("remote", "add", "far", web.url, "--token-file", str(token)).code == 0
        dead = Remote("gone", f"ssh://root@127.0.0.1:{_closed_port()}", "", TUI)
        add_remote(StatePaths(machines.here), dead)

        found = machines.run("search", "quetzal bird", "--everywhere")
        assert found.code == 0, found.err
        heads = [line.split()[:2] for line in found.out.splitlines() if not line.startswith(" ")]
        assert sorted(heads) == sorted([["here", mine[:8]], ["lab", there[:8]], ["far", far[:8]]])
        assert "«quetzal bird»" in found.out
        (gone,) = [line for line in found.err.splitlines() if "gone" in line]
        assert "no answer" in gone and "Connection refused" in gone

        listed = json.loads(machines.run("search", "quetzal", "--everywhere", "--json").out)
        assert {(h["machine"], h["session_id"], h["turn"]) for h in listed["hits"]} == {
            ("here", mine, 1),
            ("lab", there, 1),
            ("far", far, 1),
        }
        assert {m["where"]: m["answered"] for m in listed["machines"]} == {
            "here": True,
            "lab": True,
            "far": True,
            "gone": False,
        }
    finally:
        web.stop()
