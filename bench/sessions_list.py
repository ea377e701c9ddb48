"""`tui sessions` over many stopped sessions, beside `ls` of the same sessions folder.

Run with ``.venv/bin/python bench/sessions_list.py [ROUNDS] [--sessions N]``. It makes a state
dir of its own with N stopped sessions (10,000 by default), each as a stopped session is left on
disk: its folder, ``session.json``, a journal of a few lines and ``owner.lock``; every tenth one
a child of the one before, every fiftieth archived. Then, in interleaved rounds, it times the whole
process of ``ls`` of the sessions folder, ``ls -R`` of it, ``python -c pass``, ``tui sessions``,
``tui sessions --json`` and ``tui sessions`` as it listed before (every session through the
access layer) (stdout to /dev/null), and prints each median, wall and CPU, beside ``ls``'s with
the ratio. The figures go into docs/performance.md ("`tui sessions` over 10,000 sessions").
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


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run of `argv`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("rounds", nargs="?", type=int, default=7)
    parser.add_argument("--sessions", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tui-bench-sessions-") as tmp:
        root = Path(tmp, "state")
        began = time.perf_counter()
        make_sessions(root, args.sessions)
        print(f"{args.sessions:,} stopped sessions made in {time.perf_counter() - began:.1f} s", flush=True)
        env = {**os.environ, "TUI_STATE_DIR": str(root), "TUI_CONFIG_DIR": str(Path(tmp, "config"))}
        # A config.toml that mentions a cluster (in a comment: the engine stays local) sends
        # `tui sessions` through the access layer for every session, as it listed them before.
        before = Path(tmp, "config-before")
        before.mkdir()
        (before / "config.toml").write_text("# no [cluster] table: workers are local\n")
        env_before = {**env, "TUI_CONFIG_DIR": str(before)}
        folder = str(root / "sessions")
        runs: dict[str, list[str]] = {
            "ls": ["ls", folder],
            "ls -R": ["ls", "-R", folder],
            "python -c pass": [sys.executable, "-c", "pass"],
            "tui sessions": [*TUI, "sessions"],
            "tui sessions --json": [*TUI, "sessions", "--json"],
            "tui sessions, as before": [*TUI, "sessions"],
        }
        envs = {name: env_before if name.endswith("as before") else env for name in runs}
        for name, argv in runs.items():  # warm the page cache and the bytecode
            timed(argv, envs[name])
        walls: dict[str, list[float]] = {name: [] for name in runs}
        cpus: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.rounds):
            for name, argv in runs.items():
                wall, cpu = timed(argv, envs[name])
                walls[name].append(wall)
                cpus[name].append(cpu)
        base, base_cpu = statistics.median(walls["ls"]), statistics.median(cpus["ls"])
        print(
            f"load average {os.getloadavg()[0]:.1f}, {args.rounds} interleaved rounds, medians (wall, CPU):"
        )
        for name in runs:
            wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
            print(
                f"  {name:<26} wall {wall * 1000:7.1f} ms {wall / base:6.1f}x ls"
                f"   CPU {cpu * 1000:7.1f} ms {cpu / max(base_cpu, 1e-3):6.1f}x ls"
            )


if __name__ == "__main__":
    main()
