"""Cold start and replay figures (issue 16), each beside its baseline in the same run.

- attach to a stopped session of 1k / 10k / 50k turns: a worker started on the session (its
  journal of 3 events a turn, its ``turns/`` records, a checkpoint left by the worker that
  stopped it), to the first ``GET /transcript?limit=40`` answered; beside it the same on a
  session with no history (the bare start);
- replay of 100,000 events into a client (`BridgeClient.events` from cursor 0, decoded), beside
  ``json.loads`` of every line of the same journal file.

Run: ``.venv/bin/python bench/coldstart.py [RUNS] [--replay]`` (``--replay``: the replay only).
Each figure is printed on its own line with the ratio to its baseline, and the machine's load
average.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

from tui.link.client import BridgeClient
from tui.link.launch import start_worker
from tui.protocol import Status, TextChunk, TurnEnded, TurnRecord, TurnStarted, WorkerLeaving, WorkerStarted
from tui.protocol.routes import BRIDGE
from tui.store import StatePaths, create_session


def _write_session(state: StatePaths, workdir: Path, turns: int, lines: int = 1) -> str:
    """A stopped session of `turns` python turns (each printed `lines` lines): journal, turns/
    records, as a worker leaves them."""
    sid = create_session(state, working_directory=workdir).id
    paths = state.session(sid)
    paths.turns.mkdir(mode=0o700, exist_ok=True)
    at = datetime(2026, 11, 30, tzinfo=UTC)
    seq = 0
    with open(paths.journal, "wb") as journal:

        def put(event: object) -> int:
            nonlocal seq
            seq += 1
            journal.write(event.model_copy(update={"seq": seq, "at": at}).model_dump_json().encode() + b"\n")  # type: ignore[attr-defined]
            return seq

        put(WorkerStarted(epoch=1, pid=1, version="bench", agent="python"))
        for i in range(turns):
            turn_id = f"t-{i:010x}"
            reply = f"{i}\n" + "".join(f"row {k} of what turn {i} printed\n" for k in range(1, lines))
            started = put(TurnStarted(turn_id=turn_id, prompt=f"print({i})"))
            put(TextChunk(turn_id=turn_id, text=reply))
            ended = put(TurnEnded(turn_id=turn_id, outcome="completed", reply=reply))
            record = TurnRecord(
                turn_id=turn_id,
                prompt=f"print({i})",
                started_seq=started,
                ended_seq=ended,
                started_at=at.isoformat(),
                ended_at=at.isoformat(),
                reply=reply,
                outcome="completed",
            )
            (paths.turns / f"{started:012d}-{turn_id}.json").write_text(record.model_dump_json() + "\n")
        put(Status(state="idle"))
        put(WorkerLeaving(reason="bench"))
    return sid


async def _transcript(sock: str) -> None:
    async with BridgeClient(socket_path=sock) as client:
        await client.call(BRIDGE["transcript"], query={"limit": 40})


async def _leave(sock: str) -> None:
    transport = httpx.AsyncHTTPTransport(uds=sock)
    async with httpx.AsyncClient(transport=transport, base_url="http://w", timeout=60) as client:
        await client.post("/leave", json={})


def _attach_once(state: StatePaths, sid: str) -> float:
    t = time.perf_counter()
    car = start_worker(state, sid, timeout=120.0)
    asyncio.run(_transcript(car.socket))
    took = time.perf_counter() - t
    asyncio.run(_leave(car.socket))
    from tui.link.launch import wait_for_release

    asyncio.run(wait_for_release(state.session(sid).lock, 10.0))
    return took


def bench_attach(state: StatePaths, workdir: Path, runs: int) -> None:
    bare_sid = create_session(state, working_directory=workdir).id
    _attach_once(state, bare_sid)  # a first start writes bytecode
    bare = statistics.median(_attach_once(state, bare_sid) for _ in range(runs))
    print(f"attach to a stopped session, no history (baseline): {bare:.2f} s")
    for turns in (1_000, 10_000, 50_000):
        sid = _write_session(state, workdir, turns)
        first = _attach_once(state, sid)  # the first start after the journal was written elsewhere
        times = [_attach_once(state, sid) for _ in range(runs)]
        med = statistics.median(times)
        print(
            f"attach to a stopped session of {turns:,} turns: {med:.2f} s ({med / bare:.1f}x the bare start; "
            f"min {min(times):.2f}, max {max(times):.2f}; first start, no checkpoint: {first:.2f} s)"
        )


async def _replay(sock: str, n: int) -> tuple[float, float]:
    """Wall and CPU seconds (this process: the client's share) to receive and decode `n` events."""
    async with BridgeClient(socket_path=sock, timeout=120) as client:
        got = 0
        t, c = time.perf_counter(), time.process_time()
        async for _event in client.events(0):
            got += 1
            if got >= n:
                break
        return time.perf_counter() - t, time.process_time() - c


def bench_replay(state: StatePaths, workdir: Path, runs: int) -> None:
    sid = _write_session(state, workdir, 33_333)
    journal = state.session(sid).journal
    n = journal.read_bytes().count(b"\n")
    walls, cpus = [], []
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        with open(journal, "rb") as f:
            for line in f:
                json.loads(line)
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    base_wall, base_cpu = n / statistics.median(walls), n / statistics.median(cpus)
    car = start_worker(state, sid, timeout=120.0)
    try:
        took = [asyncio.run(_replay(car.socket, n)) for _ in range(runs)]
    finally:
        asyncio.run(_leave(car.socket))
    wall = n / statistics.median(w for w, _ in took)
    cpu = n / statistics.median(c for _, c in took)
    print(
        f"json.loads of the journal, {n:,} lines (baseline): {base_wall:,.0f} events/s "
        f"({base_cpu:,.0f} per CPU second)"
    )
    print(
        f"replay of {n:,} events into a client (BridgeClient.events from cursor 0, decoded): "
        f"{wall:,.0f} events/s ({wall / base_wall:.2f}x); the client's CPU: {cpu:,.0f} events per CPU "
        f"second ({cpu / base_cpu:.2f}x)"
    )


def _load() -> str:
    return Path("/proc/loadavg").read_text().strip()


def main() -> None:
    numbers = [a for a in sys.argv[1:] if a.isdigit()]
    runs = int(numbers[0]) if numbers else 3
    print(f"load average before: {_load()}")
    with tempfile.TemporaryDirectory(prefix="tui-cold-", dir="/tmp") as d:
        state = StatePaths(Path(d) / "state")
        workdir = Path(d) / "work"
        workdir.mkdir()
        bench_replay(state, workdir, runs)
        if "--replay" not in sys.argv:
            bench_attach(state, workdir, runs)
    print(f"load average after: {_load()}")


if __name__ == "__main__":
    main()
