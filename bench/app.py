"""The full-screen app's figures, headless (``App.run_test`` at 120x40), on a `WorkerLink`.

    .venv/bin/python bench/app.py            # every case, medians of 3 fresh processes
    .venv/bin/python bench/app.py --runs 5

Cases: the first frame of a minimal Textual app (the reference, same run), of the app on an empty
session and on a 10,000-turn one; one reply streamed as 20,000 small chunks (tok/s, and the event
loop's lag meanwhile); 200,000 chunks end to end beside ``python3`` writing the same chunks to a
bare pty; one call's output streamed as the same 20,000 chunks beside them (``tool20k``), and as
200,000 lines of a build log, 6 MB, folded by the reducer (``toollines200k``, with RSS); one reply
of 100/200/400 paragraphs (Markdown); a program printing 100,000
lines through a real worker beside ``tui send --wait`` of the same turn (key echo and RSS
meanwhile); the first frame when the last turns hold 4 big replies, and a new turn after them; a
search over 10,000 turns (the first match shown); a reattach with a 100,000-line turn among the last
40 (first frame, then a resize). A python session's replies are program output, shown verbatim; a
model's are Markdown: the ``_md`` cases measure the Markdown path. Each case runs in a fresh process
so that imports and caches count as a user sees them.
"""

from __future__ import annotations

import os
import sys
import time

_T0 = time.perf_counter()

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
from typing import Any  # noqa: E402

from common import WORDS, Lag, rss_mib  # noqa: E402

SIZE = (120, 40)


async def until(pilot: Any, condition: Any, limit: float = 600.0) -> None:
    deadline = time.perf_counter() + limit
    while not condition():
        if time.perf_counter() > deadline:
            raise TimeoutError("the app did not get there")
        await asyncio.sleep(0.005)


def reply_format(agent: str) -> Any:
    """How `agent`'s replies are shown: program output for python, Markdown for a model."""
    return "verbatim" if agent == "python" else "markdown"


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
    from tui.testing.double import WorkerLink
    from tui.ui import TuiApp

    built = time.perf_counter()
    records = history(turns)
    link = WorkerLink(history=records, agent=agent, reply_format=reply_format(agent))
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
    await link.end_turn()
    await until(pilot, lambda: app.session.turn is None and app.session.cursor >= link.last_seq)
    await pilot.pause()
    return time.perf_counter() - start


def case_stream(count: int, agent: str = "python") -> dict[str, float]:
    from tui.testing.double import WorkerLink
    from tui.ui import TuiApp

    async def run() -> dict[str, float]:
        link = WorkerLink(agent=agent, reply_format=reply_format(agent))
        app = TuiApp(link)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, app.session.attached.is_set)
            with Lag() as lag:
                cpu = time.process_time()
                seconds = await stream_into(app, pilot, link, tokens(count))
                cpu = time.process_time() - cpu
        return {"seconds": seconds, "cpu_s": cpu, "tok_per_s": count / seconds, **lag.figures()}

    return asyncio.run(run())


async def stream_tool_into(app: Any, pilot: Any, link: Any, chunks: list[str]) -> float:
    """One call's output streamed as `chunks` (its block open, so each flush draws it), until the
    turn ended and the app drew it."""
    from tui.protocol import ToolEnded, ToolOutput, ToolStarted

    turn = link.start_turn("run()")
    link.emit(ToolStarted(turn_id=turn, call_id="c1", name="run", args={"code": "make"}))
    await until(pilot, lambda: app.session.transcript.live is not None and app.session.transcript.live.tools)
    app.session.transcript.live.tools[0].collapsed = False
    start = time.perf_counter()
    for n, chunk in enumerate(chunks):
        link.emit(ToolOutput(turn_id=turn, call_id="c1", text=chunk))
        if n % 50 == 0:
            await asyncio.sleep(0)
    link.emit(ToolEnded(turn_id=turn, call_id="c1", status="completed"))
    await link.end_turn()
    await until(pilot, lambda: app.session.turn is None and app.session.cursor >= link.last_seq)
    await pilot.pause()
    return time.perf_counter() - start


def case_tool_stream(count: int, line: bool = False) -> dict[str, float]:
    """A call's output streamed into the running turn: the same chunks as `case_stream` (its
    baseline, the reply), or (`line`) a program's lines of 30 characters, 6 MB for 200,000."""
    from tui.testing.double import WorkerLink
    from tui.ui import TuiApp

    chunks = [f"line {n:>8} of the build log\n" for n in range(count)] if line else tokens(count)

    async def run() -> dict[str, float]:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, app.session.attached.is_set)
            with Lag() as lag:
                cpu = time.process_time()
                seconds = await stream_tool_into(app, pilot, link, chunks)
                cpu = time.process_time() - cpu
            return {
                "seconds": seconds,
                "cpu_s": cpu,
                "chunks_per_s": count / seconds,
                "rss_mib": rss_mib(),
                **lag.figures(),
            }

    return asyncio.run(run())


