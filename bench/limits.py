"""What the bounds of issue 38 cost: the count before a child starts, and a context source's
output read as it comes.

Run with ``.venv/bin/python bench/limits.py [SESSIONS] [RUNS]``:

- the count `delegate` makes under the state dir's lock before it starts a child (every
  session's record read, each child's owner lock asked), on a state dir of SESSIONS sessions
  (a tenth of them children), beside `list_sessions` of the same dir (what ``tui sessions``
  reads);
- one run of a context source printing 64 KiB, and one printing forever (``yes``, cut at 1 MiB),
  each read as the worker reads them, beside the same 64 KiB read whole with ``communicate()``;
  with this process's peak memory after the endless one.

The figures go into docs/performance.md, "Bounds on children and context sources".
"""

from __future__ import annotations

import asyncio
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tui.store import StatePaths, create_session, list_sessions
from tui.worker.children import _live_children
from tui.worker.sources import _read_bounded, _stop


def _median_ms(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


async def _read(command: str, *, whole: bool) -> float:
    start = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", command, stdout=asyncio.subprocess.PIPE, start_new_session=True
    )
    assert proc.stdout is not None
    if whole:
        await proc.communicate()
    else:
        _, _, cut = await _read_bounded(proc.stdout)
        if cut:
            await _stop(proc)
        else:
            await proc.wait()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    sessions = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    with tempfile.TemporaryDirectory(prefix="tui-bench-") as d:
        state = StatePaths(Path(d))
        parents = [create_session(state, working_directory=d).id for _ in range(sessions - sessions // 10)]
        for i in range(sessions // 10):
            create_session(state, working_directory=d, parent_id=parents[i % len(parents)])
        listed = _median_ms(lambda: list_sessions(state, include_archived=True), runs)
        counted = _median_ms(lambda: _live_children(state, parents[0]), runs)
    print(
        f"{sessions} sessions: list_sessions {listed:.1f} ms, the count before a child {counted:.1f} ms "
        f"(x{counted / listed:.2f})"
    )

    small = "head -c 65536 /dev/zero"
    whole = statistics.median(asyncio.run(_read(small, whole=True)) for _ in range(runs))
    bounded = statistics.median(asyncio.run(_read(small, whole=False)) for _ in range(runs))
    endless = statistics.median(asyncio.run(_read("yes", whole=False)) for _ in range(runs))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"64 KiB output: read whole {whole:.1f} ms, as it comes {bounded:.1f} ms (x{bounded / whole:.2f})")
    print(f"endless output (yes): cut at 1 MiB and stopped in {endless:.1f} ms; peak memory {peak:.0f} MiB")


if __name__ == "__main__":
    main()
