"""Notes in the app on a real worker and a real ACP agent (tests/acp_agent.py): the first screen's
note, a refused read, an agent that cannot load its earlier session. Each shows where it came,
live, after the turn ends, after a reattach and in quick turns; an answered question keeps its
place among the calls; a call a restart cut off reads interrupted."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from acp_agent import agent_pids, configure
from helpers import stop_workers, wait_until
from textual.geometry import Region
from textual.pilot import Pilot

from tui.access.local import LocalAccess
from tui.protocol import Note, TextChunk
from tui.store import StatePaths, read_sidecar
from tui.testing.double import WorkerLink
from tui.ui import TuiApp
from tui.ui.widgets.question import QuestionPanel
from tui.ui.widgets.transcript import NoteLine
from tui.ui.widgets.turn import TurnView

Until = Callable[..., Awaitable[None]]

REFUSED = "note from tester: refused the agent's read of"
FIRST = "note from tui: This agent runs as you"


@pytest.fixture
async def acp(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[LocalAccess, Path]]:
    """The test agent as ``[agents.tester]`` (without ``session/load``); the workers and agents of
    the state dir end with the test."""
    config = tmp_path / "config"
    config.mkdir()
    configure(config, tmp_path / "agent-state", load=False)
    monkeypatch.setenv("TUI_CONFIG_DIR", str(config))
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("first\n")
    access = LocalAccess(StatePaths(state_dir))
    try:
        yield access, work
    finally:
        ids = [p.name for p in StatePaths(state_dir).sessions.iterdir() if p.is_dir()]
        stop_workers(state_dir)
        wait_until(lambda: not any(agent_pids(sid) for sid in ids), "the agents to end")


def shown(widget: TurnView | NoteLine) -> list[str]:
    """The lines `widget` draws, as a reader sees them."""
    strips = widget.render_lines(Region(0, 0, widget.size.width, widget.size.height))
    return [strip.text.strip() for strip in strips if strip.text.strip()]


def screen_lines(app: TuiApp) -> list[str]:
    """Every line the transcript's mounted notes and ended turns draw, top to bottom."""
    lines: list[str] = []
    for item in app.session.transcript.items:
        widget = item.drawn
        if isinstance(widget, TurnView | NoteLine) and widget.size.height:
            lines += shown(widget)
    return lines


def ended(app: TuiApp) -> list[TurnView]:
    return app.session.transcript.turn_views()


def index(lines: list[str], text: str) -> int:
    found = [i for i, line in enumerate(lines) if text in line]
    assert found, f"{text!r} not in {lines}"
    return found[0]


async def drawn(app: TuiApp, pilot: Pilot[object], until: Until, count: int) -> list[str]:
    await until(pilot, lambda: len(ended(app)) == count and all(v.size.height for v in ended(app)), 30)
    await pilot.pause()
    return screen_lines(app)


