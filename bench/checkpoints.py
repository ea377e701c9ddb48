"""What the checkpoints of a session's folder cost (docs/files.md), beside git's own baseline.

    .venv/bin/python bench/checkpoints.py [--files 10000] [--rounds 15]

On one made-up folder of `--files` files (in folders of 100, a few hundred bytes each):

- ``checkpoint``: a checkpoint after 10 files changed (`FileCheckpoints.snapshot`, inotify naming
  the paths as in a worker), beside ``git add -A && git write-tree`` run by a plain repository of
  its own on the same folder after the same 10 changes (the baseline: what any git-based
  checkpoint costs); then the same by a store that reads the whole folder each time (no inotify);
- ``no-change turn``: what a turn that changes no file adds: its two checkpoints (start and end)
  and the comparison of the two, with inotify and without;
- ``the worker's turn``: the same, as a worker takes them (`TurnFiles.turn_started` and
  `turn_ended` on the event loop: git in a thread, the `files_changed` event made);
- ``rewind 100``: 100 files changed, then put back (`restore`) and the checkpoint after it.

Each figure is the median of `--rounds` rounds, in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tui.store.files import FileCheckpoints
from tui.store.journal import Journal
from tui.worker.files import TurnFiles


def make_folder(root: Path, files: int) -> list[Path]:
    made: list[Path] = []
    for k in range(files):
        folder = root / f"pkg{k // 100:03d}"
        folder.mkdir(exist_ok=True)
        path = folder / f"mod{k % 100:03d}.py"
        path.write_text(f"# module {k}\n" + "def f(x):\n    return x * 2\n" * 8)
        made.append(path)
    return made


def touch(paths: list[Path], round_: int) -> None:
    for path in paths:
        with path.open("a") as f:
            f.write(f"# round {round_}\n")


def plain_git(root: Path, folder: Path) -> dict[str, str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(root),
        "GIT_DIR": str(root / "plain.git"),
        "GIT_WORK_TREE": str(folder),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
    }
    bare = {k: v for k, v in env.items() if k not in ("GIT_DIR", "GIT_WORK_TREE")}
    subprocess.run(["git", "init", "-q", "--bare", str(root / "plain.git")], check=True, env=bare)
    subprocess.run(["git", "config", "core.bare", "false"], check=True, env=env)
    subprocess.run(["git", "add", "-A"], check=True, env=env, cwd=folder)
    return env


async def turn(files: TurnFiles) -> float:
    """A turn that changes no file, as the worker checkpoints it: its two checkpoints, in ms."""
    start = time.perf_counter()
    before = await files.turn_started()
    assert before is not None
    await files.turn_ended("turn", before)
    return ms(start)


def ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tui-bench-") as tmp:
        root = Path(tmp)
        folder = root / "work"
        folder.mkdir()
        files = make_folder(folder, args.files)
        start = time.perf_counter()
        env = plain_git(root, folder)
        first_baseline = ms(start)
        store = FileCheckpoints(root / "files.git", folder, watch=True)
        plain = FileCheckpoints(root / "plain-files.git", folder)  # no inotify: git reads it all
        start = time.perf_counter()
        store.snapshot()
        first = ms(start)
        plain.snapshot()

        baseline: list[float] = []
        ours: list[float] = []
        still: list[float] = []
        read: list[float] = []
        read_still: list[float] = []
        worker_turn: list[float] = []
        made: list[object] = []
        turn_files = TurnFiles(store, made.append, Journal.open_for_reading(root / "journal.jsonl"))
        rewind: list[float] = []
        for r in range(args.rounds):
            ten = files[(r * 10) % len(files) :][:10]
            touch(ten, r)
            start = time.perf_counter()
            subprocess.run(["git", "add", "-A"], check=True, env=env, cwd=folder)
            subprocess.run(["git", "write-tree"], check=True, env=env, cwd=folder, capture_output=True)
            baseline.append(ms(start))
            start = time.perf_counter()
            before = store.snapshot()
            ours.append(ms(start))

            start = time.perf_counter()
            whole = plain.snapshot()
            read.append(ms(start))
            assert whole.tree == before.tree, "inotify missed a change"

            start = time.perf_counter()
            a, b = store.snapshot(), store.snapshot()
            store.changes(a.tree, b.tree)
            still.append(ms(start))

            worker_turn.append(asyncio.run(turn(turn_files)))

            start = time.perf_counter()
            a, b = plain.snapshot(), plain.snapshot()
            plain.changes(a.tree, b.tree)
            read_still.append(ms(start))

            hundred = files[-100:]
            touch(hundred, r)
            after = store.snapshot()
            start = time.perf_counter()
            store.restore(before.tree, store.changed_paths(before.tree, after.tree))
            store.snapshot()
            rewind.append(ms(start))
            assert store.snapshot().tree == before.tree

        def say(name: str, values: list[float], beside: list[float] | None = None) -> None:
            median = statistics.median(values)
            line = f"{name:<38} {median:8.2f} ms"
            if beside is not None:
                base = statistics.median(beside)
                line += f"   baseline {base:6.1f} ms   ratio {median / base:4.2f}x"
            print(line)

        print(
            f"{args.files:,} files, {args.rounds} rounds (medians); the first checkpoint took {first:.0f} ms "
            f"(a plain repository's git init and git add -A: {first_baseline:.0f} ms)"
        )
        say("checkpoint, 10 files changed", ours, baseline)
        say("  the same, reading the whole folder", read, baseline)
        say("a turn that changes no file", still, baseline)
        say("  the same, reading the whole folder", read_still, baseline)
        say("  the same, as the worker takes it", worker_turn, baseline)
        say("rewind of 100 files", rewind)


if __name__ == "__main__":
    main()
