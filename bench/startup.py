"""Start-up figures: how long a fresh process takes before it does anything useful.

Each figure is the median of several fresh processes: ``python -c pass`` (the floor), ``tui --help``,
``tui sessions`` on an empty state dir, a worker's start to its bridge answering, and
``tui send ID PROMPT --wait`` to a live worker (process start, imports, the turn, the reply).

Run: ``.venv/bin/python bench/startup.py [RUNS]``. Each figure is printed on its own line.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

# bench/tui.py would shadow the package when this folder is first on the path.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

from tui.store import StatePaths, create_session  # noqa: E402
from tui.worker.launch import start_worker  # noqa: E402


def _median_ms(times: list[float]) -> str:
    med, low, high = (round(x * 1000) for x in (statistics.median(times), min(times), max(times)))
    return f"median {med} ms (min {low}, max {high})"


def _time_process(argv: list[str], env: dict[str, str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return times


async def _leave(sock: str) -> None:
    transport = httpx.AsyncHTTPTransport(uds=sock)
    async with httpx.AsyncClient(transport=transport, base_url="http://w", timeout=60) as client:
        await client.post("/leave", json={})


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    tui = [sys.executable, "-m", "tui"]
    with tempfile.TemporaryDirectory(prefix="tui-s-", dir="/tmp") as tmp:
        env = {**os.environ, "TUI_STATE_DIR": str(Path(tmp) / "state")}
        print(f"python -c pass: {_median_ms(_time_process([sys.executable, '-c', 'pass'], env, runs))}")
        print(f"tui --help: {_median_ms(_time_process([*tui, '--help'], env, runs))}")
        print(f"tui sessions, empty state dir: {_median_ms(_time_process([*tui, 'sessions'], env, runs))}")

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
            _time_process(send, env, 1)  # the first turn starts Code Mode's sandbox
            print(f"tui send --wait to a live worker: {_median_ms(_time_process(send, env, runs))}")
        finally:
            asyncio.run(_leave(car.socket))


if __name__ == "__main__":
    main()
