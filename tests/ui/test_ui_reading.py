"""Reading the transcript with the keyboard: scrolling, paging older turns in, keeping the place,
memory bounded however far the reader goes, selecting and copying a turn, finding text."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from helpers import app_until_done, eventually, stop_workers
from textual.pilot import Pilot
from textual.strip import Strip
from textual.widgets._footer import FooterKey

from tui.access.local import LocalAccess
from tui.link.base import AttachLink
from tui.protocol import By, TextChunk, TurnRecord
from tui.store import StatePaths
from tui.testing.double import LinkRequest, WorkerLink
from tui.ui import TuiApp
from tui.ui.widgets.transcript import KEEP, WINDOW, TranscriptView
from tui.ui.widgets.turn import PromptBlock, TurnView

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


def routes(link: WorkerLink, route: str) -> list[dict[str, object]]:
    return [r.body for r in link.requests if r.route == route]


def first_shown(app: TuiApp) -> TurnView:
    """The first turn reaching into the transcript's view."""
    transcript = app.session.transcript
    top = transcript.scroll_y
    return next(v for v in transcript.turn_views() if v.virtual_region.bottom > top)


def mounted(app: TuiApp) -> int:
    """How many widgets the screen holds, but the footer's keys (Ctrl+End shows once away)."""
    return sum(1 for w in app.screen.query("*") if not isinstance(w, FooterKey))


async def attached(app: TuiApp, pilot: Pilot[object], until: Until) -> None:
    await until(pilot, app.session.attached.is_set)
    await until(
        pilot, lambda: app.session.transcript.mounted_turns >= min(40, len(app.session.transcript.items))
    )
    await pilot.pause()


