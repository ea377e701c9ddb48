"""Reading in the app (WorkerLink): a turn's whole output in the pager, `/copy`, and the line a queue
held after an interrupt shows."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from textual.widgets import Log, Static

from tui.protocol import By, TurnRecord
from tui.testing.double import WorkerLink
from tui.ui import TuiApp
from tui.ui.screens.pager import OutputPager

Until = Callable[..., Awaitable[None]]

BIG = "".join(f"line {i}\n" for i in range(100_000))


def record(turn_id: str, reply: str, n: int = 1) -> TurnRecord:
    return TurnRecord(
        turn_id=turn_id,
        prompt=f"print({n})",
        reply=reply,
        outcome="completed",
        by=By(name="alice"),
        started_seq=2 * n - 1,
        ended_seq=2 * n,
    )


def queue_row(app: TuiApp) -> str:
    return str(app.session.query_one("#queue-row", Static).render())


async def test_the_pager_opens_a_100000_line_output_and_shows_its_last_line(until: Until) -> None:
    # The worker has the whole output; the transcript shows the turn folded (not this test's concern).
    link = WorkerLink(
        history=[record("t1", "hi\n"), record("t2", "line 0\n…\n", 2)],
        handler=lambda request: BIG if request.route == "turn_output" else NotImplemented,
    )
    app = TuiApp(link)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, app.session.attached.is_set)
        pager = OutputPager(link, "t2", title="turn 2 · reply")
        await app.push_screen(pager)
        await until(pilot, lambda: pager.done, 30.0)
        log = pager.query_one(Log)
        assert pager.line_count == 100_000 and log.lines[99_999] == "line 99999"
        await pilot.pause()
        assert log.scroll_y == log.max_scroll_y, "it opens at the end"
        header = str(pager.query_one("#pager-header", Static).render())
        assert header.startswith("turn 2 · reply · 100,000 lines")
        await pilot.press("home")
        assert log.scroll_y == 0
        await pilot.press("pagedown")
        assert log.scroll_y > 0
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.session)


async def test_the_pager_says_when_the_turn_is_not_there(until: Until) -> None:
    link = WorkerLink(history=[record("t1", "hi\n")])
    app = TuiApp(link)
    async with app.run_test() as pilot:
        await until(pilot, app.session.attached.is_set)
        pager = OutputPager(link, "t-gone", title="turn 9 · reply")
        await app.push_screen(pager)
        await until(pilot, lambda: pager.done)
        assert "could not be read: no turn 't-gone'" in str(pager.query_one("#pager-header", Static).render())
        await pilot.press("q")
        await until(pilot, lambda: app.screen is app.session)


async def test_copy_puts_the_last_reply_on_the_clipboard(until: Until) -> None:
    link = WorkerLink(history=[record("t1", "old\n"), record("t2", "first line\nsecond line\n", 2)])
    app = TuiApp(link)
    async with app.run_test() as pilot:
        await until(pilot, app.session.attached.is_set)
        await pilot.press(*"/copy", "enter")
        await until(pilot, lambda: app.clipboard == "first line\nsecond line\n")
        assert any(n.message == "copied 2 lines" for n in app._notifications)


async def test_after_an_interrupt_the_queue_is_held_until_resume(until: Until) -> None:
    link = WorkerLink()
    app = TuiApp(link)
    async with app.run_test(size=(140, 30)) as pilot:
        await until(pilot, app.session.attached.is_set)
        link.start_turn("print('long')")
        await until(pilot, lambda: app.session.busy)
        await pilot.press(*"print('next')", "enter")
        await until(pilot, lambda: [i.prompt for i in app.session.queue] == ["print('next')"])
        await pilot.press("escape")
        await until(pilot, lambda: app.session.session_state.queue_held)
        assert link.current is None, "nothing ran after the interrupt"
        held = "queue held after the interrupt: /resume runs it, /unqueue takes the last back"
        assert held in queue_row(app)
        await pilot.press(*"/resume", "enter")
        await until(pilot, lambda: link.current is not None and link.current.prompt == "print('next')")
        await until(pilot, lambda: not app.session.query_one("#queue-row", Static).display)
