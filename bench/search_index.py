"""The search index of every session (`tui.store.index`, ``tui search``) beside ``grep -rl`` over
the same journals: a state dir of made-up sessions is written under /tmp (and removed after),
then

- the cold build of the index (no index file) beside reading the journals (``cat``), ``grep -c``
  through them and ``json.loads`` of every line;
- warm searches, first page (20 hits, what ``tui search`` prints, with its catch-up check of every
  session), p50/p95 over a mix of rare and common words, phrases and prefixes, beside
  ``grep -rl`` of the same words;
- the index's size on disk beside the journals';
- a worker's write path (`EventWriter.emit` of whole turns) with and without the index kept at
  each turn's end (`tui.worker.indexing.keep_index`, its thread busy indexing).

Run: ``.venv/bin/python bench/search_index.py`` (200 sessions, 20,000 turns: about 20 MB);
``--sessions 2000 --turns 1000000`` for the issue's size (about 1 GB; minutes to write).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from common import WORDS

from tui.store import StatePaths
from tui.store.index import INDEX_FILE, SearchIndex, find

MORE = [
    "connection",
    "refused",
    "timeout",
    "retry",
    "server",
    "config",
    "parse",
    "error",
    "value",
    "import",
    "module",
    "request",
    "response",
    "buffer",
    "token",
    "socket",
    "thread",
    "worker",
    "journal",
    "index",
]
VOCAB = WORDS + MORE + [f"{w}_{n}" for w in MORE for n in range(40)]


def _line(seq: int, at: datetime, typ: str, **fields: object) -> str:
    head = f'{{"seq":{seq},"at":"{at.isoformat().replace("+00:00", "Z")}","type":"{typ}"'
    body = json.dumps(fields, separators=(",", ":"), ensure_ascii=False)[1:-1]
    return head + ("," + body if body else "") + "}\n"


def write_state(root: Path, sessions: int, turns: int, seed: int = 7) -> int:
    """`sessions` sessions holding `turns` turns in all, each turn about 1.4 KB of journal: a prompt,
    a tool call whose output comes in two pieces, a reply, a status. Returns the journals' bytes."""
    rng = random.Random(seed)
    state = StatePaths(root)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    total = 0
    per = max(1, turns // sessions)
    for s in range(sessions):
        sid = f"{s:016x}"
        folder = state.session(sid).root
        folder.mkdir(parents=True)
        (folder / "session.json").write_text(
            json.dumps(
                {
                    "id": sid,
                    "title": f"session {s}",
                    "created_at": start.isoformat(),
                    "working_directory": f"/home/me/project{s % 17}",
                    "agent": "python" if s % 3 else "model",
                    "status": "archived" if s % 5 == 0 else "active",
                }
            )
        )
        lines: list[str] = []
        seq = 0
        at = start + timedelta(seconds=s)
        for t in range(per):
            turn_id = f"t{t:07d}"
            call = f"c{t:07d}"
            at += timedelta(seconds=sessions + rng.random())
            words = rng.choices(VOCAB, k=30)
            rare = " kingfisher" if (s * per + t) % 100_000 == 7 else ""
            prompt = f"print(check({t}))  # {' '.join(words[:6])}{rare}"
            out = " ".join(words[6:20]) + "\n"
            cut = len(out) // 2
            reply = " ".join(words[20:]) + f" ok {t}\n"
            for typ, fields in (
                (
                    "turn_started",
                    {"turn_id": turn_id, "prompt": prompt, "by": {"kind": "owner", "name": "me"}},
                ),
                (
                    "tool_started",
                    {"turn_id": turn_id, "call_id": call, "name": "shell", "args": {"cmd": words[0]}},
                ),
                ("tool_output", {"turn_id": turn_id, "call_id": call, "text": out[:cut]}),
                ("tool_output", {"turn_id": turn_id, "call_id": call, "text": out[cut:]}),
                ("tool_ended", {"turn_id": turn_id, "call_id": call, "status": "completed"}),
                ("text", {"turn_id": turn_id, "text": reply}),
                ("turn_ended", {"turn_id": turn_id, "outcome": "completed", "reply": reply}),
                ("status", {"state": "idle", "tokens_in": t, "tokens_out": t}),
            ):
                seq += 1
                lines.append(_line(seq, at, typ, **fields))
        data = "".join(lines).encode()
        (folder / "journal.jsonl").write_bytes(data)
        total += len(data)
    return total


def _timed(argv: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def _p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def write_path(folder: Path, turns: int, rounds: int = 5) -> tuple[float, float, float, float]:
    """Seconds per turn of `EventWriter.emit` (a turn: 7 events) without and with the index kept
    (medians of `rounds` alternating runs), the writer's own CPU seconds per turn, and the CPU
    seconds per turn of indexing them alone."""
    without: list[float] = []
    with_: list[float] = []
    own: list[float] = []
    for r in range(rounds):
        a, b, c = _write_once(folder / f"round{r}", turns, first_indexed=r % 2 == 1)
        without.append(a)
        with_.append(b)
        own.append(c)
    state = StatePaths(folder / "round0" / "without")
    cpu = time.process_time()
    with SearchIndex(state) as index:
        index.catch_up()
    indexing = (time.process_time() - cpu) / turns
    return statistics.median(without), statistics.median(with_), statistics.median(own), indexing


def _write_once(folder: Path, turns: int, *, first_indexed: bool) -> tuple[float, float, float]:
    from tui.protocol import TextChunk, ToolEnded, ToolOutput, ToolStarted, TurnEnded, TurnStarted
    from tui.protocol.state import SessionState
    from tui.store import Journal
    from tui.summary import note_session
    from tui.worker.indexing import keep_index
    from tui.worker.writer import EventWriter

    out: dict[bool, float] = {}
    for indexed in (True, False) if first_indexed else (False, True):
        state = StatePaths(folder / ("with" if indexed else "without"))
        sid = "f" * 16
        paths = state.session(sid)
        paths.root.mkdir(parents=True)
        paths.record.write_text(
            json.dumps({"id": sid, "created_at": "2026-01-01T00:00:00Z", "working_directory": "/w"})
        )
        if indexed:
            note_session(state.root, sid, worker=True, state="starting")  # as a worker starts
        journal = Journal.open_for_append(paths.journal)
        writer = EventWriter(paths, journal, SessionState())
        writer.quiet = True
        indexer = keep_index(writer.listeners, paths) if indexed else None
        rng = random.Random(3)
        t0, c0 = time.perf_counter(), time.thread_time()
        for t in range(turns):
            tid, call = f"t{t}", f"c{t}"
            words = " ".join(rng.choices(VOCAB, k=40))
            writer.emit(TurnStarted(turn_id=tid, prompt=f"print({t}) # {words[:60]}"))
            writer.emit(ToolStarted(turn_id=tid, call_id=call, name="shell", args={"cmd": "ls"}))
            writer.emit(ToolOutput(turn_id=tid, call_id=call, text=words[:150]))
            writer.emit(ToolOutput(turn_id=tid, call_id=call, text=words[150:]))
            writer.emit(ToolEnded(turn_id=tid, call_id=call))
            writer.emit(TextChunk(turn_id=tid, text=words[:80]))
            writer.emit(TurnEnded(turn_id=tid, outcome="completed", reply=words[:80]))
        out[indexed] = (time.perf_counter() - t0) / turns
        if not indexed:
            cpu = (time.thread_time() - c0) / turns
        if indexer is not None:
            indexer.idle.wait(60)
            indexer.stop()
        journal.close()
    return out[False], out[True], cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--turns", type=int, default=20_000, help="turns in all sessions together")
    parser.add_argument("--searches", type=int, default=40, help="warm searches timed")
    parser.add_argument("--write-turns", type=int, default=1000, help="turns of the write-path case")
    parser.add_argument("--keep", action="store_true", help="leave the state dir (its path is printed)")
    parser.add_argument(
        "--state", metavar="DIR", help="a state dir --keep left: its sessions again, no new ones"
    )
    args = parser.parse_args()

    root = Path(args.state) if args.state else Path(tempfile.mkdtemp(prefix="tui-search-bench-", dir="/tmp"))
    try:
        t = time.perf_counter()
        if args.state:
            for suffix in ("", "-wal", "-shm"):
                Path(str(root / INDEX_FILE) + suffix).unlink(missing_ok=True)
            journals = sum(p.stat().st_size for p in root.glob("sessions/*/journal.jsonl"))
        else:
            journals = write_state(root, args.sessions, args.turns)
        print(
            f"state: {args.sessions:,} sessions, {args.turns:,} turns, journals {journals / 1e6:,.1f} MB "
            f"(written in {time.perf_counter() - t:.1f} s)"
        )
        state = StatePaths(root)
        sessions = str(state.sessions)

        read = min(_timed(["sh", "-c", f"cat {sessions}/*/journal.jsonl > /dev/null"]) for _ in range(2))
        grep_c = _timed(["grep", "-rc", "kingfisher", sessions])
        t = time.perf_counter()
        for journal in state.sessions.glob("*/journal.jsonl"):
            with open(journal, "rb") as f:
                for line in f:
                    json.loads(line)
        decode = time.perf_counter() - t
        t = time.perf_counter()
        with SearchIndex(state) as index:
            index.catch_up()
        build = time.perf_counter() - t
        size = _size(root / INDEX_FILE)
        mb = journals / 1e6
        print(
            f"cold build: {build:.2f} s ({mb / build:,.0f} MB/s) | reading the "
            "journals (cat, warm cache): "
            f"{read:.2f} s ({mb / read:,.0f} MB/s) | grep -rc through them: {grep_c:.2f} s | decoding each "
            f"line (json.loads): {decode:.2f} s ({mb / decode:,.0f} MB/s) | build/cat {build / read:.1f}x, "
            f"build/grep {build / grep_c:.1f}x, build/decode {build / decode:.2f}x"
        )
        print(
            f"size: index {size / 1e6:,.1f} MB, journals {mb:,.1f} MB: {size / journals:.2f} of the journals"
        )

        queries = [
            "kingfisher",
            "connection refused",
            "timeout_3",
            "retr*",
            "quick brown",
            "socket",
            "wizards",
        ]
        times: dict[str, list[float]] = {q: [] for q in queries}
        hits: dict[str, int] = {}
        rounds = max(1, args.searches // len(queries))
        find(state, "warm")  # the first opens the database and reads its pages
        for _ in range(rounds):
            for q in queries:
                t = time.perf_counter()
                found = find(state, q, limit=20)
                times[q].append(time.perf_counter() - t)
                hits[q] = len(found.hits)
        every = [x for q in queries for x in times[q]]
        grep = {
            q: statistics.median(_timed(["grep", "-rlE", q.rstrip("*"), sessions]) for _ in range(3))
            for q in queries[:3]
        }
        for q in queries:
            g = (
                f" | grep -rl {grep[q] * 1000:,.0f} ms: {grep[q] / statistics.median(times[q]):,.0f}x"
                if q in grep
                else ""
            )
            print(
                f"warm search {q!r}: first page ({hits[q]} hits) "
                f"p50 {statistics.median(times[q]) * 1000:.1f} ms, "
                f"p95 {_p(times[q], 0.95) * 1000:.1f} ms{g}"
            )
        g = statistics.median(list(grep.values()))
        print(
            f"warm search, all {len(every)}: p50 {statistics.median(every) * 1000:.1f} ms, p95 "
            f"{_p(every, 0.95) * 1000:.1f} ms | grep -rl median {g * 1000:,.0f} ms: "
            f"{g / _p(every, 0.95):,.0f}x the p95"
        )

        tui = [sys.executable, "-m", "tui", "--state-dir", str(root)]
        cli = statistics.median(_timed([*tui, "search", "kingfisher"]) for _ in range(5))
        bare = statistics.median(_timed([*tui, "--help"]) for _ in range(5))
        print(
            f"the command, `tui search kingfisher` (a process, first page printed): median of 5 "
            f"{cli * 1000:,.0f} ms | `tui --help` {bare * 1000:,.0f} ms | "
            f"grep -rl {grep['kingfisher'] * 1000:,.0f} ms: {grep['kingfisher'] / cli:,.1f}x"
        )

        shutil.rmtree(root / "write", ignore_errors=True)  # what a run on this --state left
        without, with_, own, cpu = write_path(root / "write", args.write_turns)
        print(
            f"worker write path, one turn (7 events emitted), median of 5 alternating runs: "
            f"{without * 1e6:,.0f} µs without the index, {with_ * 1e6:,.0f} µs with it kept at each "
            f"turn's end: {with_ / without - 1:+.1%} | CPU a turn: the writer {own * 1e6:,.0f} µs, "
            f"indexing it {cpu * 1e6:,.0f} µs ({cpu / own:.1%} of the writer's)"
        )
    finally:
        if args.keep or args.state:
            print(f"kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("TUI_STATE_DIR", tempfile.gettempdir())
    main()
