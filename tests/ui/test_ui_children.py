"""The app on a real parent whose program delegates to a child that asks: the child's line in the
running turn as it starts, its question in the parent's panel, answered there; the status row
counting the children; /children listing it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from helpers import stop_workers

from tui.access.local import LocalAccess
from tui.store import StatePaths
from tui.ui import TuiApp
from tui.ui.widgets.question import QuestionPanel

Until = Callable[..., Awaitable[None]]

pytestmark = pytest.mark.slow

PROGRAM = """r = delegate("x = ask('Go on?', options=['yes', 'no']); print('child got', x)")
print(r.strip())"""


@pytest.fixture
def workers(state_dir: Path) -> Iterator[Path]:
    yield state_dir
    stop_workers(state_dir)


async def test_a_childs_question_is_answered_in_the_parents_app(
    workers: Path, tmp_path: Path, until: Until
) -> None:
    access = LocalAccess(StatePaths(workers))
    sid = await access.create(working_directory=str(tmp_path))
    app = TuiApp(await access.link(sid, client_id="tui:test:1"), state_dir=workers)
    async with app.run_test(size=(100, 40)) as pilot:
        await until(pilot, app.session.attached.is_set, 30)
        app.session.submit(PROGRAM)
        await until(pilot, lambda: app.session.query(QuestionPanel), 60)
        question = app.session.question
        assert question is not None and question.text.startswith("child ")
        assert question.text.endswith(" asks: Go on?")
        # The child shows in the parent's running turn as it starts, with its id (not only once
        # the parent's turn ends).
        live = app.session.transcript.live
        assert live is not None
        said = [p.text for p in live.parts if p.kind == "line"]
        assert said and said[0].startswith(f"child {question.text.split()[1]} started"), said
        # The count comes with the worker's next status, drawn after the panel.
        await until(pilot, lambda: "children 1 waiting" in app.session.status.session_row(200), 30)
        await pilot.press("1", "enter")  # yes, sent through the parent's worker to the child's
        await until(pilot, lambda: app.session.transcript.turn_views() and not app.session.busy, 60)
        turn = app.session.transcript.turn_views()[-1].record
        assert turn.outcome == "completed" and turn.reply == "child got yes\n"
        child = question.text.split()[1]
        assert [line.text for line in turn.lines][-1] == f"child {child} completed"
        await until(pilot, lambda: "children 1 done" in app.session.status.session_row(200), 30)
        # /children lists it in the transcript, with the command that attaches to it.
        await pilot.press(*"/children", "enter")
        listed = f"{child}  done"
        await until(pilot, lambda: any(listed in i.line for i in app.session.transcript.items), 30)
        line = next(i.line for i in app.session.transcript.items if listed in i.line)
        assert f"attach {child}" in line
