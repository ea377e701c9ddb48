"""`tui sessions` over many stopped sessions, beside `ls` of the same sessions folder.

Run with ``.venv/bin/python bench/sessions_list.py [ROUNDS] [--sessions N] [--before DIR]
[--access] [--write-path]``. It makes a state dir of its own with N stopped sessions (10,000 by
default), each as a stopped session is left on disk: its folder, ``session.json``, a journal of a
few lines and ``owner.lock``; every tenth one a child of the one before, every fiftieth archived.
Then, in interleaved rounds, it times the whole process (stdout to /dev/null, from a folder
outside any tree) of ``ls`` of the sessions folder, ``ls -R`` of it, ``python -c pass``, the
imports of ``tui sessions`` alone, ``tui sessions`` (its summary, ``summary.sqlite``, made by the
first run, current), ``tui sessions --json``, ``tui sessions`` once the sessions folder's time
moved (a session made or renamed since: every row's times looked at), ``tui sessions`` with no
summary (every folder read, the summary made again), and with ``--before DIR`` (a folder holding
another tree's ``tui``) that tree's ``tui sessions``; with ``--access``, ``tui sessions`` as it
listed before either (every session through the access layer, sent there by a config.toml that
mentions a cluster in a comment). It prints each median, wall and CPU, beside ``ls``'s with the
ratio.

``--write-path``: a worker's write path (`EventWriter.emit` of whole turns, 7 events each) with
the search index and the summary kept (`tui.worker.indexing.keep_index`), beside the same with
the summary's state writes left out, and beside neither (``bench/search_index.py``'s
`write_path`). The figures go into docs/performance.md ("`tui sessions` over 10,000 sessions").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
TUI = [sys.executable, "-m", "tui"]


def make_sessions(root: Path, count: int) -> None:
    """`count` stopped sessions under `root`/sessions, written as `create_session` and a worker
    that came and went leave them (the records are written here directly: making 10,000 through
    `create_session` takes longer than the bench)."""
    sessions = root / "sessions"
    sessions.mkdir(parents=True)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    previous = None
    for n in range(count):
        sid = f"{n:016x}"
        folder = sessions / sid
        folder.mkdir(mode=0o700)
        (folder / "turns").mkdir()
        (folder / "images").mkdir()
        record = {
            "id": sid,
            "title": f"session number {n} doing something",
            "created_at": (start + timedelta(seconds=n)).isoformat().replace("+00:00", "Z"),
            "working_directory": f"/home/someone/project{n % 7}",
            "agent": "python",
            "model": None,
            "status": "archived" if n % 50 == 49 else "active",
            "parent_id": previous if n % 10 == 9 else None,
            "for_participant": None,
            "budget": None,
        }
        (folder / "session.json").write_text(json.dumps(record, indent=2) + "\n")
        (folder / "journal.jsonl").write_text(
            '{"seq":1,"at":"2026-01-01T00:00:00Z","type":"worker_started"}\n'
            '{"seq":2,"at":"2026-01-01T00:00:01Z","type":"worker_leaving"}\n'
        )
        (folder / "owner.lock").touch()
        previous = sid


def timed(
    argv: list[str], env: dict[str, str], cwd: str, before: Callable[[], None] | None
) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run of `argv` (`before` done first, untimed)."""
    if before is not None:
        before()
    began_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - began_cpu.ru_utime + after.ru_stime - began_cpu.ru_stime


