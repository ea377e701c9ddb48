"""Pictures of the app (pytest-textual-snapshot), kept in `snapshots/test_ui_snapshots/`.

Clocks are frozen (the app's clock is a constant) and the cursor does not blink, so a picture
changes only when what the user sees changes. Update one with
``.venv/bin/pytest tests/ui/test_ui_snapshots.py -k NAME --snapshot-update`` and look at it.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from helpers import app_until
from textual.pilot import Pilot
from textual.widgets import Input

from tui.link.base import Located, Principal
from tui.protocol import (
    By,
    Option,
    QuestionAsked,
    TextChunk,
    ToolEnded,
    ToolOutput,
    ToolRecord,
    ToolStarted,
    TurnRecord,
)
from tui.testing.double import WorkerLink
from tui.ui import TuiApp

SnapCompare = Callable[..., bool]

LONG_REPLY = """# Sorting a list

Python sorts in place with `list.sort()`, or returns a new list with `sorted()`:

```python
words = ["pear", "apple", "fig"]
print(sorted(words, key=len))
```

Both are **stable**: equal items keep their order.

- `key=` picks what to compare
- `reverse=True` sorts descending

| call | returns |
| --- | --- |
| `sorted(xs)` | a new list |
| `xs.sort()` | None |
"""


T0 = datetime(2026, 1, 1, 15, 2, tzinfo=UTC)


def ticking() -> Callable[[], datetime]:
    """Events' times: 15:02 UTC on 1 Jan 2026, 0.4 s apart."""
    ticks = itertools.count()
    return lambda: T0 + timedelta(seconds=0.4 * next(ticks))


TRACEBACK = """Traceback (most recent call last):
  File "<program 1>", line 4, in <module>
    print(mean([]))
          ~~~~^^^^
  File "<program 1>", line 2, in mean
    return sum(xs) / len(xs)
           ~~~~~~~~^~~~~~~~~
ZeroDivisionError: division by zero
"""


def make_app(link: WorkerLink) -> TuiApp:
    """The app as the snapshots see it: a frozen clock, events at fixed times, and no exit when
    the worker is gone."""
    link.clock = ticking()
    return TuiApp(link, clock=lambda: 1000.0, gone_exit_after=None)


def history() -> list[TurnRecord]:
    return [
        TurnRecord(
            turn_id="h1",
            prompt="print(6 * 7)",
            reply="42\n",
            outcome="completed",
            by=By(name="alice"),
            started_seq=2,
            ended_seq=4,
        ),
        TurnRecord(
            turn_id="h2",
            prompt="1 / 0",
            reply="Traceback (most recent call last):\nZeroDivisionError: division by zero\n",
            outcome="failed",
            error="ZeroDivisionError: division by zero",
            by=By(kind="participant", name="bob"),
            started_seq=5,
            ended_seq=7,
        ),
    ]


def settle(script: Callable[[WorkerLink, Pilot[Any]], Awaitable[None]] | None, link: WorkerLink) -> Any:
    """A `run_before` that waits for the attach, stills the cursor, then runs `script`."""

    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, TuiApp)

        await app_until(pilot, app.session.attached.is_set, "the attach")
        app.session.prompt.cursor_blink = False
        if script is not None:
            await script(link, pilot)
        await flushed(pilot)

    return run_before


async def flushed(pilot: Pilot[Any]) -> None:
    """Wait until the live turn wrote everything that arrived, and the screen settled."""
    app = pilot.app
    assert isinstance(app, TuiApp)

    def written() -> bool:
        live = app.session.transcript.live
        pending = live is not None and live._pending
        return app.session.cursor >= len(app.session.link.journal) and not pending  # type: ignore[attr-defined]

    await app_until(pilot, written, "the live turn to be written")
    await pilot.pause(0.2)
    await pilot.wait_for_scheduled_animations()


class TestSession:
    def test_empty_new_session(self, snap_compare: SnapCompare) -> None:
        """A new session: an empty transcript, the prompt, idle status rows and the footer."""
        link = WorkerLink(model="python")
        assert snap_compare(make_app(link), terminal_size=(100, 30), run_before=settle(None, link))

    def test_history_with_a_failed_turn(self, snap_compare: SnapCompare) -> None:
        """Two ended turns: one by the owner, one failed by a participant, saying so."""
        link = WorkerLink(history=history())
        assert snap_compare(make_app(link), terminal_size=(100, 30), run_before=settle(None, link))

    def test_narrow_terminal(self, snap_compare: SnapCompare) -> None:
        """The same session at 60 columns: rows wrap or clip, nothing overlaps."""
        link = WorkerLink(history=history())
        assert snap_compare(make_app(link), terminal_size=(60, 30), run_before=settle(None, link))


