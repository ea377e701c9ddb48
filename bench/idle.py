"""What an idle session costs: CPU, wake-ups and memory of idle python sessions.

Each session gets a real worker and one turn (``print(1)``, so its sandbox is up, as after any
use); then nothing happens for ``--seconds`` (60 by default) while the bench reads, for the
worker and every process under it (bubblewrap, the sandbox's interpreter):

- CPU: utime + stime from ``/proc/PID/stat``, before and after, as a share of one core;
- wake-ups: voluntary + involuntary context switches of every thread
  (``/proc/PID/task/TID/status``), before and after, per second;
- PSS from ``/proc/PID/smaps_rollup`` (the worker alone, and with its sandbox), with the share of
  the state dir's forking process (`tui.commands.forker`, whose pages the workers it forked
  share) counted in each session's figure.

Each figure is per idle session, beside the bench's own process over the same spell as a
baseline (an asyncio program waiting on nothing); PSS beside as many ``python -i`` processes
waiting at their prompt, started in the same run (the interpreter a python session stands for).
Run as root for the sandbox's processes' smaps:
``.venv/bin/python bench/idle.py [--sessions N] [--seconds S]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from tui.link.launch import start_worker
from tui.store import StatePaths, create_session

TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Sample:
    cpu_ticks: int
    switches: int


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def family(pid: int) -> list[int]:
    """`pid` and every process under it."""
    tree = _children()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(tree.get(p, []))
    return out


def sample(pids: list[int]) -> Sample:
    ticks = switches = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
            for tid in os.listdir(f"/proc/{pid}/task"):
                for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        switches += int(line.split()[1])
        except OSError:
            continue
    return Sample(ticks, switches)


def by_thread(pids: list[int]) -> dict[tuple[int, str, str], int]:
    """Context switches of each thread: (pid, tid, its name) → count."""
    out: dict[tuple[int, str, str], int] = {}
    for pid in pids:
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                text = Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines()
                name = text[0].split(None, 1)[1] if text[0].startswith("Name:") else "?"
                out[(pid, tid, name)] = sum(
                    int(line.split()[1])
                    for line in text
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"))
                )
        except OSError:
            continue
    return out


def _kind(pid: int, tid: str, workers: list[int]) -> str:
    """Which process and thread this is: the worker's main thread or another, bwrap, the sandbox's."""
    try:
        program = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        program = "?"
    name = Path(program).name
    where = "worker" if pid in workers else ("bwrap" if name == "bwrap" else f"sandbox ({name})")
    if where != "bwrap":
        where += ", main thread" if tid == str(pid) else ", other threads"
    return where


def pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0


def forker_pids(state_root: Path) -> list[int]:
    """The state dir's forking process (`tui.commands.forker`), when one runs."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"tui.commands.forker" in argv and str(state_root).encode() in argv:
                found.append(int(entry))
    return found


