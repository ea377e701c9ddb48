"""A script whose queued prompt waits in a queue held after an interrupt: it says so and exits 1
instead of waiting for ever; `/resume` in a script runs the queue."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from client.helpers import new_session, tui
from helpers import RUNS_UNTIL_STOPPED, TIMEOUT, eventually

from tui.link.local import LocalLink
from tui.store import StatePaths


async def test_a_script_says_its_queued_prompt_is_held_and_resume_runs_it(state_dir: Path) -> None:
    sid = new_session(state_dir)
    link = LocalLink(StatePaths(state_dir), sid, client_id="tui:test:1")
    try:
        await link.send_turn(RUNS_UNTIL_STOPPED, request_id="long")
        script = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tui",
            "attach",
            sid,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )

        async def queued() -> bool:
            return len((await link.transcript(0)).queue) == 1

        communicate = asyncio.create_task(script.communicate(b"/queue print('later')\n"))
        await eventually(queued, "the script's prompt to be queued")
        assert await link.interrupt()
        _, raw = await asyncio.wait_for(communicate, TIMEOUT)
        err = raw.decode()
        assert script.returncode == 1, err
        assert "turn 1 did not run: the queue is held after an interrupt" in err
        assert f"`tui attach {sid[:8]}` and /resume runs it" in err

        resumed = await asyncio.to_thread(tui, "attach", sid, input="/resume\n")
        assert resumed.returncode == 0, resumed.stderr
        assert "the held queue runs again" in resumed.stderr

        async def ran() -> bool:
            page = await link.transcript(5)
            return any(t.reply == "later\n" for t in page.turns)

        await eventually(ran, "the queued prompt to run")
        again = await asyncio.to_thread(tui, "attach", sid, input="/resume\n")
        assert "the queue was not held" in again.stderr
    finally:
        await link.close()
