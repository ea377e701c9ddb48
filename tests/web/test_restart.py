"""`tui restart`: a session moves to a new worker while a piped run and a `tui web` follower are
attached, and each goes on with the new worker, seeing every event once; `tui sessions` says
when a worker runs an older tui than the one installed."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from tui.access.remote import RemoteAccess
from tui.link.follow import Follower
from tui.link.remote import WebClient
from tui.protocol import TurnEnded, WorkerLeaving, WorkerStarted
from tui.protocol.events import EventBase
from tui.store.remotes import Remote

from .conftest import TIMEOUT, Web, wake


def _tui(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, **(env or {})},
        input="",
    )


def _piped_run(sid: str) -> subprocess.Popen[str]:
    """`tui attach ID --output jsonl` reading its script from a pipe the test writes to."""
    return subprocess.Popen(
        [sys.executable, "-m", "tui", "attach", sid[:8], "--output", "jsonl"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _rest_of(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """What the process printed, once it ended (its stdin already closed)."""
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.wait(TIMEOUT)
    return out, err


def _once_each(seqs: list[int]) -> None:
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs


async def test_a_restart_moves_the_session_and_every_follower_goes_on(web: Web) -> None:
    sid = web.session()
    wake(web, sid)
    # An older tui's worker: started with the version it reports set back.
    assert _tui("stop", sid[:8]).returncode == 0
    first = _tui("send", sid[:8], "x = 41", "--wait", env={"TUI_WORKER_VERSION": "0.0.1"})
    assert first.returncode == 0, first.stderr
    listed = _tui("sessions")
    assert "old tui 0.0.1" in listed.stdout and "tui restart --outdated" in listed.stderr, listed
    row = json.loads(_tui("sessions", "--json").stdout)[0]
    assert (row["worker_version"], row["outdated"]) == ("0.0.1", True)

    piped = _piped_run(sid)
    access = RemoteAccess(Remote("lab", web.url, ""), web=WebClient("lab", web.url, web.token))
    link = await access.link(sid, client_id="tui:test:1")
    follower = Follower(link)
    seen: list[EventBase] = []
    try:
        assert piped.stdin is not None and piped.stdout is not None
        piped.stdin.write("print('before')\n")
        piped.stdin.flush()
        async with asyncio.timeout(TIMEOUT * 2):
            async for item in follower:
                if isinstance(item, EventBase):
                    seen.append(item)
                    if isinstance(item, TurnEnded) and item.reply == "before\n":
                        break
            restarted = await asyncio.to_thread(_tui, "restart", sid[:8])
            assert restarted.returncode == 0, restarted.stderr
            assert "its programs' variables will be lost" in restarted.stderr
            assert "runs tui 0.1.0 in a new worker; its programs' variables are gone" in restarted.stderr
            piped.stdin.write("print('after')\n")
            piped.stdin.close()
            async for item in follower:
                if isinstance(item, EventBase):
                    seen.append(item)
                    if isinstance(item, TurnEnded) and item.reply == "after\n":
                        break
        out, err = await asyncio.to_thread(_rest_of, piped)
    finally:
        await follower.aclose()
        await link.close()
        await access.web.close()
        if piped.poll() is None:
            piped.kill()
    assert piped.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    _once_each([e["seq"] for e in lines])
    _once_each([e.seq for e in seen])
    for types in ([e["type"] for e in lines], [e.type for e in seen]):
        at = types.index("worker_leaving")
        assert types.index("worker_started", at) > at
    leaving = [e for e in seen if isinstance(e, WorkerLeaving)][-1]
    assert leaving.restarting
    assert leaving.reason == "restarted onto tui 0.1.0; its programs' variables are gone"
    started = [e for e in seen if isinstance(e, WorkerStarted)]
    assert started[-1].version == "0.1.0"
    ended = [e["reply"] for e in lines if e["type"] == "turn_ended"]
    assert ended == ["before\n", "after\n"]
    assert json.loads(_tui("sessions", "--json").stdout)[0]["outdated"] is False


def test_restart_outdated_leaves_current_workers_alone(state_dir: Path) -> None:
    out = _tui("send", "--new", "y = 1", "--wait")
    assert out.returncode == 0, out.stderr
    sid = out.stderr.strip().splitlines()[0]
    pid = json.loads(_tui("sessions", "--json").stdout)[0]
    assert pid["outdated"] is False
    none = _tui("restart", "--outdated")
    assert none.returncode == 0 and "every live worker runs tui 0.1.0" in none.stderr
    both = _tui("restart")
    assert both.returncode == 2 and "tui restart --outdated" in both.stderr
    assert _tui("stop", sid[:8]).returncode == 0