def python_i_pss(n: int) -> float:
    """PSS in MiB of one of `n` ``python -i`` processes (this venv's interpreter) at their prompt."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-i", "-q"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(n)
    ]
    try:
        for proc in procs:  # each answers once it reads its first line: it is at its prompt
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(b"print('up')\n")
            proc.stdin.flush()
            proc.stdout.readline()
        return sum(pss_kib(proc.pid) for proc in procs) / n / 1024
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


async def one_turn(sock: str) -> None:
    transport = httpx.AsyncHTTPTransport(uds=sock)
    async with httpx.AsyncClient(transport=transport, base_url="http://w", timeout=60) as c:
        cursor = int((await c.get("/transcript")).json()["cursor"])
        await c.post("/turn", json={"prompt": "print(1)"})
        params = {"cursor": cursor, "client_id": "bench"}
        async with c.stream("GET", "/events", params=params, timeout=None) as r:
            async for line in r.aiter_lines():
                if line.startswith("data: ") and json.loads(line[6:]).get("type") == "turn_ended":
                    return


async def leave(sock: str) -> None:
    transport = httpx.AsyncHTTPTransport(uds=sock)
    async with httpx.AsyncClient(transport=transport, base_url="http://w", timeout=60) as c:
        await c.post("/leave", json={})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tui-bench-", dir="/tmp") as d:
        os.environ["TUI_CONFIG_DIR"] = d
        state = StatePaths(Path(d) / "state")
        workdir = Path(d) / "work"
        workdir.mkdir()
        cars = []
        for _ in range(args.sessions):
            sid = create_session(state, working_directory=workdir).id
            car = start_worker(state, sid)
            asyncio.run(one_turn(car.socket))
            cars.append(car)
        time.sleep(2)  # let the turn's last writes and the streams' ends settle
        workers = [car.pid for car in cars]
        pids = [p for w in workers for p in family(w)]
        me = os.getpid()
        load = os.getloadavg()[0]
        before, mine, first = sample(pids), sample([me]), by_thread(pids)
        began = time.monotonic()
        time.sleep(args.seconds)
        spell = time.monotonic() - began
        after, mine_after, last = sample(pids), sample([me]), by_thread(pids)
        kinds: dict[str, float] = {}
        for (pid, tid, name), count in last.items():
            kind = _kind(pid, tid, workers)
            kinds[kind] = kinds.get(kind, 0.0) + (count - first.get((pid, tid, name), count)) / spell
        n = args.sessions
        cpu = (after.cpu_ticks - before.cpu_ticks) / TICK / spell * 100 / n
        wakes = (after.switches - before.switches) / spell / n
        base_cpu = (mine_after.cpu_ticks - mine.cpu_ticks) / TICK / spell * 100
        base_wakes = (mine_after.switches - mine.switches) / spell
        worker_pss = sum(pss_kib(w) for w in workers) / n / 1024
        all_pss = sum(pss_kib(p) for p in pids) / n / 1024
        bwrap_pss = sum(pss_kib(p) for p in pids if _kind(p, str(p), workers) == "bwrap") / n / 1024
        sandbox_pss = all_pss - worker_pss - bwrap_pss
        forkers = [p for p in forker_pids(state.root) if p not in workers]  # a forked worker has its cmdline
        forker_pss = sum(pss_kib(p) for p in forkers) / n / 1024  # its pages, shared by the workers it forked
        all_pss += forker_pss
        forked = sum(1 for w in workers if _ppid(w) in forkers)
        baseline_pss = python_i_pss(n)
        end_load = os.getloadavg()[0]
        print(f"load average {load:.2f} at the start, {end_load:.2f} at the end; {spell:.0f} s idle")
        print(
            f"{n} idle session(s), {len(pids) // n} processes and "
            f"{sum(threads(p) for p in pids) // n} threads each (worker: {threads(workers[0])} threads)"
        )
        print(f"CPU per idle session: {cpu:.2f} % of a core (baseline, this bench asleep: {base_cpu:.2f} %)")
        print(f"wake-ups per idle session: {wakes:.1f}/s (baseline, this bench asleep: {base_wakes:.1f}/s)")
        for kind, rate in sorted(kinds.items(), key=lambda row: -row[1]):
            print(f"  of them: {kind}: {rate / n:.1f}/s")
        print(
            f"PSS per idle session: {all_pss:.1f} MiB, of it the worker {worker_pss:.1f} MiB, "
            f"the sandbox's interpreter {sandbox_pss:.1f} MiB, bwrap {bwrap_pss:.1f} MiB, "
            f"the forking process's share {forker_pss:.1f} MiB ({forked} of {n} workers forked); "
            f"baseline, {n} python -i at their prompt: {baseline_pss:.1f} MiB each "
            f"({all_pss / baseline_pss:.1f}x)"
        )
        for car in cars:
            asyncio.run(leave(car.socket))


if __name__ == "__main__":
    main()