@pytest.mark.slow
class TestNotesOnARealAgent:
    async def test_notes_show_in_their_place_live_and_after_a_reattach(
        self, acp: tuple[LocalAccess, Path], until: Until
    ) -> None:
        access, work = acp
        sid = await access.create(working_directory=str(work), agent="tester")
        app = TuiApp(await access.link(sid, client_id="tui:test:1"))
        async with app.run_test(size=(120, 60)) as pilot:
            await until(pilot, app.session.attached.is_set, 30)
            await until(pilot, lambda: any(FIRST in line for line in screen_lines(app)), 30)
            app.session.submit("read the notes")
            live = await drawn(app, pilot, until, 1)
            app.session.submit("permission to run the tests")
            await until(pilot, lambda: app.session.query(QuestionPanel), 30)
            await pilot.press("1", "enter")  # Allow
            live = await drawn(app, pilot, until, 2)
        # the ended turn keeps the note it showed live, in its place
        assert index(live, "notes.txt says") < index(live, REFUSED) < index(live, "outside.txt was refused")
        assert index(live, FIRST) < index(live, "read the notes")

        again = TuiApp(await access.link(sid, client_id="tui:test:2"))
        async with again.run_test(size=(120, 60)) as pilot:
            await until(pilot, again.session.attached.is_set, 30)
            reattached = await drawn(again, pilot, until, 2)
        assert reattached == live  # a reattach draws what was drawn live, in the same order
        assert index(reattached, "Run make test") < index(reattached, "answered by")
        assert index(reattached, "answered by") < index(reattached, "permission: allow-once")

    async def test_a_new_worker_says_the_agent_cannot_load_its_session_and_a_reattach_shows_it(
        self, acp: tuple[LocalAccess, Path], state_dir: Path, until: Until
    ) -> None:
        access, work = acp
        sid = await access.create(working_directory=str(work), agent="tester")
        link = await access.link(sid, client_id="tui:test:0")
        await link.send_turn("hello", request_id="r1")
        await link.close()
        app = TuiApp(await access.link(sid, client_id="tui:test:1"))
        async with app.run_test(size=(120, 60)) as pilot:
            await until(pilot, app.session.attached.is_set, 30)
            await drawn(app, pilot, until, 1)
        stop_workers(state_dir, sid)  # the next attach starts a new worker, with a new agent session
        wait_until(lambda: not agent_pids(sid), "the agent to end")
        for client in ("tui:test:2", "tui:test:3"):  # the one that starts the worker, then a reattach
            again = TuiApp(await access.link(sid, client_id=client))
            async with again.run_test(size=(120, 60)) as pilot:
                await until(pilot, again.session.attached.is_set, 30)
                await until(
                    pilot,
                    lambda: any("cannot load its earlier session" in line for line in screen_lines(again)),  # noqa: B023
                    30,
                )
                lines = screen_lines(again)
                assert index(lines, "hello") < index(lines, "cannot load its earlier session")

    async def test_a_call_a_restart_cut_off_reads_interrupted_not_still_working(
        self, acp: tuple[LocalAccess, Path], state_dir: Path, until: Until
    ) -> None:
        access, work = acp
        sid = await access.create(working_directory=str(work), agent="tester")
        app = TuiApp(await access.link(sid, client_id="tui:test:1"))
        async with app.run_test(size=(120, 60)) as pilot:
            await until(pilot, app.session.attached.is_set, 30)
            app.session.submit("permission to run the tests")
            await until(pilot, lambda: app.session.query(QuestionPanel), 30)
            car = read_sidecar(StatePaths(state_dir).session(sid).sidecar)
            assert car is not None
            os.killpg(car.pid, signal.SIGKILL)  # the worker (and its agent) stop mid-call
            live = await drawn(app, pilot, until, 1)
        again = TuiApp(await access.link(sid, client_id="tui:test:2"))
        async with again.run_test(size=(120, 60)) as pilot:
            await until(pilot, again.session.attached.is_set, 30)
            reattached = await drawn(again, pilot, until, 1)
        for lines in (live, reattached):
            call = lines[index(lines, "Run make test")]
            assert "interrupted" in call and "still_working" not in call and "running" not in call


class TestNotesInQuickTurns:
    async def test_a_note_inside_a_quick_turn_shows_in_it_once(self, until: Until) -> None:
        """Turns that arrive all at once (a script's) keep their notes, each under its prompt."""
        link = WorkerLink(agent="tester", reply_format="markdown")
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, app.session.attached.is_set)
            for n in range(3):  # no await between them: they arrive as one batch
                turn = link.start_turn(f"step {n}")
                link.emit(TextChunk(turn_id=turn, text=f"before {n}\n\n"))
                link.emit(Note(text=f"refused {n}", source="tester"))
                link.emit(TextChunk(turn_id=turn, text=f"after {n}\n"))
                await link.end_turn()
            link.emit(Note(text="between turns", source="tester"))
            await until(pilot, lambda: len(ended(app)) == 3 and all(v.size.height for v in ended(app)))
            await until(pilot, lambda: any("between turns" in line for line in screen_lines(app)))
            lines = screen_lines(app)
            for n in range(3):
                said = [line for line in lines if f"refused {n}" in line]
                assert said == [f"note from tester: refused {n}"]
                assert index(lines, f"before {n}") < index(lines, f"refused {n}") < index(lines, f"after {n}")
            assert index(lines, "after 2") < index(lines, "between turns")
