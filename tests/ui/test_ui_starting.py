"""The app's first screen, drawn before the session is reached (`tui attach`'s way): keys typed
on it reach the session once it answers, and the command palette opened on it stays until it is
closed; a session that cannot be reached leaves with its
error; Ctrl+D leaves at once."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

from textual.command import CommandPalette
from textual.widgets import Input, Static

from tui.access.local import LocalAccess
from tui.errors import NotFound
from tui.store import StatePaths, read_sidecar
from tui.ui import Reached, TuiApp
from tui.ui.screens.starting import StartingScreen

Until = Callable[..., Awaitable[None]]


def _shown(app: TuiApp, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


async def test_keys_typed_on_the_first_screen_are_sent_once_the_session_is_reached(
    state_dir: Path, tmp_path: Path, until: Until
) -> None:
    access = LocalAccess(StatePaths(state_dir))
    sid = await access.create(working_directory=str(tmp_path))
    go = threading.Event()

    def reach() -> Reached:  # as `tui attach` does, in the app's thread; held until the keys are in
        go.wait(60)
        link = asyncio.run(LocalAccess(StatePaths(state_dir)).link(sid, client_id="tui:test:1"))
        return Reached(link, str(tmp_path), state_dir)

    app = TuiApp(reach=reach, reaching=f"reaching session {sid[:8]}", first_prompt="print('first')")
    try:
        async with app.run_test(size=(100, 40)) as pilot:
            starting = app.screen
            assert isinstance(starting, StartingScreen)
            assert f"reaching session {sid[:8]}" in _shown(app, "#starting-status")
            assert "Enter sends" in _shown(app, "#starting-prompt")
            await pilot.press(*"print(6*7)", "backspace", ")", "enter", *"x = 1")
            await until(pilot, lambda: starting.draft == "x = 1")
            assert starting.entered == ["print(6*7)"]
            assert "x = 1" in _shown(app, "#starting-prompt")  # what was typed is shown meanwhile
            assert not app.reached
            await pilot.press("ctrl+p", *"the")  # the palette its footer offers, open as the session answers
            palette = app.screen
            assert isinstance(palette, CommandPalette)
            reaching = next(worker for worker in app.workers if worker.name == "reach")
            go.set()
            await until(pilot, lambda: reaching.is_finished, 30)  # reached: not shown over the palette
            assert app.screen is palette and palette.query_one(Input).value == "the"
            await pilot.press("escape")
            await until(pilot, lambda: app.reached and app.screen is app.session, 30)
            assert app.screen_stack[1:] == [app.session]  # the first screen is not left underneath
            await until(pilot, lambda: len(app.session.transcript.turn_views()) == 2, 30)
            await until(pilot, lambda: not app.session.busy, 30)
            first, turn = (view.record for view in app.session.transcript.turn_views())
            assert first.prompt == "print('first')"  # the command line's prompt, then what was typed
            assert turn.prompt == "print(6*7)" and "42" in turn.reply
            assert app.session.prompt.text == "x = 1"  # typed after Enter: still in the prompt
            await pilot.press("ctrl+d")
        assert app.return_code == 0 and app.failure is None
    finally:
        go.set()
        for car_path in StatePaths(state_dir).sessions.glob("*/worker.json"):
            car = read_sidecar(car_path)
            if car is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(car.pid, signal.SIGKILL)


async def test_a_session_that_cannot_be_reached_leaves_with_its_error(until: Until) -> None:
    def reach() -> Reached:
        raise NotFound("no session matches 'zz'; `tui sessions --all` lists them")

    app = TuiApp(reach=reach, reaching="reaching session zz")
    async with app.run_test(size=(100, 40)) as pilot:
        await until(pilot, lambda: app.failure is not None)
        assert isinstance(app.failure, NotFound) and app.return_code == 1  # `tui attach` raises it
        assert not app.reached


async def test_ctrl_d_on_the_first_screen_leaves_without_waiting_for_the_session(until: Until) -> None:
    go = threading.Event()

    def reach() -> Reached:
        go.wait(60)
        raise NotFound("never reached")

    app = TuiApp(reach=reach, reaching="reaching session zz")
    try:
        async with app.run_test(size=(100, 40)) as pilot:
            assert isinstance(app.screen, StartingScreen)
            keys = lambda: " ".join(str(key.render()) for key in app.screen.query("FooterKey"))  # noqa: E731
            await until(pilot, lambda: "Detach" in keys())
            assert "Help" not in keys()  # the session's keys wait for the session
            await pilot.press("f1")
            await pilot.press("ctrl+d")
        assert app.return_code == 0 and not app.reached and app.failure is None
    finally:
        go.set()


def test_the_first_screen_s_theme_is_config_toml_s_read_without_the_settings(tmp_path: Path) -> None:
    from tui.config import load_config
    from tui.places import saved_theme

    assert saved_theme(tmp_path) is None  # no config.toml
    (tmp_path / "config.toml").write_text('theme = "nord"\n[notify]\nterminal = "bell"\n')
    assert saved_theme(tmp_path) == "nord" == load_config(tmp_path).theme
    (tmp_path / "config.toml").write_text('theme = "nord\n')  # not TOML: the commands say so, not the frame
    assert saved_theme(tmp_path) is None
