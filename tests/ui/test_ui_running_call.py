"""A running call's output on a real worker: a model session's program prints, then waits on a
question; its output shows in the running turn, and `t` on the running turn copies it (read from
the reducer, as the session's state keeps it)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from fake_model_server import FakeModelServer
from textual.geometry import Region

from tui.access.local import LocalAccess
from tui.codemode.sandbox import landlock_abi
from tui.store import StatePaths, read_sidecar
from tui.ui import TuiApp
from tui.ui.widgets.question import QuestionPanel

Until = Callable[..., Awaitable[None]]

pytestmark = pytest.mark.slow

PROGRAM = """print("building")
for i in range(3):
    print(f"step {i} done")
x = ask("Ship it?", options=["yes", "no"])
print("shipped", x)"""
PRINTED = "building\nstep 0 done\nstep 1 done\nstep 2 done\n"


@pytest.fixture
async def model_session(state_dir: Path, tmp_path: Path) -> AsyncIterator[tuple[LocalAccess, str]]:
    """A model session on the loopback model server, its worker live; every worker of the state
    dir ends with the test."""
    if shutil.which("bwrap") is None and landlock_abi() < 1:
        pytest.skip("neither bubblewrap nor Landlock is available (apt install bubblewrap)")
    with FakeModelServer() as server:
        config = Path(os.environ["TUI_CONFIG_DIR"]) / "config.toml"
        config.write_text(
            f'[models.local]\nprovider = "openai"\nmodel = "fake-1"\nbase_url = "{server.url}"\n'
            "context_window = 8192\n"
        )
        access = LocalAccess(StatePaths(state_dir))
        sid = await access.create(working_directory=str(tmp_path), model="local")
        try:
            yield access, sid
        finally:
            for car_path in StatePaths(state_dir).sessions.glob("*/worker.json"):
                car = read_sidecar(car_path)
                if car is not None:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(car.pid, signal.SIGKILL)


async def test_a_running_calls_output_shows_while_it_runs_and_t_copies_it(
    model_session: tuple[LocalAccess, str], until: Until
) -> None:
    access, sid = model_session
    app = TuiApp(await access.link(sid, client_id="tui:test:1"))
    async with app.run_test(size=(100, 40)) as pilot:
        await until(pilot, app.session.attached.is_set, 30)
        app.session.submit("run " + PROGRAM)
        await until(pilot, lambda: _asking(app), 90)  # the program waits on its question
        live = app.session.transcript.live
        assert live is not None and app.session.busy
        # the call runs: its output so far is in the session's state, before the turn ends
        await until(pilot, lambda: _output(app) == PRINTED, 30)
        assert app.session.turn is not None and app.session.turn.tools[0].status == "running"

        await pilot.press("alt+up")  # the running turn is selected (it is the last in view)
        assert app.session.transcript.selected == live.record.turn_id
        # its calls open: what Enter on the selected turn does (the key itself may go to the
        # question, which takes the keys back once it was drawn)
        app.session.action_toggle_tools()
        await until(pilot, lambda: "step 2 done" in _drawn(app), 30)
        drawn = _drawn(app)
        assert "run_python" in drawn and "building" in drawn

        await pilot.press("t")  # copy the running call's output
        await until(pilot, lambda: app.clipboard == PRINTED, 30)

        question = app.session.question
        assert question is not None
        await app.session.link.answer(question.question_id, ["yes"])
        await until(pilot, lambda: not app.session.busy and app.session.transcript.turn_views(), 60)
        tool = app.session.transcript.turn_views()[-1].record.tools[0]
        assert tool.output.endswith("shipped yes\n") and tool.status == "completed"


def _asking(app: TuiApp) -> bool:
    """The question is drawn and has the keys."""
    focused = app.focused
    return focused is not None and any(isinstance(a, QuestionPanel) for a in focused.ancestors)


def _output(app: TuiApp) -> str:
    turn = app.session.turn
    return turn.tools[0].output if turn is not None and turn.tools else ""


def _drawn(app: TuiApp) -> str:
    live = app.session.transcript.live
    if live is None:
        return ""
    strips = live.render_lines(Region(0, 0, live.size.width, live.size.height))
    return "\n".join(strip.text for strip in strips)