class TestScrolling:
    async def test_keys_scroll_the_transcript_while_the_prompt_keeps_the_text(self, until: Until) -> None:
        link = WorkerLink(history=history(100))
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await attached(app, pilot, until)
            transcript = app.session.transcript
            await pilot.press(*"draft")
            await until(pilot, lambda: transcript.scroll_y == transcript.max_scroll_y)
            bottom = transcript.scroll_y
            await pilot.press("pageup")  # a page up
            assert transcript.scroll_y < bottom
            paged = transcript.scroll_y
            await pilot.press("shift+up")  # a line up
            assert transcript.scroll_y == paged - 1
            await pilot.press("shift+down", "pagedown")
            assert transcript.scroll_y == transcript.max_scroll_y
            assert app.session.prompt.text == "draft"
            assert app.focused is app.session.prompt

    async def test_ctrl_end_and_typing_go_back_to_the_bottom(self, until: Until) -> None:
        link = WorkerLink(history=history(30))
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await attached(app, pilot, until)
            transcript = app.session.transcript
            await pilot.press("ctrl+home")  # the top of what is loaded
            await until(pilot, lambda: transcript.scroll_y == 0)
            await pilot.press("ctrl+end")  # the live bottom
            await until(pilot, lambda: transcript.scroll_y == transcript.max_scroll_y)
            await pilot.press("pageup", "pageup")
            assert transcript.scroll_y < transcript.max_scroll_y
            await pilot.press("x")  # typing a prompt
            await until(pilot, lambda: transcript.scroll_y == transcript.max_scroll_y)
            assert app.session.prompt.text == "x"

    async def test_paging_older_turns_in_keeps_the_turn_under_the_eye_on_its_row(self, until: Until) -> None:
        gate = asyncio.Event()

        async def slow_older(request: LinkRequest) -> object:
            if request.route == "transcript" and request.body.get("before"):
                await gate.wait()
            return NotImplemented

        link = WorkerLink(history=history(300), handler=slow_older)
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await attached(app, pilot, until)
            transcript = app.session.transcript
            for page in range(1, 4):
                for _ in range(100):  # up to the top of the kept turns: older ones are asked for
                    if len(routes(link, "transcript")) > page:
                        break
                    await pilot.press("pageup")
                    await pilot.pause()
                await until(pilot, lambda: len(routes(link, "transcript")) > page)  # noqa: B023
                await pilot.pause()
                assert "loading older turns" in transcript.older_line
                seen = first_shown(app)
                row = seen.region.y
                gate.set()
                await until(pilot, lambda: not transcript.is_fetching)
                await pilot.pause()
                gate.clear()
                assert seen.region.y == row  # the same turn on the same row
            assert transcript.turn_views()[0].record.turn_id == "h140"
            assert transcript.mounted_turns <= WINDOW

    async def test_the_line_above_the_kept_turns_says_they_load_while_they_do(self, until: Until) -> None:
        gate = asyncio.Event()

        async def slow_older(request: LinkRequest) -> object:
            if request.route == "transcript" and request.body.get("before"):
                await gate.wait()
            return NotImplemented

        link = WorkerLink(history=history(300), handler=slow_older)
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await attached(app, pilot, until)
            transcript = app.session.transcript

            def top_row() -> str:
                return transcript.render_line(0).text.strip()

            transcript.scroll_to(y=0, animate=False, immediate=True)  # the top: older ones are asked for
            assert top_row().startswith("↑ older turns: PgUp")
            await until(pilot, lambda: len(routes(link, "transcript")) > 1)
            await pilot.pause()
            transcript.scroll_to(y=0, animate=False, immediate=True)
            assert top_row() == "↑ loading older turns…"
            gate.set()
            await until(pilot, lambda: not transcript.is_fetching)
            gate.clear()
            transcript.scroll_to(y=0, animate=False, immediate=True)
            assert top_row().startswith("↑ older turns: PgUp")
            gate.set()

    async def test_a_page_arriving_after_the_reader_jumped_elsewhere_is_dropped(self, until: Until) -> None:
        gate = asyncio.Event()

        async def slow_older(request: LinkRequest) -> object:
            if request.route == "transcript" and request.body.get("before"):
                await gate.wait()
            return NotImplemented

        link = WorkerLink(history=history(1_000, {500: "zebra"}), handler=slow_older)
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await attached(app, pilot, until)
            transcript = app.session.transcript
            await pilot.press("ctrl+home")  # older turns are asked for (and take their time)
            await until(pilot, lambda: len(routes(link, "transcript")) > 1)
            await pilot.press("ctrl+f", *"zebra", "enter")  # meanwhile, a jump to turn 500
            await until(pilot, lambda: transcript.selected == "h500")
            gate.set()
            await until(pilot, lambda: not transcript.is_fetching)
            await pilot.pause()
            numbers = [int(v.record.turn_id[1:]) for v in transcript.turn_views()]
            assert numbers == sorted(numbers)
            assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))

    async def test_a_long_session_paged_to_its_first_turn_keeps_memory_bounded(self, until: Until) -> None:
        link = WorkerLink(history=history(1_000))
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await attached(app, pilot, until)
            transcript = app.session.transcript
            most_mounted = most_kept = 0
            for _ in range(400):
                views = transcript.turn_views()
                if views and views[0].record.turn_id == "h0" and transcript.scroll_y == 0:
                    break
                await pilot.press("ctrl+home")  # the top; again: older turns
                await pilot.pause()
                most_mounted = max(most_mounted, transcript.mounted_turns)
                most_kept = max(most_kept, len(transcript.items))
            assert transcript.turn_views()[0].record.turn_id == "h0"
            assert most_mounted <= WINDOW
            assert most_kept <= KEEP
            assert transcript.has_newer  # the newest records were let go
            # and back down to the live bottom: the newest turns again
            await pilot.press("ctrl+end")
            await until(pilot, lambda: transcript.turn_views()[-1].record.turn_id == "h999")
            assert not transcript.has_newer


