"""1,000 followers of one turn through `tui web` beside as many straight on the worker's socket:
each text event's delay from its append (its ``at``) to its arrival at each follower, p50, p95,
p99 and max, in interleaved rounds (worker, web, worker, web …), medians of the rounds and the
median of the rounds' p99 ratios. The followers and the turn are `bench/soak.py`'s fan-out case
(lean HTTP/1.0 clients in this process, a turn printing 40 lines 0.1 s apart). Each round also
says where its tail came from: when the worst event reached its first follower and its last (a
late first arrival was late before the fan-out wrote it: the worker, the hop to `tui web`, a core
to run on), the median event's spread from its first follower to its last (the fan-out's own
cost), how many events reached no follower within 100 ms, and the bytes of the largest `status`
(each is written to every follower) and how many were written while the followers attached.

Run with ``.venv/bin/python bench/fanout.py [--followers N] [--rounds N] [--before DIR]``
(``--before DIR``: also, in each round, `tui web` and the session's worker of another tree, DIR
holding its ``tui``, run with ``PYTHONPATH=DIR``). The figures go into docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import tempfile
from pathlib import Path

from soak import fan_out

from tui.link import launch
from tui.link.launch import worker_command

KEYS = ("p50", "p95", "p99", "max")


def _worker_of_path(state_root: Path, session_id: str) -> list[str]:
    return [sys.executable, "-m", "tui.commands.worker", "--state-dir", str(state_root), session_id]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--followers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", metavar="DIR", help="a folder holding another tree's tui, run beside")
    args = parser.parse_args()
    vias = ("worker", "web", "before") if args.before else ("worker", "web")
    # `tui web` keeps a third of its open files as connections, a quarter of those from one
    # address (`tui.web.limits`): every follower here comes from 127.0.0.1.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max(soft, 12 * args.followers + 256)
    resource.setrlimit(
        resource.RLIMIT_NOFILE, (wanted if hard == resource.RLIM_INFINITY else min(hard, wanted), hard)
    )
    figures: dict[str, list[dict[str, float]]] = {via: [] for via in vias}
    here = os.getcwd()
    for _ in range(args.rounds):
        for via in vias:
            with tempfile.TemporaryDirectory(prefix="tui-fanout-", dir="/tmp") as d:
                os.environ["TUI_STATE_DIR"] = d
                # `python -m tui` puts its working directory first on the path: the state dir, so
                # that PYTHONPATH says which tree's tui runs.
                os.chdir(d)
                path = os.environ.get("PYTHONPATH")
                if via == "before":
                    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (args.before, path)))
                    # The session's worker of that tree too (what a `status` says is the worker's):
                    # not isolated, so that PYTHONPATH says which tree's worker runs.
                    launch.worker_command = _worker_of_path
                try:
                    got = await fan_out(Path(d), args.followers, "worker" if via == "worker" else "web")
                finally:
                    launch.worker_command = worker_command
                    os.chdir(here)
                    if path is None:
                        os.environ.pop("PYTHONPATH", None)
                    else:
                        os.environ["PYTHONPATH"] = path
            row = {k: float(got[f"append→arrival {k} s"]) for k in KEYS}
            refused = {k: v for k, v in got.items() if k.startswith("streams ") and k != "streams ended"}
            if refused:
                print(f"{via:6} not every follower heard the turn: {refused}", flush=True)
            row["cpu"] = float(got.get("tui web CPU s for the turn", 0.0))
            row["which"] = float(got["worst event: which text event"])
            row["first"] = float(got["worst event: first arrival s"])
            row["last"] = float(got["worst event: last arrival s"])
            row["spread"] = float(got["median event: first-to-last arrival s"])
            row["late"] = float(got["events whose first arrival > 100 ms"])
            row["load"] = float(got["load average (1 min) at start"])
            row["status"] = float(got.get("largest status bytes", 0))
            row["statuses"] = float(got.get("status events while opening", 0))
            figures[via].append(row)
            print(
                f"{via:6} load {row['load']:.1f}: "
                + ", ".join(f"{k} {row[k] * 1000:,.0f} ms" for k in KEYS)
                + (f"; tui web CPU for the turn {row['cpu']:.2f} s" if via != "worker" else "")
                + f"; the worst event (text {row['which']:.0f} of 40) reached its first follower at"
                + f" {row['first'] * 1000:,.0f} ms,"
                + f" its last at {row['last'] * 1000:,.0f} ms; first to last, median event"
                + f" {row['spread'] * 1000:,.0f} ms; {row['late']:.0f} of 40 events reached no follower"
                + " within 100 ms"
                + f"; largest status {row['status']:,.0f} bytes, {row['statuses']:.0f} written while the"
                + " followers attached",
                flush=True,
            )
    labels = {
        "worker": "straight on the worker's socket",
        "web": "through tui web",
        "before": f"through tui web of {args.before}",
    }
    for via in vias:
        rows = figures[via]
        label = labels[via]
        medians = ", ".join(f"{k} {statistics.median(r[k] for r in rows) * 1000:,.0f} ms" for k in KEYS)
        print(f"{args.followers:,} followers {label}: {medians}")
    for via in vias[1:]:
        ratios = [
            b["p99"] / a["p99"] for a, b in zip(figures["worker"], figures[via], strict=True) if a["p99"] > 0
        ]
        print(f"p99 {labels[via]} / on the worker's socket: {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
