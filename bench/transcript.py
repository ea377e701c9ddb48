"""The transcript drawn as lines: each figure beside its baseline from the same run.

    .venv/bin/python bench/transcript.py            # every case, medians of 3 fresh processes
    .venv/bin/python bench/transcript.py --runs 1 --only stream log
    .venv/bin/python bench/transcript.py --only paging-big idle

Cases (headless ``App.run_test`` at 120x40; each in a fresh process):

- ``stream`` / ``log``: loop lag p99 while one reply streams 20,000 chunks at 2,000 chunks/s into
  the app (a python session: program output), beside a bare Textual ``Log`` fed the same chunks at
  the same rate;
- ``stream-worker`` / ``log-lines``: the same end to end: a real worker (its own process) runs a
  program printing 20,000 lines at 2,000 a second and the app follows it; beside a bare ``Log``
  fed the same lines at the same rate;
- ``paging`` / ``idle``: PageUp from the bottom of a real worker's 10,000-turn session (the worker
  in its own process) to its first turn: the loop's longest stall per page (p95, median; and for
  the pages on which a fetched page arrived), the pages, and the longest full collection of the
  garbage collector meanwhile; beside the same lag sampler idle in the same kind of process;
- ``paging-big``: the same through 200 turns that each printed 300 lines (a python session's
  usual turn: every kept turn holds its lines);
- ``home`` / ``cli``: Ctrl+Home on a real worker's 2,000-turn session until turn 1 shows, beside
  ``tui transcript`` of the same session (the whole session read and printed);
- ``first10k`` / ``first0`` / ``first40``: the first frame of a 10,000-turn session beside an
  empty one, and beside a 40-turn one (the same screen drawn; each session's worker already
  running in its own process);
- ``resize`` / ``resize0``: a resize to 80 columns with a 100,000-line turn on screen until the
  first row is drawn from lines made at the new width (and until the app is idle again, the
  turns out of view measured), beside the same resize of an empty session;
- ``search``: Ctrl+F, a word only turn 3 of 10,000 holds, Enter: until that turn is shown.
"""

from __future__ import annotations

import os
import sys
import time

_T0 = time.perf_counter()
import argparse  # noqa: E402
import asyncio  # noqa: E402
import contextlib  # noqa: E402
import gc  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import AsyncIterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from common import Lag, rss_mib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SIZE = (120, 40)
RATE = 2_000
"""Chunks a second while a reply streams."""