class TestStreaming:
    def test_streaming_reply(self, snap_compare: SnapCompare) -> None:
        """A turn in progress: its prompt, half a reply, the working status with a spinner."""
        link = WorkerLink(history=history(), agent="llm", reply_format="markdown")

        async def script(link: WorkerLink, pilot: Pilot[Any]) -> None:
            turn = link.start_turn("explain()")
            link.emit(TextChunk(turn_id=turn, text="Counting the words"))
            link.emit(TextChunk(turn_id=turn, text=" first, then **sorting** them"))

        assert snap_compare(make_app(link), terminal_size=(100, 30), run_before=settle(script, link))

    def test_long_markdown_reply_with_code(self, snap_compare: SnapCompare) -> None:
        """A model's ended turn whose reply has a heading, a code block, a list and a table."""
        link = WorkerLink(agent="llm", reply_format="markdown")

        async def script(link: WorkerLink, pilot: Pilot[Any]) -> None:
            link.start_turn("how do I sort?")
            await link.reply(LONG_REPLY)

        assert snap_compare(make_app(link), terminal_size=(100, 40), run_before=settle(script, link))

    def test_tool_block_expanded(self, snap_compare: SnapCompare) -> None:
        """A running turn with a tool call expanded: its output and its outcome in the title."""
        link = WorkerLink()

        async def script(link: WorkerLink, pilot: Pilot[Any]) -> None:
            turn = link.start_turn("run('ls')")
            link.emit(ToolStarted(turn_id=turn, call_id="c1", name="run", args={"code": "ls -1"}))
            link.emit(ToolOutput(turn_id=turn, call_id="c1", text="README.md\npyproject.toml\ntui\n"))
            link.emit(ToolEnded(turn_id=turn, call_id="c1", status="completed"))
            await flushed(pilot)
            pilot.app.session.transcript.live.tools[0].collapsed = False  # the user opened it

        assert snap_compare(make_app(link), terminal_size=(100, 30), run_before=settle(script, link))

    def test_ended_turn_with_tools_expanded(self, snap_compare: SnapCompare) -> None:
        """An ended turn's tools, shown with their output after Enter on the turn."""
        record = TurnRecord(
            turn_id="h1",
            prompt="ask('ok?')",
            reply="'yes'\n",
            outcome="completed",
            tools=[ToolRecord(call_id="c1", name="ask", args={"question": "ok?"}, output="yes\n")],
            ended_seq=3,
        )
        link = WorkerLink(history=[record])

        async def script(link: WorkerLink, pilot: Pilot[Any]) -> None:
            transcript = pilot.app.session.transcript
            await app_until(pilot, lambda: transcript.turn_views()[0].region.height > 0, "the turn drawn")
            turn = transcript.turn_views()[0]
            row = turn.region.y - transcript.region.y
            await pilot.click("#transcript", offset=(4, row))  # a click on the turn: its tools' output

        assert snap_compare(make_app(link), terminal_size=(100, 24), run_before=settle(script, link))

    def test_folded_huge_output(self, snap_compare: SnapCompare) -> None:
        """A program that printed 5,000 lines: its first lines, the line saying how many are
        hidden and how to see them all, then its last lines."""
        record = TurnRecord(
            turn_id="h1",
            prompt="for i in range(5000): print(f'line {i}')",
            reply="".join(f"line {i}\n" for i in range(5000)),
            outcome="completed",
            by=By(name="alice"),
            ended_seq=3,
        )
        link = WorkerLink(history=[record])

        async def script(link: WorkerLink, pilot: Pilot[Any]) -> None:
            await pilot.pause()
            pilot.app.session.transcript.scroll_to(y=8, animate=False, immediate=True)

        assert snap_compare(make_app(link), terminal_size=(100, 30), run_before=settle(script, link))


