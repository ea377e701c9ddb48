"""Piped surface figures: a 1,000-turn script through `tui attach ID < script`, beside the same
programs run directly in one warm Code Mode session and piped into ``python -i`` (the ratio).

Run with ``.venv/bin/python bench/piped.py``. It makes its own state dir, starts one worker, and
stops it at the end. The figures go into the "Piped surface" section of docs/performance.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from tui.codemode import Limits, PythonSession

TURNS = 1000


CPU: dict[str, float] = {}
"""CPU seconds of the last `tui` process (``client``) and of the session's worker meanwhile (``worker``)."""


def _worker_cpu(state: str) -> float:
    """utime + stime of the live worker of the one session under `state` (0 when none)."""
    for car in Path(state, "sessions").glob("*/worker.json"):
        with contextlib.suppress(OSError, ValueError):
            fields = (
                Path(f"/proc/{json.loads(car.read_text())['pid']}/stat").read_text().rsplit(")", 1)[1].split()
            )
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def tui(*args: str, stdin: str = "", env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    worker = _worker_cpu(env["TUI_STATE_DIR"])
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "tui", *args], input=stdin, capture_output=True, text=True, env=env
    )
    took = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU["client"] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    CPU["worker"] = _worker_cpu(env["TUI_STATE_DIR"]) - worker
    return took, out


async def direct(programs: list[str], workdir: str) -> float:
    async with PythonSession(workdir, Limits(observe_seconds=5.0)) as session:
        for source in programs[:20]:
            await session.execute(source=source)
        started = time.perf_counter()
        for source in programs:
            result = await session.execute(source=source)
            assert result.status == "completed", result
        return time.perf_counter() - started


def gaps(state: str, last: int) -> dict[str, float]:
    """Where the wall time of the last `last` turns went, medians in ms, from the journal's own
    times: the worker from ``turn_started`` to the reply's first ``text`` (the request's answer,
    the checkpoint, the program's round trip to the sandbox), from that ``text`` to ``status:
    idle`` (the turn's end written), and from ``status: idle`` to the next ``turn_started`` (the
    event stream to the client, the client, its next ``POST /turn``, the worker reading it)."""
    journal = next(Path(state, "sessions").glob("*/journal.jsonl"))
    parts: dict[str, list[float]] = {"start → text": [], "text → idle": [], "idle → next start": []}
    began = text = idle = None
    for line in journal.read_text().splitlines()[-6 * last :]:
        event = json.loads(line)
        at = datetime.fromisoformat(event["at"].replace("Z", "+00:00")).timestamp()
        if event["type"] == "turn_started":
            if idle is not None:
                parts["idle → next start"].append(at - idle)
            began, text, idle = at, None, None
        elif event["type"] == "text" and began is not None and text is None:
            text = at
            parts["start → text"].append(at - began)
        elif event["type"] == "status" and event["state"] == "idle" and text is not None:
            parts["text → idle"].append(at - text)
            idle, began, text = at, None, None
    return {name: statistics.median(values) * 1000 for name, values in parts.items() if values}


def python_i(programs: list[str], rounds: int = 3) -> float:
    """Seconds a statement of `programs` takes piped into ``python -i`` (the whole script's run
    less a one-statement run, over the statements after the first; median of `rounds`)."""

    def run(script: str) -> float:
        began = time.perf_counter()
        subprocess.run([sys.executable, "-i", "-q"], input=script, capture_output=True, text=True, check=True)
        return time.perf_counter() - began

    whole = "\n".join(programs) + "\n"
    pairs = [(run(programs[0] + "\n"), run(whole)) for _ in range(rounds)]
    return statistics.median((many - one) / (len(programs) - 1) for one, many in pairs)


def main() -> None:
    state = tempfile.mkdtemp(prefix="tui-bench-", dir="/tmp")
    env = {**os.environ, "TUI_STATE_DIR": state}
    programs = [f"print({i} * {i})" for i in range(TURNS)]
    script = "\n".join(programs) + "\n"

    _, made = tui("send", "--new", "print('warm')", "--wait", env=env)
    assert made.returncode == 0, made.stderr
    sid = made.stderr.strip().splitlines()[0]
    try:
        one, out = tui("attach", sid, stdin=programs[0] + "\n", env=env)
        assert out.returncode == 0, out.stderr
        one_cpu = dict(CPU)
        rows: list[tuple[str, str]] = []
        rows.append(
            ("`tui attach ID < script`, 1 turn (process start, attach, one turn)", f"{one * 1000:.0f} ms")
        )
        for output in ("text", "jsonl"):
            took, out = tui("attach", sid, "--output", output, stdin=script, env=env)
            assert out.returncode == 0, out.stderr
            if output == "text":
                assert out.stdout.splitlines() == [str(i * i) for i in range(TURNS)]
            per = (took - one) / (TURNS - 1)
            rows.append((f"{TURNS} turns, --output {output}: whole run", f"{took:.2f} s"))
            rows.append((f"{TURNS} turns, --output {output}: turns/s", f"{TURNS / took:.0f}"))
            rows.append(
                (f"{TURNS} turns, --output {output}: per turn (after the first)", f"{per * 1000:.2f} ms")
            )
            rows.append(
                (
                    f"{TURNS} turns, --output {output}: CPU per turn (after the first), client / worker",
                    " / ".join(
                        f"{(CPU[k] - one_cpu[k]) / (TURNS - 1) * 1000:.2f} ms" for k in ("client", "worker")
                    ),
                )
            )
            if output == "text":
                for name, ms in gaps(state, TURNS - 1).items():
                    rows.append((f"  {name}, median of the journal's times", f"{ms:.2f} ms"))
        workdir = tempfile.mkdtemp(prefix="tui-bench-direct-")
        took = asyncio.run(direct(programs, workdir))
        rows.append((f"{TURNS} programs straight into one warm PythonSession", f"{took:.2f} s"))
        rows.append(("  per program", f"{took / TURNS * 1000:.2f} ms"))
        piped_per = float(
            next(value for name, value in rows if name.endswith("text: per turn (after the first)")).split()[
                0
            ]
        )
        baseline = python_i(programs) * 1000
        rows.append(("`python -i < script`, per statement (after the first)", f"{baseline:.3f} ms"))
        rows.append(("piped turn (text) / `python -i` statement", f"{piped_per / baseline:.0f}x"))
        rows.insert(0, ("load average", Path("/proc/loadavg").read_text().strip()))
        rows.append(
            (
                "overhead of the piped surface + worker + bridge, per turn",
                f"{piped_per - took / TURNS * 1000:.2f} ms",
            )
        )
    finally:
        tui("stop", sid, env=env)
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")


if __name__ == "__main__":
    main()
