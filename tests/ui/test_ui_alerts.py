"""The app's desktop notification (``[notify] terminal``): a question or a turn's end while the
terminal is not in front rings it once (OSC 9, OSC 777 or the bell); in front, nothing."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from textual import events

from tui.access.local import LocalAccess
from tui.link.changes import QuestionChanged, TurnEnded
from tui.protocol import PendingQuestion, TurnRecord
from tui.store import StatePaths, read_sidecar
from tui.ui import TuiApp
from tui.ui.alerts import Alerts, pick, sequence
from tui.ui.widgets.question import QuestionPanel

Until = Callable[..., Awaitable[None]]


@pytest.fixture
async def session(state_dir: Path, tmp_path: Path) -> AsyncIterator[tuple[LocalAccess, str]]:
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


async def test_a_question_and_a_turns_end_ring_the_terminal_only_when_it_is_not_in_front(
    session: tuple[LocalAccess, str], state_dir: Path, until: Until
) -> None:
    access, sid = session
    app = TuiApp(await access.link(sid, client_id="tui:test:1"), state_dir=state_dir, alerts="osc9")
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, app.session.attached.is_set, 30)
        app.session.submit("print('in front')")
        await until(pilot, lambda: app.session.session_state.turns_ended == 1, 30)
        assert app.alerts.sent == []  # in front: nothing

        app.post_message(events.AppBlur())
        await until(pilot, lambda: not app.app_focus)
        app.session.submit("x = ask('Deploy\\x1b]52;c;aGk=\\x07 now?', options=['yes', 'no'])")
        await until(pilot, lambda: app.session.query(QuestionPanel), 30)
        await until(pilot, lambda: app.alerts.sent, 30)
        # What a program wrote is shown, never acting: the terminal gets no escape of its own.
        assert app.alerts.sent == [f"\x1b]9;tui {sid[:8]} asks: Deploy\u241b]52;c;aGk=\u2407 now?\x07"]

        question = app.session.question
        assert question is not None
        await app.link.answer(question.question_id, ["yes"])
        await until(pilot, lambda: len(app.alerts.sent) == 2, 30)
        assert app.alerts.sent[1] == f"\x1b]9;tui {sid[:8]}: turn completed\x07"


def test_auto_picks_what_the_terminal_shows() -> None:
    assert pick({"TERM_PROGRAM": "iTerm.app", "TERM": "xterm-256color"}) == "osc9"
    assert pick({"TERM": "xterm-kitty"}) == "osc99"
    assert pick({"TERM_PROGRAM": "WezTerm", "TERM": "xterm-256color"}) == "osc9"
    assert pick({"TERM": "foot"}) == "osc777"
    assert pick({"TERM": "xterm-kitty", "TMUX": "/tmp/tmux-0/default,1,0"}) == "bell"
    assert pick({"TERM": "xterm-256color"}) == "bell"
    assert Alerts("auto", environ={"TERM": "foot"}).mode == "osc777"


def test_what_is_written_carries_no_control_character() -> None:
    assert (
        sequence("osc777", "tui 3f2a;x", "a\x1b]0;pwned\x07b")
        == "\x1b]777;notify;tui 3f2a,x;a ]0,pwned b\x07"
    )
    assert sequence("bell", "t", "b") == "\x07"
    assert sequence("osc99", "t", "b\x1b\\") == "\x1b]99;;t: b \\\x1b\\"
    assert sequence("osc9", "t", "\x9b" + "x" * 500).count("x") < 200


def test_nothing_rings_for_other_events() -> None:
    class Blurred:
        app_focus = False
        is_headless = True
        _driver = None

    alerts = Alerts("bell")
    alerts.saw(Blurred(), [])  # type: ignore[arg-type]
    assert alerts.sent == []
    ended = TurnEnded(TurnRecord(turn_id="t", prompt="p", outcome="failed", error="boom"))
    asked = QuestionChanged(PendingQuestion(turn_id="t", question_id="q", text="why?"))
    alerts.saw(Blurred(), [asked, ended])  # type: ignore[arg-type]
    assert alerts.sent == ["\x07"]
    off = Alerts("off")
    off.saw(Blurred(), [asked])  # type: ignore[arg-type]
    assert off.sent == []


def test_a_scripts_quick_turns_ring_once_and_a_question_always() -> None:
    class Blurred:
        app_focus = False
        is_headless = True
        _driver = None

    now = [100.0]
    alerts = Alerts("bell", clock=lambda: now[0])
    ended = TurnEnded(TurnRecord(turn_id="t", prompt="p", outcome="completed"))
    asked = QuestionChanged(PendingQuestion(turn_id="t", question_id="q", text="why?"))
    for _ in range(3):
        alerts.saw(Blurred(), [ended])  # type: ignore[arg-type]
    alerts.saw(Blurred(), [asked])  # type: ignore[arg-type]
    assert len(alerts.sent) == 2
    now[0] += 11
    alerts.saw(Blurred(), [ended])  # type: ignore[arg-type]
    assert len(alerts.sent) == 3
