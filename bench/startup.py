"""Start-up figures: how long a fresh process takes before it does anything useful.

Each figure is the median of several fresh processes: ``python -c pass`` (the floor), ``tui --help``,
``tui sessions`` on an empty state dir, a worker's start to its bridge answering, and
``tui send ID PROMPT --wait`` to a live worker (process start, imports, the turn, the reply).

First frames on a pty (120x40), beside a bare Textual app (Static + Footer) in the same run: the
time from the process's start until the terminal shows a text of the frame (the footer's
``Detach`` for the bare app and an empty session; the last turn's ``9999``, in its coloured
prompt or its output, on a 10,000-turn session), for ``tui attach ID`` to a live worker. An
empty session's first frame is the app's first screen, drawn before the session is reached;
the 10,000-turn session's is the session screen with the last turns drawn.

The first frames are taken in interleaved rounds (the bare app, then each `tui attach`, again
and again), each with the CPU time the process had used when its frame showed.

Run: ``.venv/bin/python bench/startup.py [RUNS] [--frames] [--before DIR]`` (``--frames``: the
first frames only; ``--before DIR``: also `tui attach` of another tree, DIR holding its ``tui``
folder, as from ``git archive``, put first on ``PYTHONPATH``), from any folder (the first
frames run from ``/``, since ``python -m tui`` puts the current folder first on the path). Each
figure is printed on its own line.
"""

from __future__ import annotations

import asyncio
import compileall
import fcntl
import importlib.util
import os
import pty
import resource
import select
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

import httpx

import tui as tui_package
from tui.link.launch import start_worker
from tui.store import StatePaths, create_session


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


BARE_APP = """
from textual.app import App
from textual.widgets import Footer, Static


class Bare(App[None]):
    BINDINGS = [("ctrl+d", "quit", "Detach")]

    def compose(self):
        yield Static("bare app")
        yield Footer()


Bare().run()
"""


def first_frame(
    argv: list[str], marker: bytes, env: dict[str, str], timeout: float = 120.0
) -> tuple[float, float]:
    """Seconds from starting `argv` on a 120x40 pty until its output holds `marker`, and the CPU
    time (user + system, from ``/proc/PID/stat``) the process had used by then."""
    t = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child, out of any tree (`python -m tui` puts the current folder first)
        os.chdir("/")
        os.execvpe(argv[0], argv, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    seen = b""
    try:
        while time.perf_counter() - t < timeout:
            if select.select([fd], [], [], 0.5)[0]:
                try:
                    seen += os.read(fd, 65536)
                except OSError:
                    break
                if marker in seen:
                    wall = time.perf_counter() - t
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    return wall, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        raise RuntimeError(f"{argv} never showed {marker!r}; it showed {seen[-500:]!r}")
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)


def bench_first_frames(
    state: StatePaths, workdir: Path, env: dict[str, str], runs: int, before: str | None = None
) -> None:
    """First frame of the bare app, of `tui attach` to an empty session and to a 10,000-turn one,
    in interleaved rounds (one of each a round, so the machine's load falls on all alike);
    with `before` (a folder holding another tree's ``tui``), that tree's `tui attach` too."""
    spec = importlib.util.spec_from_file_location("coldstart", Path(__file__).with_name("coldstart.py"))
    assert spec is not None and spec.loader is not None
    coldstart = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(coldstart)
    pty_env = {**env, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
    bare_file = workdir / "bare_app.py"
    bare_file.write_text(BARE_APP)
    empty = create_session(state, working_directory=workdir).id
    long = coldstart._write_session(state, workdir, 10_000)
    cars = [start_worker(state, sid, timeout=120.0) for sid in (empty, long)]
    attach = [sys.executable, "-m", "tui", "attach"]
    reached = "tui attach, empty session, until the session screen shows (its status row's 'idle')"
    cases: list[tuple[str, list[str], bytes, dict[str, str]]] = [
        ("bare Textual app (Static + Footer)", [sys.executable, str(bare_file)], b"Detach", pty_env),
        ("tui attach, empty session", [*attach, empty], b"Detach", pty_env),
        (reached, [*attach, empty], b"idle", pty_env),
        ("tui attach, 10,000-turn session", [*attach, long], b"9999", pty_env),
    ]
    if before is not None:
        old_env = {**pty_env, "PYTHONPATH": before}
        cases += [
            ("tree before: tui attach, empty session", [*attach, empty], b"Detach", old_env),
            (f"tree before: {reached}", [*attach, empty], b"idle", old_env),
            ("tree before: tui attach, 10,000-turn session", [*attach, long], b"9999", old_env),
        ]
    try:
        for _, argv, marker, case_env in cases:
            first_frame(argv, marker, case_env)  # bytecode, page cache
        walls: dict[str, list[float]] = {name: [] for name, *_ in cases}
        cpus: dict[str, list[float]] = {name: [] for name, *_ in cases}
        for _ in range(runs):
            for name, argv, marker, case_env in cases:
                wall, cpu = first_frame(argv, marker, case_env)
                walls[name].append(wall)
                cpus[name].append(cpu)
        bare_name = cases[0][0]
        bare_wall, bare_cpu = statistics.median(walls[bare_name]), statistics.median(cpus[bare_name])
        for name, *_ in cases:
            wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
            print(
                f"first frame on a pty, {name}: median {wall * 1000:.0f} ms "
                f"(min {min(walls[name]) * 1000:.0f}, max {max(walls[name]) * 1000:.0f}), "
                f"CPU {cpu * 1000:.0f} ms; {wall / bare_wall:.2f}x the bare app's wall, "
                f"{cpu / bare_cpu:.2f}x its CPU"
            )
    finally:
        for car in cars:
            asyncio.run(_leave(car.socket))


async def _leave(sock: str) -> None:
    transport = httpx.AsyncHTTPTransport(uds=sock)
    async with httpx.AsyncClient(transport=transport, base_url="http://w", timeout=60) as client:
        await client.post("/leave", json={})


def main() -> None:
    numbers = [a for a in sys.argv[1:] if a.isdigit()]
    runs = int(numbers[0]) if numbers else 7
    only_frames = "--frames" in sys.argv
    before = sys.argv[sys.argv.index("--before") + 1] if "--before" in sys.argv else None
    print(f"load average: {Path('/proc/loadavg').read_text().strip()}")
    # An installed package has its bytecode; without it every process would compile tui's source.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    compileall.compile_dir(os.path.dirname(os.path.abspath(tui_package.__file__)), quiet=1)
    tui = [sys.executable, "-m", "tui"]
    with tempfile.TemporaryDirectory(prefix="tui-s-", dir="/tmp") as tmp:
        env = {**os.environ, "TUI_STATE_DIR": str(Path(tmp) / "state")}
        if only_frames:
            workdir = Path(tmp) / "work"
            workdir.mkdir()
            bench_first_frames(StatePaths(Path(env["TUI_STATE_DIR"])), workdir, env, runs, before)
            return
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
        bench_first_frames(state, workdir, env, runs, before)
    print(f"load average: {Path('/proc/loadavg').read_text().strip()}")


if __name__ == "__main__":
    main()
