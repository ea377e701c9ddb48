"""Faults under load: a kill -9 storm while turns are sent, 200 followers through `tui web`, a
full disk that fills and empties again (on a 2 MiB tmpfs, when this machine lets us mount one), a
disk that fills in the middle of a `tui send --wait` turn (8 MiB tmpfs, 300 KiB left: each
route's answer time, the worker's CPU and memory while full, the recovery), and 500 followers of
one turn straight on the worker's socket and through `tui web` (append→arrival p50/p95, and the
CPU each process spent).

Run with ``.venv/bin/python bench/soak.py [--kills N] [--followers N] [--fan-out N]
[--only NAME]`` (raise ``ulimit -n`` for the
fan-out); it makes its own state
dirs, listens on loopback only, and stops everything it started. It prints events lost and
repeated (a follower's events against the journal) and requests refused by code. The figures go
into the "Faults" section of docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path

import httpx

from tui.errors import TuiError, WorkerUnavailable
from tui.link.base import Gone
from tui.link.follow import Follower
from tui.link.launch import start_worker
from tui.link.local import LocalLink
from tui.protocol import TurnEnded
from tui.protocol.events import EventBase
from tui.store import StatePaths, create_session, is_live, read_sidecar

DEADLINE = 300.0
"""Seconds the whole run may take."""


def journal_seqs(state: StatePaths, sid: str) -> list[int]:
    lines = state.session(sid).journal.read_bytes().splitlines()
    return [json.loads(line)["seq"] for line in lines if line.strip()]


def stop_all(state: StatePaths, sid: str) -> None:
    car = read_sidecar(state.session(sid).sidecar)
    if car is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(car.pid, signal.SIGKILL)


async def kill_storm(root: Path, kills: int) -> dict[str, int]:
    """Send turns while the worker is killed `kills` times; compare what a follower got with the journal."""
    state = StatePaths(root)
    sid = create_session(state, working_directory=root).id
    start_worker(state, sid, timeout=30.0)
    link = LocalLink(state, sid)
    seen: list[int] = []
    refused: collections.Counter[str] = collections.Counter()
    done = asyncio.Event()

    async def follow() -> None:
        # A link restarts a killed worker at most 3 times a minute; past that, start it again
        # here and follow on from the same cursor with a new link, as `tui attach` would.
        cursor = 0
        while True:
            follower = Follower(LocalLink(state, sid), cursor)
            async for item in follower:
                if isinstance(item, Gone):
                    refused["follower gone (restart budget spent)"] += 1
                    break
                if isinstance(item, EventBase):
                    seen.append(item.seq)
                    if done.is_set() and isinstance(item, TurnEnded):
                        return
            cursor = follower.cursor
            with contextlib.suppress(TuiError):
                await asyncio.to_thread(start_worker, state, sid, timeout=30.0)

    async def send() -> None:
        while not done.is_set():
            try:
                await link.send_turn(
                    "import time; print('x'); time.sleep(0.05)", request_id=uuid.uuid4().hex, delivery="queue"
                )
            except TuiError as exc:
                refused[exc.code] += 1
                await asyncio.sleep(0.1)
                continue
            await asyncio.sleep(0.02)

    follower = asyncio.create_task(follow())
    sender = asyncio.create_task(send())
    killed = 0
    storm_ends = time.monotonic() + 120
    while killed < kills and time.monotonic() < storm_ends and not follower.done():
        await asyncio.sleep(0.7)
        car = read_sidecar(state.session(sid).sidecar)
        if car is None or not is_live(state.session(sid).lock):
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(car.pid, signal.SIGKILL)
            killed += 1
    await asyncio.sleep(1.0)
    done.set()
    await sender
    with contextlib.suppress(WorkerUnavailable, TuiError):
        await link.send_turn("print('last')", request_id=uuid.uuid4().hex)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(follower, 60)
    follower.cancel()
    with contextlib.suppress(BaseException):
        await follower
    await link.close()
    journal = journal_seqs(state, sid)
    stop_all(state, sid)
    upto = set(s for s in journal if s <= (max(seen) if seen else 0))
    return {
        "kills": killed,
        "events in journal": len(journal),
        "events lost": len(upto - set(seen)),
        "events repeated": len(seen) - len(set(seen)),
        **{f"refused {k}": v for k, v in refused.items()},
    }


def start_web(root: Path) -> tuple[subprocess.Popen[str], str, str]:
    token_file = root / "owner.token"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui", "web", "--port", "0", "--token-file", str(token_file)],
        env={**os.environ, "TUI_STATE_DIR": str(root)},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "serving" not in line:
        proc.kill()
        raise SystemExit(f"tui web did not start: {line!r}")
    return proc, line.split()[-1], token_file.read_text().strip()


async def followers_through_web(root: Path, count: int) -> dict[str, float | int]:
    """`count` streams of one session through `tui web`; a turn; how many heard its end."""
    proc, url, token = start_web(root)
    state = StatePaths(root)
    sid = create_session(state, working_directory=root).id
    refused: collections.Counter[str] = collections.Counter()
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=count + 20)
    try:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60.0, limits=limits) as c:
            await c.post(f"/api/sessions/{sid}/wake", json={"wait": 30})
            cursor = (await c.get(f"/api/sessions/{sid}/transcript", params={"limit": 0})).json()["cursor"]
            opened = asyncio.Event()
            n_open = 0

            async def follow() -> float | None:
                nonlocal n_open
                async with c.stream("GET", f"/api/sessions/{sid}/events", params={"cursor": cursor}) as r:
                    if r.status_code != 200:
                        refused[json.loads(await r.aread()).get("error", "?")] += 1
                        return None
                    n_open += 1
                    if n_open == count:
                        opened.set()
                    async for line in r.aiter_lines():
                        if line == "event: turn_ended":
                            return time.monotonic()
                return None

            started = time.monotonic()
            tasks = [asyncio.create_task(follow()) for _ in range(count)]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(opened.wait(), 60)
            opened_in = time.monotonic() - started
            asked = time.monotonic()
            sent = await c.post(f"/api/sessions/{sid}/turn", json={"prompt": "print('hi')"})
            answered_in = time.monotonic() - asked
            if sent.status_code != 202:
                refused[sent.json().get("error", "?")] += 1
            ends = await asyncio.gather(*tasks)
            heard = sorted(t - asked for t in ends if t is not None)
    finally:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        stop_all(state, sid)
    return {
        "followers": count,
        "completed": len(heard),
        "all open in s": round(opened_in, 2),
        "turn answered in ms": round(answered_in * 1000, 1),
        "p95 turn_ended heard in ms": round(heard[int(len(heard) * 0.95) - 1] * 1000, 1) if heard else -1,
        **{f"refused {k}": v for k, v in refused.items()},
    }


_AT = re.compile(rb'"at":"([^"]+)"')


async def _lean_follow(
    open_conn: Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]],
    request: bytes,
    delays: list[tuple[int, float]],
    opened: Callable[[], None],
) -> str:
    """One follower as cheap as a client can be (HTTP/1.0, no chunking; frames cut by hand), so
    that what is measured is the server's fan-out, not the client's parsing. True once
    ``turn_ended`` arrived: "ended", else what happened instead."""
    reader, writer = await open_conn()
    try:
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        if b" 200 " not in head.split(b"\r\n", 1)[0]:
            return "refused " + head.split(b"\r\n", 1)[0].decode(errors="replace")
        opened()
        rest = b""
        while chunk := await reader.read(1 << 16):
            now = datetime.now(UTC)
            frames = (rest + chunk).split(b"\n\n")
            rest = frames.pop()
            for frame in frames:
                if b"\nevent: text\n" in frame:
                    at = _AT.search(frame)
                    if at:
                        seq = int(frame[4 : frame.index(b"\n")]) if frame.startswith(b"id: ") else 0
                        appended = datetime.fromisoformat(at.group(1).decode())
                        delays.append((seq, (now - appended).total_seconds()))
                elif b"\nevent: turn_ended\n" in frame:
                    return "ended"
        return "closed before turn_ended"
    except OSError as exc:
        return f"failed ({type(exc).__name__})"
    finally:
        writer.close()


async def fan_out(root: Path, count: int, via: str) -> dict[str, float | int | str]:
    """`count` followers of one session, straight on the worker's socket or through `tui web`;
    a turn printing 40 lines 0.1 s apart; each text event's delay from its append (its ``at``) to
    its arrival at each follower."""
    proc, url, token = start_web(root) if via == "web" else (None, "", "")
    state = StatePaths(root)
    sid = create_session(state, working_directory=root).id
    car = start_worker(state, sid, timeout=30.0)
    program = "import time\nfor i in range(40):\n    print(i, flush=True)\n    time.sleep(0.1)\n"
    delays: list[tuple[int, float]] = []
    try:
        if via == "web":
            host, port = url.removeprefix("http://").rsplit(":", 1)
            base = f"/api/sessions/{sid}"

            def open_conn() -> Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
                return asyncio.open_connection(host, int(port), limit=1 << 20)

            client = httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
            auth = f"Authorization: Bearer {token}\r\nHost: {host}:{port}\r\n"
        else:
            base = ""

            def open_conn() -> Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
                return asyncio.open_unix_connection(car.socket, limit=1 << 20)

            transport = httpx.AsyncHTTPTransport(uds=car.socket)
            client = httpx.AsyncClient(transport=transport, base_url="http://w", timeout=60)
            auth = "Host: w\r\n"
        async with client:
            cursor = (await client.get(f"{base}/transcript", params={"limit": 0})).json()["cursor"]
            request = f"GET {base}/events?cursor={cursor} HTTP/1.0\r\n{auth}\r\n".encode()
            n_open = 0
            all_open = asyncio.Event()

            def opened() -> None:
                nonlocal n_open
                n_open += 1
                if n_open == count:
                    all_open.set()

            pids = {"worker": car.pid, **({"tui web": proc.pid} if proc is not None else {})}
            before_open = {name: _cpu_ticks(pid) for name, pid in pids.items()}
            statuses = _statuses(state, sid)
            tasks = [
                asyncio.create_task(_lean_follow(open_conn, request, delays, opened)) for _ in range(count)
            ]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(all_open.wait(), 120)
            load = os.getloadavg()[0]
            ticks = {name: _cpu_ticks(pid) for name, pid in pids.items()}
            opening = {name: (ticks[name] - before_open[name]) / os.sysconf("SC_CLK_TCK") for name in pids}
            # Each stream that opens may add a `status` naming everyone attached: count them.
            statuses = _statuses(state, sid) - statuses
            await client.post(f"{base}/turn", json={"prompt": program})
            ended = await asyncio.gather(*tasks)
            spent = {
                name: (_cpu_ticks(pid) - ticks[name]) / os.sysconf("SC_CLK_TCK") for name, pid in pids.items()
            }
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
        stop_all(state, sid)
    flat = sorted(delay for _, delay in delays)
    # Each text event's first and last arrival: a late first one was late before the fan-out wrote
    # it (the worker, the hop to tui web, a core to run on); the spread is the fan-out's own.
    by_event: dict[int, list[float]] = collections.defaultdict(list)
    for seq, delay in delays:
        by_event[seq].append(delay)
    order = sorted(by_event)
    worst_seq = max(order, key=lambda seq: max(by_event[seq]), default=0)
    worst = by_event.get(worst_seq, [-1.0])

    def at(q: float) -> float:
        return round(flat[min(len(flat) - 1, int(len(flat) * q))], 3) if flat else -1.0

    return {
        "followers": count,
        "via": via,
        **{f"streams {k}": v for k, v in collections.Counter(ended).items()},
        "text arrivals": len(flat),
        "append→arrival p50 s": at(0.5),
        "append→arrival p95 s": at(0.95),
        "append→arrival p99 s": at(0.99),
        "append→arrival max s": at(1.0),
        "worst event: which text event": order.index(worst_seq) + 1 if order else 0,
        "worst event: first arrival s": round(min(worst), 3),
        "worst event: last arrival s": round(max(worst), 3),
        "events whose first arrival > 100 ms": sum(min(d) > 0.1 for d in by_event.values()),
        "median event: first-to-last arrival s": round(
            statistics.median(max(d) - min(d) for d in by_event.values()) if by_event else -1.0, 3
        ),
        "load average (1 min) at start": round(load, 2),
        "status events while opening": statuses,
        "largest status bytes": _largest_status(state, sid),
        **{f"{name} CPU s while opening": round(v, 2) for name, v in opening.items()},
        **{f"{name} CPU s for the turn": round(v, 2) for name, v in spent.items()},
    }


def _statuses(state: StatePaths, sid: str) -> int:
    return state.session(sid).journal.read_bytes().count(b'"type":"status"')


def _largest_status(state: StatePaths, sid: str) -> int:
    """The bytes of the largest `status` in the journal: each is written to every follower."""
    lines = state.session(sid).journal.read_bytes().splitlines()
    return max((len(line) for line in lines if b'"type":"status"' in line), default=0)


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def disk_full_mid_turn(free_kib: int = 300) -> dict[str, int | float | str]:
    """An 8 MiB tmpfs left with `free_kib` KiB; `tui send --wait` of a turn printing 100 KB lines;
    while the disk stays full, each route's answer time, the worker's CPU and memory; then space
    comes back and the held turn is written."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return {"skipped": "mounting a tmpfs needs root"}
    with tempfile.TemporaryDirectory(prefix="tui-soak-full-", dir="/tmp") as d:
        mount = ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", d]
        made = await asyncio.to_thread(subprocess.run, mount, capture_output=True)
        if made.returncode != 0:
            return {"skipped": made.stderr.decode().strip()}
        root = Path(d)
        state = StatePaths(root)
        sid = create_session(state, working_directory=root).id
        paths = state.session(sid)
        figures: dict[str, int | float | str] = {}
        try:
            car = start_worker(state, sid, timeout=30.0)
            filler = root / "filler"
            free = shutil.disk_usage(root).free - free_kib * 1024
            with filler.open("wb") as f:
                while free > 0:
                    free -= f.write(b"\0" * min(free, 1 << 20))
            rss_before = _rss_kib(car.pid)
            program = "for i in range(100000):\n    print('x' * 100000)\n"
            t = time.monotonic()
            send = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tui",
                "send",
                "--wait",
                sid,
                program,
                env={**os.environ, "TUI_STATE_DIR": d},
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
            try:
                _, err = await asyncio.wait_for(send.communicate(), 120)
                figures["send --wait exit"] = send.returncode if send.returncode is not None else -1
                figures["send --wait said"] = err.decode().strip().splitlines()[-1][:100] if err else ""
            except TimeoutError:
                send.kill()
                figures["send --wait exit"] = "hung (killed after 120 s)"
            figures["send --wait s"] = round(time.monotonic() - t, 2)
            transport = httpx.AsyncHTTPTransport(uds=car.socket)
            worst: dict[str, float] = collections.defaultdict(float)
            ticks = _cpu_ticks(car.pid)
            window = time.monotonic()
            async with httpx.AsyncClient(transport=transport, base_url="http://w", timeout=60.0) as c:
                for _ in range(10):
                    for name, call in (
                        ("GET /info", lambda: c.get("/info")),
                        ("GET /transcript", lambda: c.get("/transcript", params={"limit": 20})),
                        ("POST /turn", lambda: c.post("/turn", json={"prompt": "print(1)"})),
                        ("POST /interrupt", lambda: c.post("/interrupt", json={})),
                    ):
                        t = time.monotonic()
                        try:
                            r = await call()
                            worst[f"{name} {r.status_code} max s"] = max(
                                worst[f"{name} {r.status_code} max s"], time.monotonic() - t
                            )
                        except httpx.TimeoutException:
                            worst[f"{name} timed out"] += 1
                    await asyncio.sleep(1.0)
                cpu = (_cpu_ticks(car.pid) - ticks) / os.sysconf("SC_CLK_TCK") / (time.monotonic() - window)
                figures.update({k: round(v, 3) for k, v in worst.items()})
                figures["worker CPU % while full"] = round(cpu * 100, 1)
                figures["worker RSS KiB before → while full"] = f"{rss_before} → {_rss_kib(car.pid)}"
                filler.unlink()
                t = time.monotonic()
                while b'"turn_ended"' not in paths.journal.read_bytes().rsplit(b'"turn_started"', 1)[-1]:
                    if time.monotonic() - t > 60:
                        break
                    await asyncio.sleep(0.05)
                figures["held turn written after space back s"] = round(time.monotonic() - t, 2)
                r = await c.post("/turn", json={"prompt": "print('after')"})
                figures["next turn answered"] = r.status_code
            seqs = journal_seqs(state, sid)
            figures["journal whole"] = str(seqs == list(range(1, len(seqs) + 1)))
        finally:
            stop_all(state, sid)
            await asyncio.to_thread(subprocess.run, ["umount", "-l", d], check=False)
    return figures


