"""Following the bottom: sending a prompt shows its turn whatever the reader did before (a search
that jumped to an old turn, a selection), no ended turn is ever missing from the view (even one
that ended while the newest page was on its way), and a reader away from the bottom is told that
new turns arrived and how to go down."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from textual.pilot import Pilot

from tui.protocol import By, Transcript, TurnRecord
from tui.testing.double import WorkerLink
from tui.ui import TuiApp

Until = Callable[..., Awaitable[None]]


def history(n: int, words: dict[int, str] | None = None) -> list[TurnRecord]:
    words = words or {}
    return [
        TurnRecord(
            turn_id=f"h{i}",
            prompt=f"print({i})",
            reply=f"{i} {words.get(i, '')}\n",
            outcome="completed",
            by=By(name="alice"),
            started_seq=2 * i + 1,
            ended_seq=2 * i + 2,
        )
        for i in range(n)
    ]


def prompts(app: TuiApp) -> list[str]:
    return [v.record.prompt for v in app.session.transcript.turn_views()]


def at_bottom(app: TuiApp) -> bool:
    transcript = app.session.transcript
    return transcript._follow and transcript.at_live_end and transcript.scroll_y >= transcript.max_scroll_y


def footer(app: TuiApp) -> dict[str, str]:
    return {k: b.binding.description for k, b in app.active_bindings.items() if b.binding.show}


async def attached(app: TuiApp, pilot: Pilot[object], until: Until) -> None:
    await until(pilot, app.session.attached.is_set)
    await until(pilot, lambda: app.session.transcript.mounted_turns >= 40)


class SlowNewest:
    """Holds the answer to the request for the newest page (no before/after/around) once it is
    made, until released: a turn can start and end while that page is on its way, as it does when
    keys arrive together and the program is quick."""

    def __init__(self, link: WorkerLink) -> None:
        self.armed = False
        self.held = 0
        self.gate = asyncio.Event()
        self._fetch = link.transcript
        link.transcript = self.transcript  # type: ignore[method-assign]

    async def transcript(self, limit: int = 50, **where: Any) -> Transcript:
        page = await self._fetch(limit, **where)
        if self.armed and not any(where.values()):
            self.held += 1
            await self.gate.wait()
        return page


async def test_a_turn_that_ends_while_the_newest_page_loads_still_shows(until: Until) -> None:
    """Search an old turn, Esc, send a quick program: its turn shows, at the bottom, followed."""
    link = WorkerLink(history=history(115, {7: "zebra"}))
    slow = SlowNewest(link)
    app = TuiApp(link)
    async with app.run_test(size=(100, 30)) as pilot:
        await attached(app, pilot, until)
        transcript = app.session.transcript
        await pilot.press("ctrl+f", *"zebra", "enter")
        await until(pilot, lambda: transcript.selected == "h7")
        await pilot.press("escape")
        slow.armed = True
        await pilot.press(*'print("repro 2")')
        await until(pilot, lambda: slow.held)  # the newest page is on its way
        await pilot.press("enter")
        await until(pilot, lambda: app.session.busy)
        await link.reply("repro 2\n")
        await until(pilot, lambda: not app.session.busy)
        slow.armed = False
        slow.gate.set()
        await until(pilot, lambda: 'print("repro 2")' in prompts(app))
        await until(pilot, lambda: at_bottom(app))
        assert prompts(app)[-2:] == ["print(114)", 'print("repro 2")']
        # The next turn follows too, with none missing between.
        link.start_turn("print(116)")
        await link.reply("116\n")
        await until(pilot, lambda: prompts(app)[-1] == "print(116)")
        assert prompts(app)[-3:] == ["print(114)", 'print("repro 2")', "print(116)"]


async def test_sending_after_a_selection_follows_the_bottom(until: Until) -> None:
    """Alt+Up, Esc, then a prompt whose output is longer than the screen: the view follows it."""
    link = WorkerLink(history=history(30))
    app = TuiApp(link)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, app.session.attached.is_set)
        await pilot.press("alt+up", "escape")
        assert app.session.transcript.selected is None
        await pilot.press(*"print(1)", "enter")
        await until(pilot, lambda: app.session.busy)
        await link.reply("".join(f"line {i}\n" for i in range(80)))
        await until(pilot, lambda: prompts(app)[-1] == "print(1)")
        await until(pilot, lambda: at_bottom(app))


async def test_a_reader_away_from_the_bottom_is_told_of_new_turns(until: Until) -> None:
    link = WorkerLink(history=history(30))
    app = TuiApp(link)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, app.session.attached.is_set)
        assert "ctrl+end" not in footer(app), "at the bottom: nothing to go back to"
        await pilot.press("pageup")
        await until(pilot, lambda: footer(app).get("ctrl+end") == "Bottom")
        link.start_turn("print(30)", by="bob")
        await link.reply("30\n")
        await until(pilot, lambda: footer(app).get("ctrl+end") == "New turns ↓")
        assert not at_bottom(app), "the reader's place is kept"
        await pilot.press("ctrl+end")
        await until(pilot, lambda: at_bottom(app))
        await until(pilot, lambda: "ctrl+end" not in footer(app))


async def test_esc_is_in_the_footer_while_a_turn_is_selected_or_the_search_is_open(until: Until) -> None:
    link = WorkerLink(history=history(5, {2: "zebra"}))
    app = TuiApp(link)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, app.session.attached.is_set)
        assert "escape" not in footer(app)
        await pilot.press("alt+up")
        await until(pilot, lambda: footer(app).get("escape") == "Back")
        await pilot.press("escape")
        await until(pilot, lambda: "escape" not in footer(app))
        await pilot.press("ctrl+f")
        await until(pilot, lambda: footer(app).get("escape") == "Back")
        await pilot.press("escape")
        await until(pilot, lambda: "escape" not in footer(app))