class TestQuestions:
    def test_question_with_options(self, snap_compare: SnapCompare) -> None:
        """The question in the prompt's place: numbered options, a freeform line, the hint."""
        link = WorkerLink()

        async def script(link: WorkerLink, pilot: Pilot[Any]) -> None:
            link.start_turn("ask('Deploy?')")
            await link.ask("Deploy to which environment?", ["staging", "production", "nowhere"])

        assert snap_compare(make_app(link), terminal_size=(100, 30), run_before=settle(script, link))

    def test_multi_select_question(self, snap_compare: SnapCompare) -> None:
        """A multiple-choice question with the first and third options toggled."""
        link = WorkerLink()

        async def script(link: WorkerLink, pilot: Pilot[Any]) -> None:
            link.start_turn("ask('Which?')")
            await link.ask(
                "Which checks should run?", ["lint", "types", "tests"], multiple=True, freeform=False
            )
            await flushed(pilot)
            await pilot.press("1")  # toggle "lint"
            await pilot.press("3")  # toggle "tests"

        assert snap_compare(make_app(link), terminal_size=(100, 30), run_before=settle(script, link))

    def test_viewers_question(self, snap_compare: SnapCompare) -> None:
        """A viewer reads the question and is told who answers it, not the keys that would."""
        link = WorkerLink(principal=Principal(kind="viewer", name="ana"))

        async def script(link: WorkerLink, pilot: Pilot[Any]) -> None:
            link.start_turn("ask('Deploy?')")
            await link.ask("Deploy to which environment?", ["staging", "production"])

        assert snap_compare(make_app(link), terminal_size=(100, 24), run_before=settle(script, link))


class TestSmallTerminal:
    """80x24, a first-class size: nothing cut that matters, nothing overlapping."""

    def test_idle_session_at_80x24(self, snap_compare: SnapCompare) -> None:
        """Ended turns with their number, time and duration; a long prompt wraps under its text."""
        link = WorkerLink(history=history())

        async def script(link: WorkerLink, pilot: Pilot[Any]) -> None:
            link.start_turn(
                "values = [n * n for n in range(10) if n % 2 == 0]; print(sum(values), values[-1])"
            )
            await link.reply("120 64\n")

        assert snap_compare(make_app(link), terminal_size=(80, 24), run_before=settle(script, link))

    def test_five_option_question_at_80x24(self, snap_compare: SnapCompare) -> None:
        """A five-option question: one line each, descriptions dimmed, the transcript still seen."""
        link = WorkerLink(history=history())

        async def script(link: WorkerLink, pilot: Pilot[Any]) -> None:
            turn = link.start_turn("ask('Deploy?', OPTIONS)")
            link.emit(
                QuestionAsked(
                    turn_id=turn,
                    question_id="q1",
                    text="Deploy the release to which environment?",
                    options=[
                        Option(label="dev", description="the shared development box"),
                        Option(label="staging", description="a copy of production, with test data"),
                        Option(label="canary", description="5% of production traffic"),
                        Option(
                            label="production",
                            description="everyone, once the canary looked fine",
                        ),
                        Option(label="nowhere", description="stop here"),
                    ],
                )
            )

        assert snap_compare(make_app(link), terminal_size=(80, 24), run_before=settle(script, link))

    def test_reconnecting_at_80x24(self, snap_compare: SnapCompare) -> None:
        """Reconnecting mid-turn: the reason whole (wrapped), Ctrl+R in the footer, no clock counting."""
        link = WorkerLink(history=history())

        async def script(link: WorkerLink, pilot: Pilot[Any]) -> None:
            link.start_turn("train(epochs=3)")
            await flushed(pilot)
            link.located = Located("starting", "the worker of session 3f2a9c0e is not answering (ReadError)")
            link.backoff = type(link.backoff)(first=60.0, factor=1.0, jitter=0.0, cap=60.0)
            link.drop("the worker of session 3f2a9c0e is not answering (ReadError); it may have stopped")

            link_row = pilot.app.session.status.link_row  # type: ignore[attr-defined]
            await app_until(pilot, lambda: "reconnecting" in link_row(), "the link row to say reconnecting")

        assert snap_compare(make_app(link), terminal_size=(80, 24), run_before=settle(script, link))


class TestHighlighting:
    def test_highlighted_prompt_and_traceback(self, snap_compare: SnapCompare) -> None:
        """A python prompt coloured as Python; its traceback coloured, the syntax caret kept."""
        link = WorkerLink()

        async def script(link: WorkerLink, pilot: Pilot[Any]) -> None:
            turn = link.start_turn("def mean(xs):\n    return sum(xs) / len(xs)\n\nprint(mean([]))")
            link.emit(TextChunk(turn_id=turn, text=TRACEBACK))
            await link.end_turn("failed", error="ZeroDivisionError: division by zero")

        assert snap_compare(make_app(link), terminal_size=(100, 24), run_before=settle(script, link))