def case_log_stream(count: int) -> dict[str, float]:
    """The reference for a stream: a bare Textual app writing the same chunks into a `Log`."""
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
            with Lag() as lag:
                start = time.perf_counter()
                for n, chunk in enumerate(tokens(count)):
                    log.write(chunk)
                    if n % 50 == 0:
                        await asyncio.sleep(0)
                await pilot.pause()
                seconds = time.perf_counter() - start
        return {"seconds": seconds, **lag.figures()}

    return asyncio.run(run())


def paragraphs(n: int) -> list[str]:
    chunks = []
    for p in range(n):
        sentence = " ".join(WORDS[(p + k) % len(WORDS)] for k in range(40))
        text = f"Paragraph {p}: {sentence}. **Bold** and `code` here.\n\n"
        chunks.extend(text[i : i + 16] for i in range(0, len(text), 16))
    return chunks


def case_paragraphs(n: int) -> dict[str, float]:
    from tui.testing.double import WorkerLink
    from tui.ui import TuiApp

    async def run() -> dict[str, float]:
        link = WorkerLink(agent="llm", reply_format="markdown")
        app = TuiApp(link)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, app.session.attached.is_set)
            seconds = await stream_into(app, pilot, link, paragraphs(n))
        return {"seconds": seconds}

    return asyncio.run(run())


def case_pty(count: int) -> dict[str, float]:
    """The baseline of a stream: ``python3`` writing the same chunks, flushed, to a bare pty."""
    import pty

    program = (
        "import sys\n"
        f"words = {WORDS!r}\n"
        f"for i in range({count}):\n"
        "    w = words[i % len(words)]\n"
        "    sys.stdout.write(w[:3] + ' ' if (i + 1) % 60 else w[:2] + '.\\n\\n'); sys.stdout.flush()\n"
    )
    start = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, "-c", program])
    size = 0
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        size += len(data)
    os.waitpid(pid, 0)
    return {"seconds": time.perf_counter() - start, "kib": size / 1024}


def big_history(turns: int, size: int) -> list[Any]:
    """`turns` turns whose replies are `size` bytes of program output each."""
    from tui.protocol import By, TurnRecord

    reply = "".join(tokens(200_000))[:size]
    return [
        TurnRecord(
            turn_id=f"b{i}",
            prompt="write()",
            reply=reply,
            outcome="completed",
            by=By(name="alice"),
            started_seq=2 * i + 1,
            ended_seq=2 * i + 2,
        )
        for i in range(turns)
    ]


def case_big_turns(turns: int = 4, agent: str = "python") -> dict[str, float]:
    """The first frame when the last `turns` turns hold 586 KB replies (none: the reference);
    then a new turn after them."""
    from tui.protocol import TextChunk
    from tui.testing.double import WorkerLink
    from tui.ui import TuiApp

    built = time.perf_counter()
    link = WorkerLink(history=big_history(turns, 600_000), agent=agent, reply_format=reply_format(agent))
    excluded = time.perf_counter() - built

    async def run() -> dict[str, float]:
        app = TuiApp(link)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, app.session.attached.is_set)
            await pilot.pause()
            first = time.perf_counter() - _T0 - excluded
            news = []
            for n in range(3):
                start = time.perf_counter()
                turn = link.start_turn(f"print({n})")
                link.emit(TextChunk(turn_id=turn, text=f"{n}\n"))
                await link.end_turn()
                await until(pilot, lambda: not app.session.busy and app.session.cursor >= link.last_seq)
                await pilot.pause()
                news.append(time.perf_counter() - start)
            return {"first_frame_s": first, "new_turn_ms": 1000 * statistics.median(news)}

    return asyncio.run(run())


LINES_PROGRAM = "for i in range(100000): print(i)"


