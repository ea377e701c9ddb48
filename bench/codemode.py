"""Code Mode figures: how fast a warm sandboxed session answers, beside a fresh ``python3 -c``.

Run with ``.venv/bin/python bench/codemode.py``; every figure is the median of repeated runs,
in milliseconds. The figures go into the "Code Mode" section of docs/performance.md.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable

from tui.codemode import Limits, PythonSession, Tool

LOOP = "for i in range(1_000_000):\n    pass"
TOOL_CALLS = "for i in range(1000):\n    note(i)"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:9.3f} ms"


async def median_of(runs: int, once: Callable[[], Awaitable[float]]) -> float:
    return statistics.median([await once() for _ in range(runs)])


def fresh_python(source: str, runs: int) -> float:
    """Median wall time of ``python3 -c source`` as a new process."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", source], check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


ECHO = """
import os, sys
src, dst = int(sys.argv[1]), int(sys.argv[2])
while data := os.read(src, 4096):
    os.write(dst, data)
"""


def pipe_round_trips(count: int, runs: int) -> float:
    """Median time of ``count`` round trips of a small message to a plain echo process: the floor."""
    to_child, child_in = os.pipe()
    child_out, from_child = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-c", ECHO, str(to_child), str(from_child)], pass_fds=(to_child, from_child)
    )
    os.close(to_child)
    os.close(from_child)
    message = b'{"t":"call","id":1,"tool":"note","args":{"i":1}}'
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        for _ in range(count):
            os.write(child_in, message)
            os.read(child_out, 4096)
        times.append(time.perf_counter() - started)
    os.close(child_in)
    child.wait()
    os.close(child_out)
    return statistics.median(times)


async def main() -> None:
    rows: list[tuple[str, float]] = []
    workdir = tempfile.mkdtemp(prefix="tui-bench-")

    async def note(i: int) -> int:
        return i

    catalog = [
        Tool(
            "note", "returns its argument", {"type": "object", "properties": {"i": {"type": "integer"}}}, note
        )
    ]

    async def start_close() -> float:
        started = time.perf_counter()
        session = PythonSession(workdir)
        await session.start()
        elapsed = time.perf_counter() - started
        await session.close()
        return elapsed

    rows.append(("start a fresh session (sandbox up, interpreter ready)", await median_of(15, start_close)))

    async with PythonSession(workdir, Limits(observe_seconds=5.0)) as session:
        print(f"sandbox: {session.sandbox}\n")

        async def run(source: str, tools: list[Tool] | None = None) -> float:
            started = time.perf_counter()
            result = await session.execute(source=source, catalog=tools)
            elapsed = time.perf_counter() - started
            assert result.status == "completed", result
            return elapsed

        for _ in range(20):
            await run("1")
        rows.append(
            ("execute -> result, trivial program ('1'), warm", await median_of(300, lambda: run("1")))
        )
        rows.append(("execute -> result, 1e6-iteration loop, warm", await median_of(15, lambda: run(LOOP))))
        rows.append(
            (
                "1000 tool calls through the broker, warm",
                await median_of(15, lambda: run(TOOL_CALLS, catalog)),
            )
        )

    async with PythonSession(workdir, Limits(observe_seconds=0.02)) as session:

        async def stop_latency(source: str) -> float:
            first = await session.execute(source=source)
            assert first.status == "still_working", first
            started = time.perf_counter()
            result = await session.stop()
            elapsed = time.perf_counter() - started
            assert result.status == "terminated", result
            return elapsed

        rows.append(("stop a busy loop", await median_of(20, lambda: stop_latency("while True:\n    pass"))))
        rows.append(
            (
                "stop a sleeping program",
                await median_of(20, lambda: stop_latency("import time\ntime.sleep(60)")),
            )
        )

    async with PythonSession(workdir, Limits(observe_seconds=0.0)) as session:
        await session.execute(source="while True:\n    print('.', end='')")

        async def one_wait() -> float:
            started = time.perf_counter()
            await session.wait()
            return time.perf_counter() - started

        rows.append(("wait on a printing program (observe_seconds=0)", await median_of(200, one_wait)))
        await session.stop()

    rows.append(("1000 round trips to a plain echo process through a pipe", pipe_round_trips(1000, 15)))
    rows.append(("fresh `python3 -c 'pass'`", fresh_python("pass", 15)))
    rows.append(("fresh `python3 -c` 1e6-iteration loop", fresh_python(LOOP, 15)))

    width = max(len(name) for name, _ in rows)
    for name, seconds in rows:
        print(f"{name.ljust(width)}  {ms(seconds)}")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    python = sys.version.split()[0]
    print(f"\n(median of repeated runs; {os.cpu_count()} CPUs; load average {load}; Python {python})")


if __name__ == "__main__":
    asyncio.run(main())
