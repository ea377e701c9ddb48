"""`tui acp --remote NAME`: an editor on another machine's sessions, through a real `tui web`."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import acp
from acp_agent import agent_pids, configure
from editor import editor
from helpers import stop_workers, wait_until

from tui.store import StatePaths
from tui.store.remotes import Remote, add_remote

from .conftest import Web


async def _here(web: Web, *args: str) -> tuple[int, str]:
    """``tui ARGS`` on the web bridge's machine (another client of its sessions)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tui",
        "--state-dir",
        str(web.state),
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=os.environ.copy(),
    )
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode() + err.decode()


async def test_an_editor_runs_turns_answers_and_loads_a_remote_session(web: Web, tmp_path: Path) -> None:
    configure(Path(os.environ["TUI_CONFIG_DIR"]), tmp_path / "agent-state")
    client = tmp_path / "client"
    client.mkdir()
    (client / "lab.token").write_text(web.token + "\n")
    add_remote(StatePaths(client), Remote("lab", web.url, str(client / "lab.token")))
    work = tmp_path / "work"
    work.mkdir()
    remote = ("--state-dir", str(client), "--remote", "lab")

    async with editor(*remote, "--agent", "tester") as ed:
        sid = await ed.new(work)
        answer = await ed.prompt(sid, "hello")
        assert answer.stop_reason == "end_turn" and "Working on: hello" in ed.said(sid)
        # a permission asked while the editor and another client are attached: the other answers
        turn = asyncio.create_task(ed.prompt(sid, "permission to test"))
        await ed.until(lambda: ed.asked, "the permission request")
        code, said = await _here(web, "answer", sid[:8], "--option", "3")
        assert code == 0, said
        assert (await turn).stop_reason == "end_turn"
        assert "permission: reject" in ed.said(sid) and "(tui answer): Reject" in ed.said(sid)
        await ed.until(lambda: ed.cancelled, "the request withdrawn")
        assert not ed.asked[0].answer.done()

    async with editor(*remote) as ed:
        await ed.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        listed = await ed.conn.list_sessions(cwd=str(work))
        assert [s.session_id for s in listed.sessions] == [sid]
        await ed.conn.load_session(cwd=str(work), session_id=sid)
        assert "Working on: hello" in ed.said(sid) and "permission: reject" in ed.said(sid)
        code, said = await _here(web, "send", sid, "from the terminal", "--wait")
        assert code == 0, said
        await ed.until(lambda: "Working on: from the terminal" in ed.said(sid), "the live turn")
        assert "] from the terminal" in ed.said(sid, "user_message_chunk")
        # a new python session there (the machine's default agent), and a turn in it
        python = str((await ed.conn.new_session(cwd=str(work))).session_id)
        assert (await ed.prompt(python, "print(6 * 7)")).stop_reason == "end_turn"
        assert "42" in ed.said(python)
    stop_workers(web.state, python)
    stop_workers(web.state, sid)
    wait_until(lambda: not agent_pids(sid), "the agent to end")
