"""`tui acp` figures: a turn through an editor's ACP connection beside `tui send --wait`, and
`session/load` of a 1,000-turn session (the whole journal replayed as `session/update`s) beside
`json.loads` of the same journal's lines, five interleaved rounds, medians and the median of the
rounds' ratios (through the `acp` package's client, whose own handling of each notification
counts in the load's time, and through a raw client that reads the lines itself, with the CPU
`tui acp` spent); and a
fresh `tui acp` (start, ``initialize``, ``session/new``, one turn) beside ``tui send --new
PROMPT --wait`` (start, a new session, one turn), in interleaved rounds, medians and the median
of the rounds' ratios.

Run with ``.venv/bin/python bench/editor.py`` (``--fresh [ROUNDS]``: the fresh `tui acp` rounds
alone, 7 by default). It makes its own state dir, and stops its workers and removes it at the
end. The figures go into the "Editors (tui acp)" section of docs/performance.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import acp

TURNS = 1000
LOADS = 5
"""`session/load` rounds, each beside a `json.loads` of the journal."""


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
        journal = Path(cwd) / "sessions" / sid / "journal.jsonl"
        loads, parses, told = [], [], 0
        for _ in range(LOADS):  # interleaved with json.loads of the same journal's lines
            t0 = time.perf_counter()
            with journal.open("rb") as lines:
                events = [json.loads(line) for line in lines]
            parses.append(time.perf_counter() - t0)
            before = client.updates
            t0 = time.perf_counter()
            await conn.load_session(cwd=cwd, session_id=sid)
            loads.append(time.perf_counter() - t0)
            told = client.updates - before
        load, parse = statistics.median(loads), statistics.median(parses)
        ratio = statistics.median(a / b for a, b in zip(loads, parses, strict=True))
        rows.append(
            (
                f"`json.loads` of the session's {len(events):,} journal lines, median of {LOADS}",
                f"{parse * 1000:.1f} ms",
            )
        )
        rows.append(
            (
                f"session/load of a {TURNS:,}-turn session: the whole journal replayed, then the answer",
                f"{load * 1000:.0f} ms ({told:,} updates, {told / load:,.0f}/s); ratio {ratio:.1f}x",
            )
        )
    return rows


async def raw_loads(sid: str, env: dict[str, str], cwd: str) -> list[tuple[str, str]]:
    """`session/load` as an editor without the `acp` package reads it: the request written, each
    line read and `json.loads`ed until the answer; beside `json.loads` of the journal, interleaved,
    and the CPU `tui acp` spent on each load (its own work, whatever the client does)."""
    tick = os.sysconf("SC_CLK_TCK")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tui",
        "acp",
        env=env,
        cwd=cwd,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        limit=2**24,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def cpu() -> float:
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    async def ask(rid: int, method: str, params: dict[str, Any]) -> int:
        asked = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        stdin.write(json.dumps(asked).encode() + b"\n")
        await stdin.drain()
        told = 0
        while json.loads(await stdout.readline()).get("id") != rid:
            told += 1
        return told

    await ask(0, "initialize", {"protocolVersion": acp.PROTOCOL_VERSION})
    journal = Path(cwd) / "sessions" / sid / "journal.jsonl"
    loads, parses, cpus = [], [], []
    for rid in range(1, LOADS + 2):  # the first load (imports, the first connection) is left out
        t0 = time.perf_counter()
        with journal.open("rb") as lines:
            [json.loads(line) for line in lines]
        parse = time.perf_counter() - t0
        c0, t0 = cpu(), time.perf_counter()
        await ask(rid, "session/load", {"cwd": cwd, "sessionId": sid, "mcpServers": []})
        if rid > 1:
            loads.append(time.perf_counter() - t0)
            cpus.append(cpu() - c0)
            parses.append(parse)
    stdin.close()
    await proc.wait()
    ratio = statistics.median(a / b for a, b in zip(loads, parses, strict=True))
    return [
        (
            f"session/load read by a raw client (each line json.loads'ed), median of {LOADS}",
            f"{statistics.median(loads) * 1000:.0f} ms beside json.loads "
            f"{statistics.median(parses) * 1000:.1f} ms: ratio {ratio:.1f}x; "
            f"tui acp's CPU {statistics.median(cpus) * 1000:.0f} ms a load",
        )
    ]


async def fresh_acp(env: dict[str, str], cwd: str) -> dict[str, float]:
    """Seconds from starting `tui acp` to each answer: initialize, session/new, the turn."""
    started = time.perf_counter()
    marks: dict[str, float] = {}
    async with acp.spawn_agent_process(
        lambda _agent: Quiet(),  # type: ignore[arg-type,return-value]
        sys.executable,
        "-m",
        "tui",
        "acp",
        env=env,
        cwd=cwd,
        transport_kwargs={"stderr": subprocess.DEVNULL},
    ) as (conn, _):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        marks["initialize"] = time.perf_counter() - started
        made = await conn.new_session(cwd=cwd)
        marks["session/new"] = time.perf_counter() - started
        await conn.prompt(session_id=made.session_id, prompt=[acp.text_block("print(1)")])
        marks["turn"] = time.perf_counter() - started
    return marks


def fresh(rounds: int) -> None:
    """A fresh `tui acp` beside `tui send --new --wait`, interleaved (each round makes two sessions)."""
    state = tempfile.mkdtemp(prefix="tui-bench-", dir="/tmp")
    env = {**os.environ, "TUI_STATE_DIR": state}
    try:
        tui("send", "--new", "print('warm')", "--wait", env=env)  # the disk cache, as an editor finds it
        sends: list[float] = []
        editors: list[dict[str, float]] = []
        for _ in range(rounds):
            took, out = tui("send", "--new", "print(1)", "--wait", env=env)
            assert out.returncode == 0, out.stderr
            sends.append(took)
            editors.append(asyncio.run(fresh_acp(env, state)))
        print(f"load average {os.getloadavg()[0]:.2f}; {rounds} interleaved rounds, medians")
        print(f"tui send --new PROMPT --wait: {statistics.median(sends) * 1000:,.0f} ms")
        marks = ", ".join(
            f"{what} {statistics.median(e[what] for e in editors) * 1000:,.0f} ms" for what in editors[0]
        )
        ratio = statistics.median(e["turn"] / s for e, s in zip(editors, sends, strict=True))
        print(f"a fresh tui acp, from its start: {marks}; ratio {ratio:.2f}x")
    finally:
        tui("stop", "--all", env=env)
        shutil.rmtree(state, ignore_errors=True)


def main() -> None:
    if "--fresh" in sys.argv:
        after = sys.argv[sys.argv.index("--fresh") + 1 :]
        fresh(int(after[0]) if after else 7)
        return
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
        rows += asyncio.run(raw_loads(sid, env, state))
        width = max(len(r[0]) for r in rows)
        for what, figure in rows:
            print(f"{what.ljust(width)}  {figure}")
    finally:
        tui("stop", "--all", env=env)
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
