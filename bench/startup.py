"""Start-up figures: how long a fresh process takes before it does anything useful.

Each figure is the median of several fresh processes: ``python -c pass`` (the floor), ``tui --help``,
``tui sessions`` on an empty state dir, a worker's start to its bridge answering, and
``tui send ID PROMPT --wait`` to a live worker (process start, imports, the turn, the reply).

Run: ``.venv/bin/python bench/startup.py [RUNS]`` (from any folder: ``python -m tui`` puts the current
folder first on the path). Each figure is printed on its own line.
"""

from __future__ import annotations

import asyncio
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

# bench/tui.py would shadow the package when this folder is first on the path.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import tui as tui_package  # noqa: E402
from tui.store import StatePaths, create_session  # noqa: E402
from tui.worker.launch import start_worker  # noqa: E402


def _median_ms(times: list[float]) -> str:
    med, low, high = (round(x * 1000) for x in (statistics.median(times), min(times), max(times)))
    return f"median {med} ms (min {low}, max {high})"


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _time_process(argv: list[str], env: dict[str, str], runs: int) -> str:
    """Wall and CPU time of fresh processes: CPU time varies far less with the machine's load."""
    walls, cpus = [], []
    for _ in range(runs):
        t, c = time.perf_counter(), _cpu_of_children()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        walls.append(time.perf_counter() - t)
        cpus.append(_cpu_of_children() - c)
    return f"{_median_ms(walls)}; CPU median {round(statistics.median(cpus) * 1000)} ms"


async def _leave(sock: str) -> None:
    transport = httpx.AsyncHTTPTransport(uds=sock)
    async with httpx.AsyncClient(transport=transport, base_url="http://w", timeout=60) as client:
        await client.post("/leave", json={})


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    # An installed package has its bytecode; without it every process would compile tui's source.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    compileall.compile_dir(os.path.dirname(os.path.abspath(tui_package.__file__)), quiet=1)
    tui = [sys.executable, "-m", "tui"]
    with tempfile.TemporaryDirectory(prefix="tui-s-", dir="/tmp") as tmp:
        env = {**os.environ, "TUI_STATE_DIR": str(Path(tmp) / "state")}
        print(f"python -c pass: {_time_process([sys.executable, '-c', 'pass'], env, runs)}")
        print(f"tui --help: {_time_process([*tui, '--help'], env, runs)}")
        print(f"tui sessions, empty state dir: {_time_process([*tui, 'sessions'], env, runs)}")

        state = StatePaths(Path(env["TUI_STATE_DIR"]))
        workdir = Path(tmp) / "work"
        workdir.mkdir()
        starts = []
        for _ in range(runs):
            sid = create_session(state, working_directory=workdir).id
            t = time.perf_counter()
            car = start_worker(state, sid)
            starts.append(time.perf_counter() - t)
            asyncio.run(_leave(car.socket))
        print(f"worker start to bridge ready: {_median_ms(starts)}")

        sid = create_session(state, working_directory=workdir).id
        car = start_worker(state, sid)
        try:
            send = [*tui, "send", sid, "print(1)", "--wait", "--timeout", "60"]
            subprocess.run(
                send, env=env, check=True, stdout=subprocess.DEVNULL
            )  # the first turn starts Code Mode's sandbox
            print(f"tui send --wait to a live worker: {_time_process(send, env, runs)}")
        finally:
            asyncio.run(_leave(car.socket))


if __name__ == "__main__":
    main()