def write_path(folder: Path, turns: int, rounds: int = 5) -> None:
    """Print a worker's write path per turn: neither kept, the index kept, the index and the
    summary kept (medians of `rounds` alternating runs of each pair)."""
    sys.path.insert(0, str(HERE))
    from search_index import _write_once  # type: ignore[import-not-found]

    from tui.store.index_worker import Indexer

    note = Indexer.note
    bare: list[float] = []
    index_only: list[float] = []
    both: list[float] = []
    for r in range(rounds):
        Indexer.note = lambda self, state: None  # type: ignore[method-assign]
        try:
            a, b, _ = _write_once(folder / f"index{r}", turns, first_indexed=r % 2 == 1)
        finally:
            Indexer.note = note  # type: ignore[method-assign]
        c, d, _ = _write_once(folder / f"both{r}", turns, first_indexed=r % 2 == 0)
        bare += [a, c]
        index_only.append(b)
        both.append(d)
    none, index, summed = (statistics.median(x) for x in (bare, index_only, both))
    print(
        f"worker write path, one turn (7 events), medians of {rounds} alternating runs: "
        f"{none * 1e6:,.0f} µs kept nothing, {index * 1e6:,.0f} µs the index kept "
        f"({index / none - 1:+.1%}), {summed * 1e6:,.0f} µs the index and the summary kept "
        f"({summed / none - 1:+.1%}; the summary alone {summed / index - 1:+.1%})"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("rounds", nargs="?", type=int, default=7)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--before", metavar="DIR", help="a folder holding another tree's tui")
    parser.add_argument("--access", action="store_true", help="also every session through the access layer")
    parser.add_argument("--write-path", action="store_true", help="a worker's write path only")
    parser.add_argument("--write-turns", type=int, default=2000)
    args = parser.parse_args()
    if args.write_path:
        with tempfile.TemporaryDirectory(prefix="tui-bench-write-") as tmp:
            write_path(Path(tmp), args.write_turns)
        return
    with tempfile.TemporaryDirectory(prefix="tui-bench-sessions-") as tmp:
        root = Path(tmp, "state")
        began = time.perf_counter()
        make_sessions(root, args.sessions)
        print(f"{args.sessions:,} stopped sessions made in {time.perf_counter() - began:.1f} s", flush=True)
        env = {**os.environ, "TUI_STATE_DIR": str(root), "TUI_CONFIG_DIR": str(Path(tmp, "config"))}
        env.pop("PYTHONPATH", None)
        folder = str(root / "sessions")
        summary = root / "summary.sqlite"
        moved = [0]

        def move() -> None:
            moved[0] += 1
            os.utime(folder, ns=(1_700_000_000_000_000_000 + moved[0],) * 2)

        def forget() -> None:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{summary}{suffix}").unlink(missing_ok=True)

        runs: dict[str, tuple[list[str], dict[str, str], Callable[[], None] | None]] = {
            "ls": (["ls", folder], env, None),
            "ls -R": (["ls", "-R", folder], env, None),
            "python -c pass": ([sys.executable, "-c", "pass"], env, None),
            "its imports alone": ([sys.executable, "-c", "import tui.cli, tui.commands.listing"], env, None),
            "tui sessions": ([*TUI, "sessions"], env, None),
            "tui sessions --json": ([*TUI, "sessions", "--json"], env, None),
            "tui sessions, folder moved": ([*TUI, "sessions"], env, move),
            "tui sessions, no summary": ([*TUI, "sessions"], env, forget),
        }
        if args.before:
            runs["tui sessions, tree before"] = ([*TUI, "sessions"], {**env, "PYTHONPATH": args.before}, None)
        if args.access:
            # A config.toml that mentions a cluster (in a comment: the engine stays local) sends
            # `tui sessions` through the access layer for every session, as it listed them before.
            config = Path(tmp, "config-access")
            config.mkdir()
            (config / "config.toml").write_text("# no [cluster] table: workers are local\n")
            runs["tui sessions, access layer"] = (
                [*TUI, "sessions"],
                {**env, "TUI_CONFIG_DIR": str(config)},
                None,
            )
        for argv, its_env, before in runs.values():  # warm the page cache and the bytecode
            timed(argv, its_env, tmp, before)
        timed([*TUI, "sessions"], env, tmp, None)  # the summary current again
        walls: dict[str, list[float]] = {name: [] for name in runs}
        cpus: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.rounds):
            for name, (argv, its_env, before) in runs.items():
                wall, cpu = timed(argv, its_env, tmp, before)
                walls[name].append(wall)
                cpus[name].append(cpu)
            timed([*TUI, "sessions"], env, tmp, None)  # checked again after the moved folder
        base, base_cpu = statistics.median(walls["ls"]), statistics.median(cpus["ls"])
        print(
            f"load average {os.getloadavg()[0]:.1f}, {args.rounds} interleaved rounds, medians (wall, CPU):"
        )
        for name in runs:
            wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
            print(
                f"  {name:<28} wall {wall * 1000:7.1f} ms {wall / base:6.1f}x ls"
                f"   CPU {cpu * 1000:7.1f} ms {cpu / max(base_cpu, 1e-3):6.1f}x ls"
            )


if __name__ == "__main__":
    main()
