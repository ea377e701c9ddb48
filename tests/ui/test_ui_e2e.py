"""The app on real workers: attach, send, stream, answer, detach, reattach; a killed worker;
two apps on one session."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from helpers import RUNS_UNTIL_STOPPED
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widgets import Input

from tui.access.local import LocalAccess
from tui.link.base import Live
from tui.store import StatePaths, read_sidecar
from tui.ui import TuiApp
from tui.ui.widgets.question import OPTIONS_ONLY, QuestionPanel
from tui.ui.widgets.turn import TurnView

Until = Callable[..., Awaitable[None]]

pytestmark = pytest.mark.slow

PROGRAM = """print("counting")
for i in range(3):
    print(i)
x = ask("Deploy where?", options=["staging", "prod"])
print("chose", x)"""

TYPED = """a = ask("Again?", ["yes", "no"])
print("typed", a)
b = ask("Sure?", ["yes", "no"], freeform=False)
print("chose", b)"""


@pytest.fixture
async def session(state_dir: Path, tmp_path: Path) -> AsyncIterator[tuple[LocalAccess, str]]:
    """A new session with its worker live; every worker of the state dir ends with the test."""
    access = LocalAccess(StatePaths(state_dir))
    sid = await access.create(working_directory=str(tmp_path))
    try:
        yield access, sid
    finally:
        for car_path in StatePaths(state_dir).sessions.glob("*/worker.json"):
            car = read_sidecar(car_path)
            if car is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(car.pid, signal.SIGKILL)


def ended(app: TuiApp) -> list[TurnView]:
    return app.session.transcript.turn_views()


async def holding_question(
    app: TuiApp,
    pilot: Pilot[None],
    until: Until,
    after: QuestionPanel | None = None,
) -> QuestionPanel:
    """The question shown (a new one, `after` another) once it holds the focus."""

    def holding() -> bool:
        panels = [p for p in app.session.query(QuestionPanel) if p is not after]
        return bool(panels) and app.focused is not None and panels[0] in app.focused.ancestors

    await until(pilot, holding, 30)
    return next(p for p in app.session.query(QuestionPanel) if p is not after)


class TestOnARealWorker:
    async def test_send_stream_answer_detach_and_reattach(
        self, session: tuple[LocalAccess, str], state_dir: Path, until: Until
    ) -> None:
        access, sid = session
        app = TuiApp(await access.link(sid, client_id="tui:test:1"), state_dir=state_dir)
        async with app.run_test(size=(100, 40)) as pilot:
            await until(pilot, app.session.attached.is_set, 30)
            app.session.submit(PROGRAM)
            await until(pilot, lambda: app.session.query(QuestionPanel), 30)
            panel = app.session.query_one(QuestionPanel)
            await until(pilot, lambda: app.focused is not None and panel in app.focused.ancestors_with_self)
            assert "counting" in app.session.turn.reply  # type: ignore[union-attr]
            await pilot.press("2", "enter")  # the second option: prod
            await until(pilot, lambda: ended(app) and not app.session.busy, 30)
            turn = ended(app)[-1].record
            assert turn.outcome == "completed"
            assert "chose prod" in turn.reply
            assert turn.answered == [f"answered by {turn.by.name}: prod"]
            await pilot.press("ctrl+d")  # detach
        assert app.return_code == 0

        other = await access.link(sid, client_id="tui:test:2")
        await other.send_turn("print('while you were away')", request_id="away-1")
        again = TuiApp(await access.link(sid, client_id="tui:test:3"), state_dir=state_dir)
        async with again.run_test(size=(100, 40)) as pilot:
            await until(pilot, again.session.attached.is_set, 30)
            await until(pilot, lambda: len(ended(again)) == 2, 30)
            assert "chose prod" in ended(again)[0].record.reply
            await until(pilot, lambda: again.session.query_one("#away").display, 30)
        await other.close()

    async def test_typing_at_a_question_starts_the_typed_answer_or_says_it_takes_options(
        self, session: tuple[LocalAccess, str], state_dir: Path, until: Until
    ) -> None:
        """Tried as a new user would: typing while the options hold the focus was dropped, and
        the Enter after it answered with the highlighted option."""
        access, sid = session
        app = TuiApp(await access.link(sid, client_id="tui:test:1"), state_dir=state_dir)
        async with app.run_test(size=(100, 40)) as pilot:
            await until(pilot, app.session.attached.is_set, 30)
            app.session.submit(TYPED)
            first = await holding_question(app, pilot, until)
            assert app.focused is first.query_one("#choices")
            await pilot.press(*"abc")
            line = first.query_one("#freeform", Input)
            assert line.value == "abc"
            assert app.focused is line
            await pilot.press("enter")
            second = await holding_question(app, pilot, until, after=first)
            assert not second.query("#freeform")
            await pilot.press("x")
            await until(pilot, lambda: any(n.message == OPTIONS_ONLY for n in app._notifications))
            await pilot.press("2", "enter")  # a digit still chooses: no
            await until(pilot, lambda: ended(app) and not app.session.busy, 30)
            assert "typed abc" in ended(app)[-1].record.reply
            assert "chose no" in ended(app)[-1].record.reply
        journal = StatePaths(state_dir).session(sid).journal.read_text().splitlines()
        resolved = [json.loads(line) for line in journal if '"question_resolved"' in line]
        assert [(r.get("selected") or [], r.get("freeform")) for r in resolved] == [
            ([], "abc"),
            (["no"], None),
        ]

    async def test_a_killed_worker_is_restarted_and_its_turn_shown_failed(
        self, session: tuple[LocalAccess, str], state_dir: Path, until: Until
    ) -> None:
        access, sid = session
        app = TuiApp(await access.link(sid, client_id="tui:test:1"), state_dir=state_dir)
        async with app.run_test(size=(100, 40)) as pilot:
            await until(pilot, app.session.attached.is_set, 30)
            app.session.submit("for i in range(5):\n    print(i, flush=True)\n" + RUNS_UNTIL_STOPPED)
            await until(pilot, lambda: app.session.turn is not None and "3" in app.session.turn.reply, 30)
            car = read_sidecar(StatePaths(state_dir).session(sid).sidecar)
            assert car is not None
            os.kill(car.pid, signal.SIGKILL)
            await until(pilot, lambda: not app.session.busy and ended(app), 30)
            assert ended(app)[-1].record.outcome in ("failed", "interrupted")
            await until(pilot, lambda: isinstance(app.session.link_state, Live), 30)
            app.session.submit("print('back')")
            await until(pilot, lambda: len(ended(app)) == 2 and "back" in ended(app)[-1].record.reply, 30)

    async def test_exit_stops_the_worker_and_the_app_closes_cleanly(
        self, session: tuple[LocalAccess, str], state_dir: Path, until: Until
    ) -> None:
        """The worker says it is leaving while the app closes: that is not drawn (nothing to draw
        it on), and the app ends with code 0 rather than an error."""
        access, sid = session
        app = TuiApp(await access.link(sid, client_id="tui:test:1"), state_dir=state_dir)
        async with app.run_test(size=(100, 40)) as pilot:
            await until(pilot, app.session.attached.is_set, 30)
            await pilot.press(*"/exit", "enter")
            await until(pilot, lambda: app.return_code is not None, 30)
        assert app.return_code == 0
        assert app._exception is None
        journal = StatePaths(state_dir).session(sid).journal.read_text()
        assert '"worker_leaving"' in journal

    async def test_two_apps_see_the_same_turns_and_one_answer(
        self, session: tuple[LocalAccess, str], state_dir: Path, until: Until
    ) -> None:
        access, sid = session
        first = TuiApp(await access.link(sid, client_id="tui:test:1"))
        second = TuiApp(await access.link(sid, client_id="tui:test:2"))
        async with first.run_test(size=(100, 40)) as one, second.run_test(size=(100, 40)) as two:
            await until(one, first.session.attached.is_set, 30)
            await until(two, second.session.attached.is_set, 30)
            first.session.submit(PROGRAM)
            await until(two, lambda: second.session.query(QuestionPanel), 30)
            await until(one, lambda: first.session.query(QuestionPanel), 30)
            await two.press("1", "enter")  # the second app answers: staging
            await until(one, lambda: ended(first) and not first.session.busy, 30)
            await until(two, lambda: ended(second) and not second.session.busy, 30)
            assert not first.session.query(QuestionPanel)
            assert "chose staging" in ended(first)[-1].record.reply
            assert "chose staging" in ended(second)[-1].record.reply


class TestLongOutputOnARealWorker:
    async def test_a_program_printing_100000_lines_shows_the_fold_and_the_last_lines(
        self, session: tuple[LocalAccess, str], until: Until
    ) -> None:
        access, sid = session
        app = TuiApp(await access.link(sid, client_id="tui:test:1"))
        async with app.run_test(size=(100, 40)) as pilot:
            await until(pilot, app.session.attached.is_set, 30)
            app.session.submit("for i in range(100000): print(i)")
            await until(pilot, lambda: ended(app) and not app.session.busy, 60)
            view = ended(app)[-1]
            assert view.record.reply.count("\n") == 100_000  # the record keeps everything
            await until(pilot, lambda: view.size.height > 0, 30)
            strips = view.render_lines(Region(0, 0, view.size.width, view.size.height))
            shown = [strip.text.strip() for strip in strips]
            assert shown[1:21] == [str(i) for i in range(20)]
            assert shown[21].startswith("… 99,780 lines hidden · o on the selected turn opens")
            assert shown[-201:-1] == [str(i) for i in range(99_800, 100_000)]
            assert shown[-1].startswith("#1 · ")  # its number, time and duration
