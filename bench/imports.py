"""Start-up import figures, each in fresh processes (median of interleaved runs):

- ``import httpx`` after what ``tui attach`` imports anyway (`tui.commands.attach`, the app's
  module), and of it what ``httpx._main`` (httpx's own command line) pulls in that nothing else
  did: click, rich.progress, rich.syntax, rich.table, pygments.lexers;
- ``import tui.protocol.events`` and the first `decode_event` after it, beside the floor of any
  pydantic model: importing pydantic's `BaseModel`, then one small model defined and validated
  (pydantic's plugin look-up, which reads every installed package's entry points, runs on the
  first validator built).

CPU time of the process (``time.process_time``), which a loaded machine disturbs less than the
wall clock.

Run: ``.venv/bin/python bench/imports.py [RUNS]``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TIMED = """
import sys, time
{before}
t = time.process_time()
{measured}
middle = time.process_time()
{after}
end = time.process_time()
print(middle - t, end - middle)
"""

LINE = '{"type":"text","seq":1,"at":"2026-01-01T00:00:00Z","turn_id":"t","text":"hi"}'

CASES = {
    "import httpx (after tui.ui.app)": ("import tui.commands.attach, tui.ui.app", "import httpx", ""),
    "of it, httpx._main's own imports": (
        "import tui.commands.attach, tui.ui.app",
        "import click, rich.progress, rich.syntax, rich.table, pygments.lexers",
        "",
    ),
    "import tui.protocol.events | first decode_event": (
        "",
        "import tui.protocol.events",
        f"tui.protocol.events.decode_event({LINE!r})",
    ),
    "of it, after pydantic's BaseModel | first decode_event": (
        "from pydantic import BaseModel, Field, TypeAdapter",
        "import tui.protocol.events",
        f"tui.protocol.events.decode_event({LINE!r})",
    ),
    "baseline: pydantic's BaseModel, Field, TypeAdapter | one small model built and validated": (
        "",
        "from pydantic import BaseModel, Field, TypeAdapter",
        "class M(BaseModel):\n    a: int = 0\nM(a=1)",
    ),
}


def run(before: str, measured: str, after: str) -> tuple[float, float]:
    code = TIMED.format(before=before, measured=measured, after=after)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, cwd=ROOT
    )
    first, second = out.stdout.split()
    return float(first), float(second)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in CASES}
    load = os.getloadavg()[0]
    for _ in range(runs):
        for name, case in CASES.items():
            times[name].append(run(*case))
    print(f"load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; {runs} runs each")
    for name, pairs in times.items():
        first = statistics.median(p[0] for p in pairs) * 1000
        second = statistics.median(p[1] for p in pairs) * 1000
        total = statistics.median(p[0] + p[1] for p in pairs) * 1000
        if "|" in name:
            print(f"{name}: {first:.1f} ms | {second:.1f} ms (together {total:.1f} ms)")
        else:
            print(f"{name}: {first:.1f} ms")


if __name__ == "__main__":
    main()
