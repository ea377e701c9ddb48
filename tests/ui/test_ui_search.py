"""A hit opens where it was: the app attached with ``--turn N --find TEXT`` shows that turn
selected with the text highlighted, and ``/search`` finds in every session of the machine and
opens a hit (here: on its turn; in another session: the app leaves for it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from helpers import eventually, stop_workers

from tui.access.local import LocalAccess
from tui.store import StatePaths
from tui.ui import TuiApp
from tui.ui.screens.finder import Finder

Until = Callable[..., Awaitable[None]]


async def _session(access: LocalAccess, folder: Path, *prompts: str) -> str:
    sid = await access.create(working_directory=str(folder))
    link = await access.link(sid, client_id="tui:test:setup")
    for i, prompt in enumerate(prompts):
        await link.send_turn(prompt, request_id=f"r{i}", delivery="queue")

    async def ended() -> bool:
        return (await link.stats()).turns >= len(prompts) and not (await link.transcript(1)).current

    await eventually(ended, "the turns to end", timeout=60)
    await link.close()
    return sid


def _selected(app: TuiApp) -> int:
    view = app.session.transcript.selected_view
    return 0 if view is None else view.record.number


def _count(app: TuiApp) -> str:
    return str(app.session.search_bar.query_one("#search-count").render())


@pytest.mark.slow
async def test_attach_on_a_turn_with_the_match_highlighted_and_search_every_session(
    state_dir: Path, tmp_path: Path, until: Until
) -> None:
    access = LocalAccess(StatePaths(state_dir))
    try:
        sid = await _session(
            access,
            tmp_path,
            "print('alpha')",
            "print('the zebra' + 'fish swims')",
            *(f"print({i})" for i in range(3)),
            "print('omega')",
        )
        other = await _session(access, tmp_path, "print('nar' + 'whal')")
        link = await access.link(sid, client_id="tui:test:1")
        app = TuiApp(link, open_at=(2, "zebrafish"), search=access.search)
        async with app.run_test(size=(110, 32)) as pilot:
            transcript = app.session.transcript
            await until(pilot, lambda: transcript.selected_view is not None, 30)
            view = transcript.selected_view
            assert view is not None and view.record.number == 2
            assert getattr(view, "highlight", "") == "zebrafish"
            await until(pilot, lambda: "1 of 1" in _count(app))  # the search bar open on its match

            await pilot.press("escape", *"/search omega", "enter")  # every session, then this one's hit
            await until(pilot, lambda: isinstance(app.screen, Finder) and bool(app.screen.hits), 30)
            assert [(h.session_id, h.turn) for h in app.screen.hits][:1] == [(sid, 6)]
            await pilot.press("enter")  # open it: here, on turn 6
            await until(pilot, lambda: _selected(app) == 6, 30)

            await pilot.press("escape", *"/search narwhal", "enter")  # a hit of another session
            await until(pilot, lambda: isinstance(app.screen, Finder) and bool(app.screen.hits), 30)
            await pilot.press("enter")
            await until(pilot, lambda: app.next_open is not None, 30)
            assert app.next_open == (other, 1, "narwhal")  # the command line attaches it next
        await link.close()
    finally:
        stop_workers(state_dir)