class TestQueueAndLink:
    def test_queue_row(self, snap_compare: SnapCompare) -> None:
        """A prompt queued behind the running turn: the queue row and the count in the status."""
        link = WorkerLink()

        async def script(link: WorkerLink, pilot: Pilot[Any]) -> None:
            link.start_turn("slow()")
            await flushed(pilot)
            await pilot.press(*"print('next')")  # type the next prompt
            await pilot.press("enter")  # queue it
            await flushed(pilot)

        assert snap_compare(make_app(link), terminal_size=(100, 30), run_before=settle(script, link))

    def test_reconnecting(self, snap_compare: SnapCompare) -> None:
        """The stream dropped and the worker is restarting: the link row says reconnecting."""
        link = WorkerLink(history=history())

        async def script(link: WorkerLink, pilot: Pilot[Any]) -> None:
            link.no_worker_timeout = 600.0  # back when the test says, however busy the machine
            link.located = Located("starting")
            link.backoff = type(link.backoff)(first=60.0, factor=1.0, jitter=0.0, cap=60.0)
            link.drop("the worker stopped answering")

            link_row = pilot.app.session.status.link_row  # type: ignore[attr-defined]
            await app_until(pilot, lambda: "reconnecting" in link_row(), "the link row to say reconnecting")

        assert snap_compare(make_app(link), terminal_size=(100, 30), run_before=settle(script, link))

    def test_worker_gone(self, snap_compare: SnapCompare) -> None:
        """The worker went away for good mid-turn: the turn is shown ended, the link row says why."""
        link = WorkerLink()

        async def script(link: WorkerLink, pilot: Pilot[Any]) -> None:
            link.start_turn("slow()")
            await flushed(pilot)
            link.located = Located("gone", "the session was stopped with `tui stop`")
            link.drop()

            link_row = pilot.app.session.status.link_row  # type: ignore[attr-defined]
            await app_until(pilot, lambda: "gone" in link_row(), "the link row to say gone")

        assert snap_compare(make_app(link), terminal_size=(100, 30), run_before=settle(script, link))


def many_turns(n: int) -> list[TurnRecord]:
    return [
        TurnRecord(
            turn_id=f"h{i}",
            prompt=f"print({i} * {i})",
            reply=f"{i * i}\n" if i != 3 else "9, a zebra\n",
            outcome="completed",
            by=By(name="alice"),
            started_seq=2 * i + 1,
            ended_seq=2 * i + 2,
        )
        for i in range(n)
    ]


class TestReading:
    def test_scrolled_transcript_with_a_selected_turn(self, snap_compare: SnapCompare) -> None:
        """Scrolled up a page from the bottom of 60 turns; the turn picked with Alt+Up twice is
        marked (a bar on its left), and the footer names the keys that copy it."""
        link = WorkerLink(history=many_turns(60))

        async def script(link: WorkerLink, pilot: Pilot[Any]) -> None:
            app = pilot.app
            assert isinstance(app, TuiApp)
            transcript = app.session.transcript
            await app_until(pilot, lambda: transcript.mounted_turns == 40, "the first page")
            await pilot.pause()
            await app_until(
                pilot,
                lambda: not transcript.is_fetching and transcript.scroll_y == transcript.max_scroll_y,
                "the bottom",
            )
            await pilot.press("pageup")  # a page up
            await pilot.press("alt+up", "alt+up")  # select the last turn in view, then the one above

        assert snap_compare(make_app(link), terminal_size=(100, 30), run_before=settle(script, link))

    def test_search_with_a_highlighted_match(self, snap_compare: SnapCompare) -> None:
        """Ctrl+F, "zebra", Enter: the bar says "1 of 1", and the view jumps to turn 3 (paged in
        from the session), selected, the word highlighted."""
        link = WorkerLink(history=many_turns(200))

        async def script(link: WorkerLink, pilot: Pilot[Any]) -> None:
            app = pilot.app
            assert isinstance(app, TuiApp)
            transcript = app.session.transcript
            await app_until(pilot, lambda: transcript.mounted_turns == 40, "the first page")
            await pilot.press("ctrl+f", *"zebra", "enter")  # find zebra
            await app_until(pilot, lambda: app.session.transcript.selected == "h3", "the match")
            await app_until(pilot, lambda: not transcript.is_fetching, "the turns around it mounted")
            app.session.query_one("#search-input", Input).cursor_blink = False  # one picture, not two

        assert snap_compare(make_app(link), terminal_size=(100, 30), run_before=settle(script, link))
