"""`tui acp` figures: a turn through an editor's ACP connection beside `tui send --wait`, and
`session/load` of a 1,000-turn session (the whole journal replayed as `session/update`s).

Run with ``.venv/bin/python bench/editor.py``. It makes its own state dir, and stops its workers
and removes it at the end. The figures go into the "Editors (tui acp)" section of docs/performance.md.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import acp

TURNS = 1000


class Quiet:
    """An ACP client that counts what it is told."""

    def __init__(self) -> None:
        self.updates = 0

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates += 1


def tui(*args: str, stdin: str = "", env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "tui", *args], input=stdin, capture_output=True, text=True, env=env
    )
    return time.perf_counter() - started, out


async def editor_figures(sid: str, env: dict[str, str], cwd: str) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    client = Quiet()
    started = time.perf_counter()
    async with acp.spawn_agent_process(
        lambda _agent: client,  # type: ignore[arg-type,return-value]
        sys.executable,
        "-m",
        "tui",
        "acp",
        env=env,
        cwd=cwd,
        transport_kwargs={"stderr": subprocess.DEVNULL},
    ) as (conn, _):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        made = await conn.new_session(cwd=cwd)
        await conn.prompt(session_id=made.session_id, prompt=[acp.text_block("print(1)")])
        first = time.perf_counter() - started
        rows.append(("`tui acp`: start, initialize, session/new, one turn", f"{first * 1000:.0f} ms"))
        took = []
        for i in range(20):
            t0 = time.perf_counter()
            await conn.prompt(session_id=made.session_id, prompt=[acp.text_block(f"print({i})")])
            took.append(time.perf_counter() - t0)
        took.sort()
        rows.append(
            (
                "`tui acp`: one more turn (session/prompt to its answer), median of 20",
                f"{took[10] * 1000:.1f} ms",
            )
        )
        before = client.updates
        t0 = time.perf_counter()
        await conn.load_session(cwd=cwd, session_id=sid)
        load = time.perf_counter() - t0
        told = client.updates - before
        rows.append(
            (
                f"session/load of a {TURNS:,}-turn session: the whole journal replayed, then the answer",
                f"{load * 1000:.0f} ms ({told:,} updates, {told / load:,.0f}/s)",
            )
        )
    return rows


def main() -> None:
    state = tempfile.mkdtemp(prefix="tui-bench-", dir="/tmp")
    env = {**os.environ, "TUI_STATE_DIR": state}
    _, made = tui("send", "--new", "print('warm')", "--wait", env=env)
    assert made.returncode == 0, made.stderr
    sid = made.stderr.strip().splitlines()[0]
    try:
        script = "".join(f"print({i} * {i})\n" for i in range(TURNS))
        _, out = tui("attach", sid, stdin=script, env=env)
        assert out.returncode == 0, out.stderr
        took = []
        for i in range(21):
            t, out = tui("send", sid, f"print({i})", "--wait", env=env)
            assert out.returncode == 0, out.stderr
            took.append(t)
        took.sort()
        rows = [
            (
                "`tui send ID PROMPT --wait` (process start, one turn), median of 21",
                f"{took[10] * 1000:.0f} ms",
            )
        ]
        rows += asyncio.run(editor_figures(sid, env, state))
        width = max(len(r[0]) for r in rows)
        for what, figure in rows:
            print(f"{what.ljust(width)}  {figure}")
    finally:
        tui("stop", "--all", env=env)
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