async def disk_full_cycle(cycles: int) -> dict[str, int | str]:
    """Fill a 2 MiB tmpfs under a live worker, send turns, free it, send again: `cycles` times."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return {"skipped": "mounting a tmpfs needs root"}
    with tempfile.TemporaryDirectory(prefix="tui-soak-disk-", dir="/tmp") as d:
        mount = ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", d]
        made = await asyncio.to_thread(subprocess.run, mount, capture_output=True)
        if made.returncode != 0:
            return {"skipped": made.stderr.decode().strip()}
        root = Path(d)
        state = StatePaths(root)
        sid = create_session(state, working_directory=root).id
        codes: collections.Counter[str] = collections.Counter()
        try:
            car = start_worker(state, sid, timeout=30.0)
            transport = httpx.AsyncHTTPTransport(uds=car.socket)
            async with httpx.AsyncClient(transport=transport, base_url="http://w", timeout=30.0) as c:
                for _ in range(cycles):
                    filler = root / "filler"
                    with contextlib.suppress(OSError), filler.open("wb") as f:
                        while True:
                            f.write(b"x" * 4096)
                            f.flush()
                    for _ in range(5):
                        r = await c.post("/turn", json={"prompt": "print('p' * 50000)", "delivery": "queue"})
                        codes[str(r.json().get("error", r.status_code))] += 1
                    filler.unlink()
                    for _ in range(3):
                        r = await c.post("/turn", json={"prompt": "print('after')", "delivery": "queue"})
                        codes[str(r.json().get("error", r.status_code))] += 1
                    await asyncio.sleep(1.5)
            seqs = journal_seqs(state, sid)
            whole = seqs == list(range(1, len(seqs) + 1))
        finally:
            stop_all(state, sid)
            await asyncio.to_thread(subprocess.run, ["umount", "-l", d], check=False)
    return {
        "cycles": cycles,
        "journal whole": str(whole),
        **{f"answered {k}": v for k, v in codes.items()},
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--followers", type=int, default=200)
    parser.add_argument("--disk-cycles", type=int, default=3)
    parser.add_argument("--fan-out", type=int, default=500, help="followers of the fan-out case")
    parser.add_argument("--only", help="run only the cases whose name contains this")
    args = parser.parse_args()
    cases: list[tuple[str, Callable[[Path], Awaitable[Mapping[str, object]]]]] = [
        ("kill -9 storm", lambda d: kill_storm(d, args.kills)),
        (f"{args.followers} followers through tui web", lambda d: followers_through_web(d, args.followers)),
        ("disk full", lambda d: disk_full_cycle(args.disk_cycles)),
        ("disk full mid-turn", lambda d: disk_full_mid_turn()),
        (f"{args.fan_out} followers fan-out, worker socket", lambda d: fan_out(d, args.fan_out, "worker")),
        (f"{args.fan_out} followers fan-out, through tui web", lambda d: fan_out(d, args.fan_out, "web")),
    ]
    async with asyncio.timeout(DEADLINE * 3):
        for name, run in cases:
            if args.only and args.only not in name:
                continue
            with tempfile.TemporaryDirectory(prefix="tui-soak-", dir="/tmp") as d:
                os.environ["TUI_STATE_DIR"] = d
                figures = await run(Path(d))
            print(f"{name}:")
            for key, value in figures.items():
                print(f"  {key:32} {value}")


if __name__ == "__main__":
    asyncio.run(main())
