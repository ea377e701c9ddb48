"""What the screen says must be true: the footer never cuts a key's label, a question's hint says
what the keys do, a search hit in folded lines is shown, /copy copies the last reply there is,
a shell line's output lines up with the rest."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from textual.geometry import Region
from textual.widgets import Footer, Static
from textual.widgets._footer import FooterKey

from tui.protocol import By, TextChunk, ToolRecord, TurnRecord
from tui.testing.double import WorkerLink
from tui.ui import TuiApp
from tui.ui.widgets.turn import TurnView

Until = Callable[..., Awaitable[None]]


def history(n: int) -> list[TurnRecord]:
    return [
        TurnRecord(
            turn_id=f"h{i}",
            prompt=f"print({i})",
            reply=f"{i}\n",
            outcome="completed",
            by=By(name="alice"),
            started_seq=2 * i + 1,
            ended_seq=2 * i + 2,
        )
        for i in range(n)
    ]


def footer_row(app: TuiApp) -> str:
    """The footer's row as the screen shows it."""
    footer = app.screen.query_one(Footer)
    strips = app.screen._compositor.render_strips()
    return strips[footer.region.y].text


def footer_labels(app: TuiApp) -> list[str]:
    return [
        f"{k.key_display} {k.description}"
        for k in app.screen.query(FooterKey)
        if k.display and not k.has_class("-command-palette")
    ]


class TestFooter:
    @pytest.mark.parametrize(
        ("size", "selecting", "kept"),
        [((80, 24), False, "esc Interrupt"), ((120, 40), True, "f1 Help"), ((80, 24), True, "y Copy reply")],
    )
    async def test_a_key_that_does_not_fit_is_left_out_whole(
        self, until: Until, size: tuple[int, int], selecting: bool, kept: str
    ) -> None:
        link = WorkerLink(history=history(3))
        app = TuiApp(link)
        async with app.run_test(size=size) as pilot:
            await until(pilot, app.session.attached.is_set)
            link.start_turn("import time")  # a running turn: Esc interrupts
            await until(pilot, lambda: app.session.busy)
            if selecting:
                await pilot.press("alt+up")
                await until(pilot, lambda: app.session.transcript.selected is not None)
            await until(pilot, lambda: kept in footer_labels(app))
            await pilot.pause()
            row = footer_row(app)
            assert kept in row
            for label in footer_labels(app):
                assert label in row, f"{label!r} is cut in {row!r}"
            assert "^p palette" in row


def search_count(app: TuiApp) -> str:
    return str(app.session.search_bar.query_one("#search-count", Static).render())


def drawn(view: TurnView) -> str:
    strips = view.render_lines(Region(0, 0, view.size.width, view.size.height))
    return "\n".join(strip.text for strip in strips)


class TestSearchInFoldedLines:
    async def test_a_match_in_folded_lines_says_which_line_it_is(self, until: Until) -> None:
        long = "".join(f"line {i}{' zebra' if i == 500 else ''}\n" for i in range(1, 1001))
        records = history(2)
        records[0] = records[0].model_copy(update={"reply": long, "prompt": "print('zebra')"})
        link = WorkerLink(history=records, reply_format="verbatim")
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, app.session.attached.is_set)
            await pilot.press("ctrl+f", *"zebra", "enter")  # the prompt, shown
            await until(pilot, lambda: app.session.transcript.selected == "h0")
            await until(pilot, lambda: "1 of 2 · prompt" in search_count(app))
            await pilot.press("enter")  # the reply, folded
            await until(pilot, lambda: "2 of 2 · reply line 500 (folded)" in search_count(app))

    async def test_a_match_in_a_calls_output_opens_the_calls(self, until: Until) -> None:
        records = history(2)
        tool = ToolRecord(call_id="c1", name="run", args={"code": "look()"}, output="a giraffe\n")
        records[0] = records[0].model_copy(update={"tools": [tool]})
        link = WorkerLink(history=records)
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, app.session.attached.is_set)
            await pilot.press("ctrl+f", *"giraffe", "enter")
            await until(pilot, lambda: app.session.transcript.selected == "h0")
            view = app.session.transcript.selected_view
            assert view is not None
            await until(pilot, lambda: "a giraffe" in drawn(view))
            assert "folded" not in search_count(app)


class TestCopy:
    async def test_copy_takes_the_last_reply_there_is(self, until: Until) -> None:
        link = WorkerLink(history=history(3))  # replies "0\n", "1\n", "2\n"
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await until(pilot, app.session.attached.is_set)
            link.start_turn("x = 1")  # a turn that prints nothing
            await link.end_turn()
            await until(pilot, lambda: not app.session.busy and len(app.session.transcript.turn_views()) == 4)
            await pilot.press(*"/copy", "enter")
            await until(pilot, lambda: app.clipboard == "2\n")
            assert not any(n.severity == "warning" for n in app._notifications)


class TestCodeBlocks:
    async def test_a_code_blocks_lines_start_where_the_text_does_live_and_ended(self, until: Until) -> None:
        """A model session's ``!print(x + 1)`` answers with its output in a code block."""
        link = WorkerLink(agent="model", reply_format="markdown")
        app = TuiApp(link)

        def columns() -> tuple[int, int] | None:
            rows = [strip.text for strip in app.screen._compositor.render_strips()]
            text = [r for r in rows if "x is one" in r]
            code = [r for r in rows if r.strip() == "2"]
            if not text or not code:
                return None
            return text[0].index("x"), code[0].index("2")

        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, app.session.attached.is_set)
            turn = link.start_turn("!print(x + 1)")
            link.emit(TextChunk(turn_id=turn, text="x is one\n\n```\n2\n```\n"))
            await until(pilot, lambda: columns() is not None)
            live = columns()
            assert live is not None and live[0] == live[1]
            await link.end_turn()
            await until(pilot, lambda: not app.session.busy and app.session.transcript.turn_views())
            await until(pilot, lambda: columns() is not None)
            ended = columns()
            assert ended is not None and ended[0] == ended[1] == live[0]