class TestFirstAndLast:
    async def test_ctrl_home_goes_to_the_first_turn_in_one_press_and_ctrl_end_back(
        self, until: Until
    ) -> None:
        link = WorkerLink(history=history(2_000))
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await attached(app, pilot, until)
            transcript = app.session.transcript
            widgets = mounted(app)
            asked = len(routes(link, "transcript"))
            await pilot.press("ctrl+home")  # once
            await until(pilot, lambda: transcript.turn_views()[0].record.turn_id == "h0", 30)
            await until(pilot, lambda: transcript.scroll_y == 0)
            assert first_shown(app).record.turn_id == "h0"
            # one request for the first turns, not the whole session read on the way there
            assert [r.get("first") for r in routes(link, "transcript")[asked:]] == [True]
            assert not transcript.has_more and transcript.has_newer
            assert len(transcript.items) <= KEEP  # what it passed on the way is not kept
            assert mounted(app) == widgets  # turns arrive as data: nothing mounted
            await pilot.press("ctrl+end")  # back to the live bottom
            await until(pilot, lambda: transcript.turn_views()[-1].record.turn_id == "h1999", 30)
            await until(pilot, lambda: transcript.scroll_y == transcript.max_scroll_y)
            assert not transcript.has_newer

    async def test_ctrl_home_reaches_the_first_turn_of_a_worker_older_than_the_first_page(
        self, until: Until
    ) -> None:
        link = WorkerLink(history=history(2_500))

        def old_worker(request: LinkRequest) -> object:
            if request.route == "transcript" and request.body.get("first"):
                return link.worker.transcript(int(str(request.body["limit"])))  # ignores `first`
            return NotImplemented

        link.handler = old_worker
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await attached(app, pilot, until)
            transcript = app.session.transcript
            await pilot.press("ctrl+home")
            await until(pilot, lambda: transcript.turn_views()[0].record.turn_id == "h0", 30)
            await until(pilot, lambda: transcript.scroll_y == 0)
            assert first_shown(app).record.turn_id == "h0"
            assert not transcript.has_more and transcript.has_newer


@pytest.fixture
def makes(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[str]]]:
    """The prompts whose lines were made, by where: on the app's loop (``loop``) or in a thread."""
    where: dict[str, list[str]] = {"loop": [], "thread": []}
    make = PromptBlock.make

    def recorded(self: PromptBlock, view: object, width: int) -> object:
        on_loop = threading.current_thread() is threading.main_thread()
        where["loop" if on_loop else "thread"].append(self.record.prompt)
        return make(self, view, width)  # type: ignore[arg-type]

    monkeypatch.setattr(PromptBlock, "make", recorded)
    yield where


def all_made(transcript: TranscriptView) -> bool:
    return all(v.made_at(transcript.line_width) for v in transcript.turn_views())