class FullCollections:
    """How long each full collection of Python's garbage collector stopped the process."""

    def __init__(self) -> None:
        self.durations: list[float] = []
        self._began = 0.0
        gc.callbacks.append(self._seen)

    def _seen(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.durations.append(time.perf_counter() - self._began)

    def longest_ms(self) -> float:
        return 1000 * max(self.durations, default=0.0)


async def until(condition: Any, limit: float = 600.0) -> None:
    deadline = time.perf_counter() + limit
    while not condition():
        if time.perf_counter() > deadline:
            raise TimeoutError("the app did not get there")
        await asyncio.sleep(0.005)


def history(n: int) -> list[Any]:
    from tui.protocol import By, TurnRecord

    return [
        TurnRecord(
            turn_id=f"h{i}",
            prompt=f"print(fib({i % 30}))",
            reply=f"fib({i % 30}) is {i * 7}; computed in {i % 13} ms.\n",
            outcome="completed",
            by=By(name="alice"),
            started_seq=2 * i + 1,
            ended_seq=2 * i + 2,
        )
        for i in range(n)
    ]


def chunks(n: int) -> list[str]:
    return [f"line {i} of the program's output\n" if i % 4 == 3 else f"chunk {i} " for i in range(n)]


async def paced(items: list[str], write: Any) -> None:
    """`write` each item, `RATE` a second (in bursts of 20 every 10 ms)."""
    start = time.perf_counter()
    for n in range(0, len(items), 20):
        for item in items[n : n + 20]:
            write(item)
        ahead = start + (n + 20) / RATE - time.perf_counter()
        await asyncio.sleep(max(0.0, ahead))


def case_stream(count: int = 20_000) -> dict[str, float]:
    from tui.protocol import TextChunk
    from tui.testing.double import WorkerLink
    from tui.ui import TuiApp

    async def run() -> dict[str, float]:
        link = WorkerLink(history=history(200))
        app = TuiApp(link)
        async with app.run_test(size=SIZE) as pilot:
            await until(app.session.attached.is_set)
            await pilot.pause()
            turn = link.start_turn("for i in range(20000): print(i)")
            await until(lambda: app.session.transcript.live is not None)
            with Lag() as lag:
                await paced(chunks(count), lambda c: link.emit(TextChunk(turn_id=turn, text=c)))
                await until(lambda: app.session.cursor >= len(link.journal))
                await pilot.pause()
            return {"lag_p99_ms": lag.p99_ms()}

    return asyncio.run(run())


PROGRAM = """import time
began = time.perf_counter()
for i in range(20_000):
    print(f"line {i} of the program's output")
    if i % 20 == 19:
        time.sleep(max(0.0, began + (i + 1) / 2_000 - time.perf_counter()))
"""
"""A program printing 20,000 lines at 2,000 a second (in bursts of 20 every 10 ms)."""


def case_stream_worker() -> dict[str, float]:
    """`PROGRAM` run by a real worker (its own process, a python session), followed by the app."""

    async def body(link: Any, state: str, sid: str) -> dict[str, float]:
        async with attached(link) as (app, pilot):
            view = app.session.transcript
            with Lag() as lag:
                await link.send_turn(PROGRAM, request_id="bench-stream")
                await until(lambda: view.live is not None, 60)
                await until(lambda: view.live is None, 600)
                await pilot.pause()
            said = view.turn_views()[-1].record.reply
            assert "line 19999 of" in said, said[-200:]
            return {"lag_p99_ms": lag.p99_ms()}

    return on_real_worker(1, body)


def case_log(count: int = 20_000, lines: bool = False) -> dict[str, float]:
    from textual.app import App, ComposeResult
    from textual.widgets import Input, Log

    class Bare(App[None]):
        def compose(self) -> ComposeResult:
            yield Log()
            yield Input()

    async def run() -> dict[str, float]:
        app = Bare()
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            log = app.query_one(Log)
            items = [f"line {i} of the program's output\n" for i in range(count)] if lines else chunks(count)
            with Lag() as lag:
                await paced(items, log.write)
                await pilot.pause()
            return {"lag_p99_ms": lag.p99_ms()}

    return asyncio.run(run())


def case_paging(turns: int = 10_000, lines: int = 1) -> dict[str, float]:
    """PageUp from the bottom of a real worker's session to its first turn (the worker in its
    own process, as a user runs it); each turn printed `lines` lines."""
    collections = FullCollections()

    async def body(link: Any, state: str, sid: str) -> dict[str, float]:
        async with attached(link) as (app, pilot):
            view = app.session.transcript
            stalls: list[float] = []
            arrived: list[float] = []
            started = time.perf_counter()
            collections.durations.clear()  # those of start-up are not paging's
            rss_before = rss_mib()
            with Lag() as lag:
                while not (view.turn_views()[0].record.prompt == "print(0)" and view.scroll_y == 0):
                    lag.take()
                    first = view.items[0] if view.items else None
                    await pilot.press("pageup")
                    await pilot.pause()
                    stalls.append(lag.take())
                    if view.items and view.items[0] is not first:
                        arrived.append(stalls[-1])
            stalls.sort()
            arrived.sort()
            return {
                "pages": float(len(stalls)),
                "seconds": time.perf_counter() - started,
                "stall_p95_ms": 1000 * stalls[int(0.95 * (len(stalls) - 1))],
                "stall_median_ms": 1000 * statistics.median(stalls),
                "arrived_pages": float(len(arrived)),
                "arrived_p95_ms": 1000 * arrived[int(0.95 * (len(arrived) - 1))],
                "arrived_median_ms": 1000 * statistics.median(arrived),
                "kept_records": float(len(view.items)),
                "full_collection_max_ms": collections.longest_ms(),
                "rss_growth_mib": rss_mib() - rss_before,
            }

    return on_real_worker(turns, body, lines=lines)


def case_idle(pages: int = 400) -> dict[str, float]:
    """The same sampler and the same pauses, in an app doing nothing."""
    from tui.testing.double import WorkerLink
    from tui.ui import TuiApp

    async def run() -> dict[str, float]:
        app = TuiApp(WorkerLink(history=history(200)))
        async with app.run_test(size=SIZE) as pilot:
            await until(app.session.attached.is_set)
            await pilot.pause()
            stalls = []
            with Lag() as lag:
                for _ in range(pages):
                    lag.take()
                    await pilot.pause()
                    stalls.append(lag.take())
            stalls.sort()
            return {
                "stall_p95_ms": 1000 * stalls[int(0.95 * (len(stalls) - 1))],
                "stall_median_ms": 1000 * statistics.median(stalls),
            }

    return asyncio.run(run())


def _coldstart() -> Any:
    spec = importlib.util.spec_from_file_location("coldstart", os.path.join(HERE, "coldstart.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _session(turns: int, lines: int = 1) -> tuple[str, str]:
    """A state folder holding a stopped python session of `turns` turns, each having printed
    `lines` lines (its working folder inside), and its id."""
    from tui.store import StatePaths

    state = tempfile.mkdtemp(prefix="tui-bench-")
    work = os.path.join(state, "work")
    os.mkdir(work)
    sid = _coldstart()._write_session(StatePaths(Path(state)), Path(work), turns, lines)
    return state, sid


def on_real_worker(turns: int, body: Any, *, lines: int = 1) -> dict[str, float]:
    """``await body(link, state, sid)`` on a session of `turns` turns (each having printed `lines`
    lines) whose worker runs in its own process, as a user runs it; the session is removed after."""
    from tui.access.local import LocalAccess
    from tui.store import StatePaths

    state, sid = _session(turns, lines)

    async def run() -> dict[str, float]:
        access = LocalAccess(StatePaths(Path(state)))
        link = await access.link(sid, client_id="tui:bench:1")
        try:
            await link.transcript(1)  # the worker answers: it runs
            result: dict[str, float] = await body(link, state, sid)
            return result
        finally:
            await access.stop(sid)
            await link.close()

    try:
        return asyncio.run(run())
    finally:
        shutil.rmtree(state, ignore_errors=True)


@contextlib.asynccontextmanager
async def attached(link: Any) -> AsyncIterator[tuple[Any, Any]]:
    """The app on `link`, headless, once its first transcript is drawn: ``(app, pilot)``."""
    from tui.ui import TuiApp

    app = TuiApp(link)
    async with app.run_test(size=SIZE) as pilot:
        await until(app.session.attached.is_set, 120)
        await pilot.pause()
        yield app, pilot


def case_home(turns: int = 2_000) -> dict[str, float]:
    async def body(link: Any, state: str, sid: str) -> dict[str, float]:
        async with attached(link) as (app, pilot):
            view = app.session.transcript
            with Lag() as lag:
                started = time.perf_counter()
                await pilot.press("ctrl+home")
                await until(lambda: view.turn_views()[0].record.prompt == "print(0)" and view.scroll_y == 0)
                await pilot.pause()
                took = time.perf_counter() - started
        env = {**os.environ, "TUI_STATE_DIR": state}
        cli = [sys.executable, "-m", "tui", "transcript", sid]
        subprocess.run(cli, env=env, capture_output=True, check=True)  # noqa: ASYNC221  (bytecode, caches)
        started = time.perf_counter()
        out = subprocess.run(cli, env=env, capture_output=True, check=True)  # noqa: ASYNC221
        cli_took = time.perf_counter() - started
        assert b"print(0)" in out.stdout
        return {"ctrl_home_s": took, "stall_max_ms": 1000 * lag.take(), "tui_transcript_s": cli_took}

    return on_real_worker(turns, body)


def case_first(turns: int) -> dict[str, float]:
    """The first frame of a session of `turns` turns whose worker already runs (in its own
    process, as a user attaches to it): from this process's start, less writing the session and
    starting its worker."""
    # counted, as `tui attach` imports them before its first frame
    import tui.access.local
    import tui.store
    import tui.ui  # noqa: F401

    set_up = time.perf_counter()

    async def body(link: Any, state: str, sid: str) -> dict[str, float]:
        excluded = time.perf_counter() - set_up
        async with attached(link):
            return {"first_frame_s": time.perf_counter() - _T0 - excluded}

    return on_real_worker(turns, body)


def case_resize(lines: int = 100_000) -> dict[str, float]:
    from textual import events
    from textual.geometry import Size

    from tui.testing.double import WorkerLink
    from tui.ui import TuiApp

    records = history(400 if lines else 0)
    if lines:
        big = "".join(f"line {i} of the output\n" for i in range(lines))
        records[-2] = records[-2].model_copy(update={"reply": big})
    link = WorkerLink(history=records)

    async def run() -> dict[str, float]:
        app = TuiApp(link)
        async with app.run_test(size=SIZE) as pilot:
            await until(app.session.attached.is_set)
            await pilot.pause()
            view = app.session.transcript
            at_new_width: list[float] = []  # when a row was drawn from lines made at the new width
            draw = view.render_line

            def render_line(y: int) -> Any:
                if view.region.width == 80 and view._width == view.line_width and not at_new_width:
                    at_new_width.append(time.perf_counter())
                return draw(y)

            view.render_line = render_line  # type: ignore[method-assign]
            with Lag() as lag:
                started = time.perf_counter()
                # as `pilot.resize_terminal` does, without its wait for the app to be idle
                app._driver._size = Size(80, 40)  # type: ignore[union-attr]
                app.post_message(events.Resize(Size(80, 40), Size(80, 40)))
                await until(lambda: bool(at_new_width))
                shown = at_new_width[0] - started
                await pilot.pause()
                idle = time.perf_counter() - started
            return {"resize_s": shown, "resize_until_idle_s": idle, "stall_ms": 1000 * lag.take()}

    return asyncio.run(run())


def case_search(turns: int = 10_000) -> dict[str, float]:
    from tui.testing.double import WorkerLink
    from tui.ui import TuiApp

    records = history(turns)
    records[3] = records[3].model_copy(update={"reply": "a zebra crossing\n"})
    link = WorkerLink(history=records)

    async def run() -> dict[str, float]:
        app = TuiApp(link)
        async with app.run_test(size=SIZE) as pilot:
            await until(app.session.attached.is_set)
            view = app.session.transcript
            await pilot.press("ctrl+f", *"zebra")
            await pilot.pause()
            started = time.perf_counter()
            await pilot.press("enter")
            await until(lambda: view.selected == "h3" and not view.is_fetching)
            await pilot.pause()
            return {"first_match_shown_s": time.perf_counter() - started}

    return asyncio.run(run())


CASES = {
    "stream": case_stream,
    "log": case_log,
    "stream-worker": case_stream_worker,
    "log-lines": lambda: case_log(lines=True),
    "paging": case_paging,
    "paging-big": lambda: case_paging(200, lines=300),
    "idle": case_idle,
    "home": case_home,
    "home10k": lambda: case_home(10_000),
    "first10k": lambda: case_first(10_000),
    "first40": lambda: case_first(40),
    "first0": lambda: case_first(0),
    "resize": case_resize,
    "resize0": lambda: case_resize(0),
    "search": case_search,
}


def run_case(name: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--case", name], capture_output=True, text=True, timeout=900, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"{name} failed:\n{out.stderr[-3000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--case", choices=sorted(CASES))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", nargs="*", choices=sorted(CASES))
    args = parser.parse_args()
    if args.case:
        print(json.dumps(CASES[args.case]()))
        return
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    r: dict[str, dict[str, float]] = {}
    for name in args.only or list(CASES):
        once = ("paging", "paging-big", "home", "home10k")
        runs = [run_case(name) for _ in range(args.runs if name not in once else 1)]
        r[name] = {k: statistics.median(x[k] for x in runs) for k in runs[0]}
        print(name, {k: round(v, 4) for k, v in r[name].items()}, flush=True)
    if "stream" in r and "log" in r:
        a, b = r["stream"]["lag_p99_ms"], r["log"]["lag_p99_ms"]
        print(
            f"streaming 20k chunks at {RATE}/s: loop lag p99 {a:.1f} ms, a bare Log {b:.1f} ms ({a / b:.2f}x)"
        )
    if "stream-worker" in r and "log-lines" in r:
        a, b = r["stream-worker"]["lag_p99_ms"], r["log-lines"]["lag_p99_ms"]
        print(
            f"a real worker's program printing 20k lines at {RATE}/s: loop lag p99 {a:.1f} ms, "
            f"a bare Log fed the same lines {b:.1f} ms ({a / b:.2f}x)"
        )
    if "paging-big" in r and "idle" in r:
        big = r["paging-big"]
        print(
            f"PageUp to the first of 200 turns of 300 lines: {int(big['pages'])} pages, stall p95 "
            f"{big['stall_p95_ms']:.1f} ms (pages arriving: p95 {big['arrived_p95_ms']:.1f} ms), "
            f"longest full collection {big['full_collection_max_ms']:.1f} ms"
        )
    if "paging" in r and "idle" in r:
        a, b = r["paging"]["stall_p95_ms"], r["idle"]["stall_p95_ms"]
        pages = int(r["paging"]["pages"])
        c = r["paging"]["arrived_p95_ms"]
        print(
            f"PageUp to the first of 10,000 turns: {pages} pages, stall p95 {a:.1f} ms "
            f"(pages arriving: p95 {c:.1f} ms), idle {b:.1f} ms; "
            f"memory +{r['paging']['rss_growth_mib']:.0f} MiB"
        )
    for name, size in (("home", "2,000"), ("home10k", "10,000")):
        if name in r:
            a, b, s = r[name]["ctrl_home_s"], r[name]["tui_transcript_s"], r[name]["stall_max_ms"]
            print(
                f"Ctrl+Home to turn 1 of {size}: {a:.2f} s, tui transcript {b:.2f} s ({a / b:.2f}x); "
                f"the loop's longest stall {s:.0f} ms"
            )
    if "first10k" in r and "first0" in r:
        a, b = r["first10k"]["first_frame_s"], r["first0"]["first_frame_s"]
        print(f"first frame of 10,000 turns: {a:.2f} s, empty {b:.2f} s ({a / b:.2f}x)")
    if "first10k" in r and "first40" in r:
        a, b = r["first10k"]["first_frame_s"], r["first40"]["first_frame_s"]
        print(f"first frame of 10,000 turns: {a:.2f} s, of 40 turns (same screen) {b:.2f} s ({a / b:.2f}x)")
    if "resize" in r and "resize0" in r:
        a, b = 1000 * r["resize"]["resize_s"], 1000 * r["resize0"]["resize_s"]
        c, d = 1000 * r["resize"]["resize_until_idle_s"], 1000 * r["resize0"]["resize_until_idle_s"]
        print(
            f"resize with a 100,000-line turn on screen: {a:.0f} ms, "
            f"an empty session {b:.0f} ms ({a / b:.2f}x); until idle {c:.0f} ms, empty {d:.0f} ms"
        )
    if "search" in r:
        print(f"search to the first match shown: {1000 * r['search']['first_match_shown_s']:.0f} ms")


if __name__ == "__main__":
    main()
