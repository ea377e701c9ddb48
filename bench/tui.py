"""The full-screen app's figures, headless (``App.run_test`` at 120x40), on a MockLink.

    .venv/bin/python bench/tui.py            # every case, medians of 3 fresh processes
    .venv/bin/python bench/tui.py --runs 5

Cases: the first frame of a minimal Textual app (the reference, same run), of the app on an
empty session and on a 10,000-turn one; one reply streamed as 20,000 small chunks (tok/s); one
reply of 100/200/400 paragraphs (Markdown); memory after attaching to 10,000 turns and
paging up through them with the keyboard (time and loop block per page); a search
over 10,000 turns (the first match shown); a reattach with a 100,000-line turn among the last 40
(first frame, then a resize). A python session's replies are program output, shown verbatim; a
model's are Markdown: the ``_md`` cases measure the Markdown path. Each case runs in a fresh
process so that imports and caches count as a user sees them.
"""

from __future__ import annotations

import os
import sys
import time

_T0 = time.perf_counter()
# This file is named like the package: keep its folder off the import path.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
from typing import Any  # noqa: E402

SIZE = (120, 40)
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "wizards",
    "quietly",
    "judge",
    "boxing",
]


def rss_mib() -> float:
    """This process's resident memory."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


async def until(pilot: Any, condition: Any, limit: float = 600.0) -> None:
    deadline = time.perf_counter() + limit
    while not condition():
        if time.perf_counter() > deadline:
            raise TimeoutError("the app did not get there")
        await asyncio.sleep(0.005)


def case_minimal() -> dict[str, float]:
    from textual.app import App, ComposeResult
    from textual.widgets import Header, Input, Log

    class Minimal(App[None]):
        def compose(self) -> ComposeResult:
            yield Header()
            yield Log()
            yield Input()

    async def run() -> float:
        app = Minimal()
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            return time.perf_counter() - _T0

    return {"first_frame_s": asyncio.run(run())}


def history(n: int) -> list[Any]:
    from tui.protocol import By, TurnRecord

    return [
        TurnRecord(
            turn_id=f"h{i}",
            prompt=f"print(fib({i % 30}))",
            reply=f"fib({i % 30}) is **{i * 7}**; computed in {i % 13} ms.\n",
            outcome="completed",
            by=By(name="alice"),
            started_seq=2 * i + 1,
            ended_seq=2 * i + 2,
        )
        for i in range(n)
    ]


def case_first_frame(turns: int, agent: str = "python") -> dict[str, float]:
    from tui.link.mock import MockLink
    from tui.ui import TuiApp

    built = time.perf_counter()
    records = history(turns)
    link = MockLink(history=records, agent=agent)
    excluded = time.perf_counter() - built  # the session's history lives in the worker, not here

    async def run() -> float:
        app = TuiApp(link)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, app.session.attached.is_set)
            await pilot.pause()
            return time.perf_counter() - _T0 - excluded

    return {"first_frame_s": asyncio.run(run())}


def tokens(n: int) -> list[str]:
    out = []
    for i in range(n):
        word = WORDS[i % len(WORDS)]
        out.append(word[:3] + " " if (i + 1) % 60 else word[:2] + ".\n\n")
    return out


async def stream_into(app: Any, pilot: Any, link: Any, chunks: list[str]) -> float:
    from tui.protocol import TextChunk

    turn = link.start_turn("write()")
    await until(pilot, lambda: app.session.transcript.live is not None)
    start = time.perf_counter()
    for n, chunk in enumerate(chunks):
        link.emit(TextChunk(turn_id=turn, text=chunk))
        if n % 50 == 0:
            await asyncio.sleep(0)
    link.end_turn()
    await until(pilot, lambda: app.session.turn is None and app.session.cursor >= len(link.journal))
    await pilot.pause()
    return time.perf_counter() - start


def case_stream(count: int, agent: str = "python") -> dict[str, float]:
    from tui.link.mock import MockLink
    from tui.ui import TuiApp

    async def run() -> dict[str, float]:
        link = MockLink(agent=agent)
        app = TuiApp(link)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, app.session.attached.is_set)
            seconds = await stream_into(app, pilot, link, tokens(count))
        return {"seconds": seconds, "tok_per_s": count / seconds}

    return asyncio.run(run())


def paragraphs(n: int) -> list[str]:
    chunks = []
    for p in range(n):
        sentence = " ".join(WORDS[(p + k) % len(WORDS)] for k in range(40))
        text = f"Paragraph {p}: {sentence}. **Bold** and `code` here.\n\n"
        chunks.extend(text[i : i + 16] for i in range(0, len(text), 16))
    return chunks


def case_paragraphs(n: int) -> dict[str, float]:
    from tui.link.mock import MockLink
    from tui.ui import TuiApp

    async def run() -> dict[str, float]:
        link = MockLink(agent="llm")
        app = TuiApp(link)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, app.session.attached.is_set)
            seconds = await stream_into(app, pilot, link, paragraphs(n))
        return {"seconds": seconds}

    return asyncio.run(run())


class LoopLag:
    """The longest the event loop was blocked (a 5 ms ticker's worst lateness), reset at will."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._tick())

    async def _tick(self) -> None:
        while True:
            at = time.perf_counter()
            await asyncio.sleep(0.005)
            self.worst = max(self.worst, time.perf_counter() - at - 0.005)

    def take(self) -> float:
        worst, self.worst = self.worst, 0.0
        return worst


def case_memory(turns: int) -> dict[str, float]:
    """Paging from the bottom to the first turn with the keyboard (Ctrl+Home, which at the top
    loads the next older page): time and loop block per page, memory before and after."""
    from tui.link.mock import MockLink
    from tui.ui import TuiApp

    records = history(turns)
    link = MockLink(history=records)
    before = rss_mib()

    async def run() -> dict[str, float]:
        app = TuiApp(link)
        lag = LoopLag()
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, app.session.attached.is_set)
            view = app.session.transcript
            await until(pilot, lambda: view.mounted_turns >= 40)
            await pilot.pause()
            attached = rss_mib()
            marks: dict[str, float] = {"rss_attached_mib": attached - before}
            lag.start()
            pages: list[float] = []
            blocks: list[float] = []
            most_kept = most_mounted = 0
            loaded_marks = {1000, 2000, 5000, turns}
            paged = 0
            while not (view.turn_views()[0].record.turn_id == "h0" and view.scroll_y == 0):
                first = view.turn_views()[0].record.turn_id
                started = time.perf_counter()
                lag.take()
                await pilot.press("ctrl+home")
                await until(
                    pilot, lambda f=first: view.turn_views()[0].record.turn_id != f or view.scroll_y == 0
                )
                await until(pilot, lambda: not view.is_fetching)
                await pilot.pause()
                if view.turn_views()[0].record.turn_id != first:
                    pages.append(time.perf_counter() - started)
                    blocks.append(lag.take())
                    paged += 40
                most_kept = max(most_kept, len(view.items))
                most_mounted = max(most_mounted, view.mounted_turns)
                for mark in sorted(loaded_marks):
                    if paged >= mark:
                        marks[f"rss_after_{mark}_mib"] = rss_mib() - before
                        loaded_marks.discard(mark)
            marks["pages"] = float(len(pages))
            marks["page_median_s"] = statistics.median(pages)
            marks["page_max_s"] = max(pages)
            marks["block_per_page_median_s"] = statistics.median(blocks)
            marks["block_per_page_max_s"] = max(blocks)
            marks["rss_at_top_mib"] = rss_mib() - before
            marks["mounted_turns_max"] = float(most_mounted)
            marks["kept_records_max"] = float(most_kept)
            marks["widgets_at_top"] = float(len(list(app.session.walk_children())))
            return marks

    return asyncio.run(run())