class TestDrawnAsLines:
    async def test_a_page_arriving_makes_the_turns_above_the_view_in_a_thread(
        self, until: Until, makes: dict[str, list[str]]
    ) -> None:
        """A page of older turns arriving wraps on the loop only what is about to show; the turns
        further above are made in a thread."""
        gate = asyncio.Event()

        async def slow_older(request: LinkRequest) -> object:
            if request.route == "transcript" and request.body.get("before"):
                await gate.wait()
            return NotImplemented

        link = WorkerLink(history=history(300), handler=slow_older)
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await attached(app, pilot, until)
            transcript = app.session.transcript
            for _ in range(100):  # up to the top of the kept turns: older ones are asked for
                if len(routes(link, "transcript")) > 1:
                    break
                await pilot.press("pageup")
                await pilot.pause()
            await until(pilot, lambda: len(routes(link, "transcript")) > 1)
            await until(pilot, lambda: all_made(transcript))
            await pilot.pause()
            makes["loop"].clear()
            gate.set()
            await until(pilot, lambda: not transcript.is_fetching)
            await until(pilot, lambda: all_made(transcript))
            await pilot.pause()
            page = {f"print({i})" for i in range(220, 260)}  # the 40 turns that arrived
            assert page <= {*makes["loop"], *makes["thread"]}
            view = transcript.scrollable_content_region.height
            assert len(page & set(makes["loop"])) <= view // 2  # at most a screen of them (3 lines a turn)
            assert len(page & set(makes["thread"])) >= 40 - view // 2

    async def test_rows_of_a_streaming_turn_that_only_moved_are_not_made_again(
        self, until: Until, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """At the bottom, a line more of output moves every row of the running turn up: the view
        draws them all again (as a `Log` does) but makes only the new row's line."""
        from tui.ui.widgets import transcript as module

        made: list[str] = []
        live_row = module.live_row

        def counted(strip: Strip, *args: object) -> Strip:
            made.append(strip.text)
            return live_row(strip, *args)  # type: ignore[arg-type]

        monkeypatch.setattr(module, "live_row", counted)
        link = WorkerLink(history=history(50))
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await attached(app, pilot, until)
            transcript = app.session.transcript
            turn = link.start_turn("for i in range(100): print(i)")
            await until(pilot, lambda: transcript.live is not None)
            live = transcript.live
            assert live is not None
            link.emit(TextChunk(turn_id=turn, text="".join(f"row {n}\n" for n in range(60))))
            await until(pilot, lambda: live.segments and live.segments[0].text.endswith("row 59\n"))
            await until(pilot, lambda: transcript.scroll_y == transcript.max_scroll_y > 0)
            await pilot.pause()
            made.clear()
            drawn = transcript.draws
            link.emit(TextChunk(turn_id=turn, text="row 60\n"))
            await until(pilot, lambda: live.segments[0].text.endswith("row 60\n"))
            await until(pilot, lambda: transcript.draws - drawn >= transcript.size.height)
            await pilot.pause()
            assert transcript.scroll_y == transcript.max_scroll_y  # it follows the bottom
            assert any("row 60" in text for text in made)
            assert len([text for text in made if text.strip()]) <= 2  # the new row (and the blank after)

    async def test_a_resize_wraps_on_the_loop_only_what_shows(
        self, until: Until, makes: dict[str, list[str]]
    ) -> None:
        """A resize makes again on the loop the turns in view (and a screen around them); the
        others kept are made in a thread, then the scrollbar tells their true height."""
        big = "".join(f"line {i} of the output\n" for i in range(100_000))
        records = history(100)
        records[-2] = records[-2].model_copy(update={"reply": big})
        link = WorkerLink(history=records)
        app = TuiApp(link)
        async with app.run_test(size=(120, 30)) as pilot:
            await attached(app, pilot, until)
            transcript = app.session.transcript
            await until(pilot, lambda: all_made(transcript))
            await pilot.pause()
            makes["loop"].clear()
            await pilot.resize_terminal(80, 30)
            await until(pilot, lambda: transcript.line_width < 80 and all_made(transcript))
            await pilot.pause()
            kept = len(transcript.turn_views())
            assert len(makes["loop"]) <= 3  # the big turn fills the view: it and its neighbours
            assert len(makes["thread"]) >= kept - 3
            heights = sum(v.virtual_region.height for v in transcript.turn_views())
            assert heights == sum(len(v.lines(v.content_size.width)) for v in transcript.turn_views())

    async def test_the_frame_that_shows_a_resize_is_drawn_at_the_new_width(self, until: Until) -> None:
        """The first frame at a new width draws the transcript as it then stays: its rows made
        at the new width, not the old rows cut off until the view hears of the resize."""
        words = {i: "a reply long enough to wrap at eighty columns " * 2 for i in range(40)}
        app = TuiApp(WorkerLink(history=history(40, words)))
        async with app.run_test(size=(120, 30)) as pilot:
            await attached(app, pilot, until)
            transcript = app.session.transcript
            await pilot.pause()
            first: dict[int, str] = {}  # each row as first drawn at the new width
            draw = transcript.render_line

            def render_line(y: int) -> Strip:
                strip = draw(y)
                if transcript.region.width == 80:
                    first.setdefault(y, strip.text.rstrip())
                return strip

            transcript.render_line = render_line  # type: ignore[method-assign]
            await pilot.resize_terminal(80, 30)
            await until(pilot, lambda: all_made(transcript) and not transcript.is_fetching)
            await pilot.pause()
            rows = range(transcript.scrollable_content_region.height)
            settled = [draw(y).text.rstrip() for y in rows]
            assert any("wrap at" in row for row in settled)
            assert [first.get(y) for y in rows] == settled

    async def test_a_streaming_turn_draws_nothing_else_again(self, until: Until) -> None:
        """While a turn streams below the view, no line of the view is drawn again and no other
        turn makes its lines again; paging in older turns mounts no widget."""
        link = WorkerLink(history=history(200))
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await attached(app, pilot, until)
            transcript = app.session.transcript
            turn = link.start_turn("for i in range(1000): print(i)")
            await until(pilot, lambda: transcript.live is not None)
            for _ in range(3):
                await pilot.press("pageup")  # the reader reads above: the running turn is below
            await until(pilot, lambda: not transcript.is_fetching)
            await pilot.pause()
            widgets = mounted(app)
            views = [v for v in transcript.turn_views() if v.made_at(v.content_size.width)]
            made = {id(v): v.lines(v.content_size.width) for v in views}
            drawn = transcript.draws
            for n in range(100):
                link.emit(TextChunk(turn_id=turn, text=f"{n}\n"))
            live = transcript.live
            assert live is not None
            await until(pilot, lambda: live.segments and live.segments[0].text.endswith("99\n"))
            await until(pilot, lambda: live.size.height > 100)
            await pilot.pause()
            assert transcript.draws == drawn  # no line drawn again: the running turn is out of view
            assert all(v.lines(v.content_size.width) is made[id(v)] for v in views)  # nothing re-made
            assert not transcript.children  # the view holds no widget
            assert mounted(app) == widgets


class TestQuickTurns:
    async def test_hundreds_of_turns_arriving_at_once_show_ended_and_the_prompt_keeps_working(
        self, until: Until
    ) -> None:
        """A script's quick turns reach a watching app all at once: each shows ended (no live
        view), only a window of them is mounted, and what is typed meanwhile is kept."""
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await attached(app, pilot, until)
            for n in range(500):  # no await between them: they arrive as one batch
                turn = link.start_turn(f"print({n})", by="root")
                link.emit(TextChunk(turn_id=turn, text=f"{n}\n"))
                await link.end_turn()
            transcript = app.session.transcript
            await app_until_done(  # however long the batch takes: bounded by the events applied
                pilot,
                lambda: app.session.cursor >= len(link.journal) and not app.session.busy,
                lambda: (app.session.cursor, transcript.mounted_turns, len(transcript.items)),
                "the 500 turns to be applied",
            )
            await pilot.press(*"next")
            assert transcript.live is None
            assert 0 < transcript.mounted_turns <= WINDOW
            last = transcript.turn_views()[-1]
            assert last.record.prompt == "print(499)" and last.record.outcome == "completed"
            assert app.session.prompt.text == "next"
            assert app.session.status.status.state == "idle"


class TestSelection:
    async def test_alt_up_selects_a_turn_and_y_copies_its_reply(self, until: Until) -> None:
        link = WorkerLink(history=history(5))
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await attached(app, pilot, until)
            transcript = app.session.transcript
            await pilot.press("alt+up")  # select the last turn in view
            assert transcript.selected == "h4"
            await pilot.press("alt+up")  # the one before
            assert transcript.selected == "h3"
            assert transcript.selected_view is not None and transcript.selected_view.has_class("-selected")
            await pilot.press("y")  # copy its reply
            assert app.clipboard == "3 \n"
            await pilot.press("p")  # copy its prompt
            assert app.clipboard == "print(3)"
            await pilot.press("escape")  # leave the selection, back to the prompt
            assert transcript.selected is None
            assert app.focused is app.session.prompt
            assert not routes(link, "interrupt")

    async def test_enter_on_a_turn_with_no_tool_output_says_so(self, until: Until) -> None:
        """The footer offers Enter (Tool output) on every selected turn: one with none says so."""
        app = TuiApp(WorkerLink(history=history(3)))
        async with app.run_test(size=(100, 30)) as pilot:
            await attached(app, pilot, until)
            await pilot.press("alt+up", "enter")
            await until(pilot, lambda: any(n.title == "Nothing to show" for n in app._notifications))
            assert app.session.transcript.selected == "h2"


class TestSearch:
    async def test_ctrl_f_finds_a_word_in_an_old_turn_and_enter_moves_to_the_next(self, until: Until) -> None:
        link = WorkerLink(history=history(1_000, {3: "zebra crossing", 700: "a zebra again"}))
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await attached(app, pilot, until)
            transcript = app.session.transcript
            await pilot.press("ctrl+f", *"zebra", "enter")  # find zebra
            await until(pilot, lambda: transcript.selected == "h3")
            assert routes(link, "search")[0]["q"] == "zebra"
            view = transcript.selected_view
            assert view is not None
            assert getattr(view, "highlight", "") == "zebra"
            assert "1 of 2" in str(app.session.search_bar.query_one("#search-count").render())
            await until(pilot, lambda: transcript.scrollable_content_region.contains_region(view.region))
            await pilot.press("enter")  # the next match
            await until(pilot, lambda: transcript.selected == "h700")
            assert "2 of 2" in str(app.session.search_bar.query_one("#search-count").render())
            await pilot.press("up")  # the previous one
            await until(pilot, lambda: transcript.selected == "h3")
            await pilot.press("escape")  # close: highlights cleared
            assert not app.session.search_bar.is_open
            assert all(getattr(v, "highlight", "") == "" for v in transcript.turn_views())

    async def test_slash_find_searches_at_once(self, until: Until) -> None:
        link = WorkerLink(history=history(50, {10: "needle"}))
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await attached(app, pilot, until)
            await pilot.press(*"/find needle", "enter")
            await until(pilot, lambda: app.session.transcript.selected == "h10")


@pytest.fixture
async def session(state_dir: Path, tmp_path: Path) -> AsyncIterator[tuple[LocalAccess, str]]:
    """A new session with its worker live; every worker of the state dir ends with the test."""
    access = LocalAccess(StatePaths(state_dir))
    sid = await access.create(working_directory=str(tmp_path))
    try:
        yield access, sid
    finally:
        stop_workers(state_dir)


@pytest.mark.slow
class TestOnARealWorker:
    async def test_paging_to_the_first_turn_of_a_real_session(
        self, session: tuple[LocalAccess, str], until: Until
    ) -> None:
        """Older turns come from the worker (`before=`) as the reader pages up with the keyboard."""
        access, sid = session
        link = await access.link(sid, client_id="tui:test:1")
        turns = 90
        for i in range(turns):
            await link.send_turn(f"print({i})", request_id=f"r{i}", delivery="queue")
        await eventually(lambda: _ended(link, turns), f"{turns} turns ended", timeout=60)
        app = TuiApp(await access.link(sid, client_id="tui:test:2"))
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, app.session.attached.is_set, 30)
            transcript = app.session.transcript
            await until(pilot, lambda: transcript.mounted_turns == 40, 30)
            for _ in range(20):
                if transcript.turn_views()[0].record.prompt == "print(0)":
                    break
                await pilot.press("ctrl+home")  # the top; again: older turns
                await until(pilot, lambda: not transcript.is_fetching, 30)
            assert transcript.turn_views()[0].record.prompt == "print(0)"
            assert not transcript.has_more
        await link.close()


async def _ended(link: AttachLink, turns: int) -> bool:
    return (await link.stats()).turns >= turns