def case_lines(count: int = 100_000) -> dict[str, float]:
    """A program printing `count` lines through a real worker: the turn ended on screen, key echo
    and RSS meanwhile, beside ``tui send --wait`` of the same turn on the same session."""
    import tempfile
    from pathlib import Path

    from textual import events

    from tui.access.local import LocalAccess
    from tui.store import StatePaths
    from tui.ui import TuiApp

    program = f"for i in range({count}): print(i)"

    async def run(state: Path, work: Path) -> dict[str, float]:
        access = LocalAccess(StatePaths(state))
        sid = await access.create(working_directory=str(work))
        link = await access.link(sid, client_id="tui:bench:1")
        app = TuiApp(link)
        try:
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, app.session.attached.is_set)
                app.session.submit("print('warm')")
                views = app.session.transcript.turn_views
                await until(pilot, lambda: len(views()) == 1 and not app.session.busy)
                await pilot.pause()
                before = rss_mib()
                echo: list[float] = []
                start = time.perf_counter()
                app.session.submit(program)
                await until(pilot, lambda: app.session.busy)
                typed = 0
                lag = Lag()
                lag.__enter__()
                while app.session.busy:
                    # as the terminal's driver does: the key is posted to the app
                    t = time.perf_counter()
                    app.post_message(events.Key("x", "x"))
                    typed += 1
                    await until(pilot, lambda n=typed: app.session.prompt.text.count("x") >= n)
                    echo.append(time.perf_counter() - t)
                    await asyncio.sleep(0.02)
                lag.__exit__()
                await until(pilot, lambda: len(app.session.transcript.turn_views()) == 2)
                await pilot.pause()
                seconds = time.perf_counter() - start
                grown = rss_mib() - before
            t = time.perf_counter()
            send = await asyncio.create_subprocess_exec(
                os.path.join(os.path.dirname(sys.executable), "tui"),
                *("send", "--wait", sid, program),
                stdout=subprocess.PIPE,
                env={**os.environ, "TUI_STATE_DIR": str(state)},
            )
            printed, _ = await send.communicate()
            wait = time.perf_counter() - t
            assert printed.count(b"\n") >= count, printed[-200:]
            echo.sort()
            return {
                "seconds": seconds,
                "send_wait_s": wait,
                "ratio": seconds / wait,
                "echo_p99_ms": 1000 * echo[int(0.99 * (len(echo) - 1))] if echo else 0.0,
                "keys": float(len(echo)),
                "rss_growth_mib": grown,
                **lag.figures(),
            }
        finally:
            await access.stop(sid)

    with tempfile.TemporaryDirectory() as state, tempfile.TemporaryDirectory() as work:
        return asyncio.run(run(Path(state), Path(work)))


def case_search(turns: int) -> dict[str, float]:
    """Ctrl+F, a word only turn 3 holds, Enter: until that turn is shown (paged in, selected)."""
    from tui.testing.double import WorkerLink
    from tui.ui import TuiApp

    records = history(turns)
    records[3] = records[3].model_copy(update={"reply": "a zebra crossing\n"})
    link = WorkerLink(history=records)

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
    from tui.testing.double import WorkerLink
    from tui.ui import TuiApp

    records = history(400)
    big = "".join(f"line {i} of the output\n" for i in range(lines))
    records[-20] = records[-20].model_copy(update={"reply": big})
    link = WorkerLink(history=records)
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
    "tool20k": lambda: case_tool_stream(20_000),
    "toollines200k": lambda: case_tool_stream(200_000, line=True),
    "para100": lambda: case_paragraphs(100),
    "para200": lambda: case_paragraphs(200),
    "para400": lambda: case_paragraphs(400),
    "log20k": lambda: case_log_stream(20_000),
    "stream200k": lambda: case_stream(200_000),
    "pty200k": lambda: case_pty(200_000),
    "lines100k": case_lines,
    "bigturns": case_big_turns,
    "bigturns_md": lambda: case_big_turns(agent="llm"),
    "newturn_empty": lambda: case_big_turns(0),
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
        runs = [run_case(name) for _ in range(args.runs)]
        results[name] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(name, {k: round(v, 3) for k, v in results[name].items()}, flush=True)
    if "minimal" in results:
        ref = results["minimal"]["first_frame_s"]
        for name in ("empty", "turns10k", "turns10k_md"):
            if name in results:
                print(f"{name}: first frame {results[name]['first_frame_s'] / ref:.2f}x the minimal app")
    if "stream20k" in results and "tool20k" in results:
        ratio = results["tool20k"]["seconds"] / results["stream20k"]["seconds"]
        cpu = results["tool20k"]["cpu_s"] / results["stream20k"]["cpu_s"]
        print(f"tool20k: {ratio:.2f}x wall, {cpu:.2f}x CPU of the same chunks as the reply (stream20k)")
    if "stream200k" in results and "pty200k" in results:
        ratio = results["stream200k"]["seconds"] / results["pty200k"]["seconds"]
        print(f"stream200k: {ratio:.2f}x python3 on a bare pty")


if __name__ == "__main__":
    main()