def case_search(turns: int) -> dict[str, float]:
    """Ctrl+F, a word only turn 3 holds, Enter: until that turn is shown (paged in, selected)."""
    from tui.link.mock import MockLink
    from tui.ui import TuiApp

    records = history(turns)
    records[3] = records[3].model_copy(update={"reply": "a zebra crossing\n"})
    link = MockLink(history=records)

    async def run() -> dict[str, float]:
        app = TuiApp(link)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, app.session.attached.is_set)
            view = app.session.transcript
            await until(pilot, lambda: view.mounted_turns >= 40)
            await pilot.press("ctrl+f", *"zebra")
            await pilot.pause()
            started = time.perf_counter()
            await pilot.press("enter")
            await until(pilot, lambda: view.selected == "h3" and not view.is_fetching)
            await pilot.pause()
            return {"first_match_shown_s": time.perf_counter() - started}

    return asyncio.run(run())


def case_reattach_big(lines: int) -> dict[str, float]:
    """Attach to a session whose last 40 turns hold one of `lines` printed lines: the first full
    frame (the attach done and painted), then a resize to 80 columns."""
    from tui.link.mock import MockLink
    from tui.ui import TuiApp

    records = history(400)
    big = "".join(f"line {i} of the output\n" for i in range(lines))
    records[-20] = records[-20].model_copy(update={"reply": big})
    link = MockLink(history=records)
    built = time.perf_counter()

    async def run() -> dict[str, float]:
        app = TuiApp(link)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, app.session.attached.is_set)  # the newest turns mounted
            shown = time.perf_counter() - built
            await until(pilot, lambda: app.session.transcript.mounted_turns >= 40)
            await pilot.pause()
            whole = time.perf_counter() - built
            started = time.perf_counter()
            await pilot.resize_terminal(80, 40)
            await pilot.pause()
            return {
                "newest_shown_s": shown,
                "page_mounted_s": whole,
                "resize_s": time.perf_counter() - started,
            }

    return asyncio.run(run())


CASES = {
    "minimal": case_minimal,
    "empty": lambda: case_first_frame(0),
    "turns10k": lambda: case_first_frame(10_000),
    "turns10k_md": lambda: case_first_frame(10_000, "llm"),
    "stream20k": lambda: case_stream(20_000),
    "stream20k_md": lambda: case_stream(20_000, "llm"),
    "para100": lambda: case_paragraphs(100),
    "para200": lambda: case_paragraphs(200),
    "para400": lambda: case_paragraphs(400),
    "memory10k": lambda: case_memory(10_000),
    "search10k": lambda: case_search(10_000),
    "reattach_big": lambda: case_reattach_big(100_000),
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
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--case", choices=sorted(CASES))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", nargs="*", choices=sorted(CASES))
    args = parser.parse_args()
    if args.case:
        print(json.dumps(CASES[args.case]()))
        return
    results: dict[str, dict[str, float]] = {}
    for name in args.only or list(CASES):
        runs = [run_case(name) for _ in range(args.runs if name != "memory10k" else 1)]
        results[name] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(name, {k: round(v, 3) for k, v in results[name].items()}, flush=True)
    if "minimal" in results:
        ref = results["minimal"]["first_frame_s"]
        for name in ("empty", "turns10k", "turns10k_md"):
            if name in results:
                print(f"{name}: first frame {results[name]['first_frame_s'] / ref:.2f}x the minimal app")


if __name__ == "__main__":
    main()
