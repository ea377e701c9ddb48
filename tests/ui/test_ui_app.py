"""The app on a scripted session (WorkerLink): what a user sees and what reaches the worker."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from textual import events
from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import Input, Static

from tui.config import load_config, save_setting
from tui.link.base import Gone, Live, Located, Reconnecting
from tui.protocol import (
    By,
    Event,
    Note,
    QuestionResolved,
    TextChunk,
    ToolEnded,
    ToolOutput,
    ToolRecord,
    ToolStarted,
    TurnRecord,
    UnknownEvent,
    WorkerLeaving,
    WorkerStarted,
)
from tui.testing.double import WorkerLink
from tui.ui import TuiApp
from tui.ui.seen import Seen, SeenStore
from tui.ui.widgets.live import ReplySegment, ToolBlock, VerbatimSegment
from tui.ui.widgets.question import QuestionPanel
from tui.ui.widgets.turn import NoteLine

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


def routes(link: WorkerLink, route: str) -> list[dict[str, object]]:
    return [r.body for r in link.requests if r.route == route]


def rendered(widget: Widget) -> str:
    strips = widget.render_lines(Region(0, 0, widget.size.width, widget.size.height))
    return "\n".join(strip.text for strip in strips)


def live_segments(app: TuiApp) -> list[VerbatimSegment | ReplySegment]:
    """The stretches of reply of the running turn."""
    live = app.session.transcript.live
    return live.segments if live is not None else []


def live_tools(app: TuiApp) -> list[ToolBlock]:
    """The calls of the running turn."""
    live = app.session.transcript.live
    return live.tools if live is not None else []


def live_size(app: TuiApp) -> int:
    """How many lines the running turn draws now."""
    live = app.session.transcript.live
    return live.size.height if live is not None else 0


def notes(app: TuiApp) -> list[NoteLine]:
    """The lines between turns the transcript draws."""
    return [i.drawn for i in app.session.transcript.items if isinstance(i.drawn, NoteLine)]


def text_of(app: TuiApp, selector: str) -> str:
    return str(app.session.query_one(selector, Static).render())


async def started(app: TuiApp, pilot, until: Until) -> None:  # type: ignore[no-untyped-def]
    await until(pilot, app.session.attached.is_set)


async def asked(app: TuiApp, pilot, until: Until) -> QuestionPanel:  # type: ignore[no-untyped-def]
    """The question is shown and holds the focus: keys pressed from here on are its keys."""

    def holding() -> bool:
        panels = app.session.query(QuestionPanel)
        return bool(panels) and app.focused is not None and panels.first() in app.focused.ancestors

    await until(pilot, holding)
    return app.session.query_one(QuestionPanel)


class TestTurns:
    async def test_enter_sends_the_prompt_and_the_reply_streams_into_the_turn(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            await pilot.press(*"print(1)", "enter")
            await until(pilot, lambda: routes(link, "turn"))
            assert routes(link, "turn")[0]["prompt"] == "print(1)"
            assert routes(link, "turn")[0]["delivery"] == "auto"
            await until(pilot, lambda: app.session.transcript.live is not None)
            link.emit(TextChunk(turn_id=link.current.turn_id, text="hello **world**\n"))  # type: ignore[union-attr]
            await link.end_turn()
            await until(pilot, lambda: app.session.turn is None and app.session.transcript.turn_views())
            view = app.session.transcript.turn_views()[-1]
            assert view.record.reply == "hello **world**\n"
            assert view.record.prompt == "print(1)"
            assert app.session.status.status.state == "idle"

    async def test_an_empty_session_says_where_it_is_and_what_to_type(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link, folder="/tmp/proj")
        async with app.run_test(size=(140, 30)) as pilot:
            await started(app, pilot, until)
            hello = app.session.transcript.hello_line
            assert "New session 3f2a9c0e in /tmp/proj" in hello
            assert "ask(" in hello and "/help" in hello
            await pilot.press(*"print(1)", "enter")
            await until(pilot, lambda: app.session.transcript.live is not None)
            assert not app.session.transcript.hello_line

    async def test_an_empty_session_with_a_note_still_says_where_it_is(self, until: Until) -> None:
        """An ACP session's first screen: tui's note of what the sandbox lets the agent reach, and
        the line saying which session this is, where, and what to type."""
        link = WorkerLink(agent="testagent", reply_format="markdown", prompt_syntax="text")
        link.emit(Note(text="the agent's own commands run outside the sandbox", source="tui"))
        app = TuiApp(link, folder="/tmp/proj")
        async with app.run_test(size=(140, 30)) as pilot:
            await started(app, pilot, until)
            assert "New session 3f2a9c0e in /tmp/proj" in app.session.transcript.hello_line
            lines = [i.line for i in app.session.transcript.items if i.line]
            assert lines == ["note from tui: the agent's own commands run outside the sandbox"]

    async def test_a_multi_line_prompt_is_indented_under_its_first_line(self, until: Until) -> None:
        record = history(1)[0].model_copy(update={"prompt": "import time\nfor i in range(3):\n    print(i)"})
        link = WorkerLink(history=[record])
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await started(app, pilot, until)
            view = app.session.transcript.turn_views()[0]
            await until(pilot, lambda: view.size.height > 0)
            lines = rendered(view).splitlines()
            assert lines[0].startswith("\u276f import time")
            assert lines[1].startswith("  for i in range(3):")
            assert lines[2].startswith("      print(i)")

    async def test_a_failed_turn_says_so(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            link.start_turn("1/0")
            link.emit(TextChunk(turn_id=link.current.turn_id, text="Traceback\n"))  # type: ignore[union-attr]
            await link.end_turn("failed", error="ZeroDivisionError: division by zero")
            await until(pilot, lambda: app.session.transcript.turn_views())
            view = app.session.transcript.turn_views()[-1]
            await until(pilot, lambda: view.size.height > 0)
            assert "failed: ZeroDivisionError" in rendered(view)

    async def test_a_turn_says_who_sent_it_and_with_what(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await started(app, pilot, until)
            link.start_turn("print(1)", by="root", client_id="send:vm:7020")
            await link.end_turn("completed")
            link.start_turn("print(2)", by="root", client_id="tui:vm:7019")
            await link.end_turn("completed")
            await until(pilot, lambda: len(app.session.transcript.turn_views()) == 2)
            first, second = app.session.transcript.turn_views()
            await until(pilot, lambda: second.size.height > 0)
            assert "print(1)  · root (tui send)" in rendered(first)
            assert "print(2)  · root" in rendered(second) and "(" not in rendered(second).splitlines()[0][9:]

    async def test_python_output_is_shown_exactly_as_printed(self, until: Until) -> None:
        tb = 'Traceback (most recent call last):\n  File "<program 6>", line 1, in <module>\n'
        out = "a  *b*  <c> __x__\n" + tb
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await started(app, pilot, until)
            turn = link.start_turn("1/0")
            link.emit(TextChunk(turn_id=turn, text=out[:10]))
            link.emit(TextChunk(turn_id=turn, text=out[10:]))
            await until(pilot, lambda: live_segments(app))
            segment = live_segments(app)[0]
            await until(pilot, lambda: segment.text == out and live_size(app) >= 4)
            live = rendered(app.session.transcript.live)
            assert "a  *b*  <c> __x__" in live
            assert '    File "<program 6>", line 1, in <module>' in live
            await link.end_turn("failed", error="ZeroDivisionError: division by zero")
            await until(pilot, lambda: app.session.transcript.turn_views())
            view = app.session.transcript.turn_views()[-1]
            await until(pilot, lambda: view.size.height > 0)
            shown = rendered(view)
            assert "a  *b*  <c> __x__" in shown
            assert '    File "<program 6>", line 1, in <module>' in shown

    async def test_a_model_s_reply_is_markdown(self, until: Until) -> None:
        link = WorkerLink(agent="llm", reply_format="markdown")
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await started(app, pilot, until)
            link.start_turn("hi")
            await link.reply("a  *b*  done\n")
            await until(pilot, lambda: app.session.transcript.turn_views())
            view = app.session.transcript.turn_views()[-1]
            await until(pilot, lambda: view.size.height > 0)
            assert "*b*" not in rendered(view)  # emphasis, not asterisks

    async def test_tool_calls_are_blocks_with_their_output_and_outcome(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            turn = link.start_turn("ls()")
            link.emit(ToolStarted(turn_id=turn, call_id="c1", name="run", args={"code": "ls"}))
            link.emit(ToolOutput(turn_id=turn, call_id="c1", text="a.txt\n"))
            link.emit(ToolEnded(turn_id=turn, call_id="c1", status="error", error="boom"))
            await until(pilot, lambda: live_tools(app))
            block = live_tools(app)[0]
            await until(pilot, lambda: "error" in block.title)
            assert block.record.output == "a.txt\n"
            assert block.has_class("-failed")
            await link.end_turn()
            await until(pilot, lambda: app.session.transcript.turn_views())
            assert app.session.transcript.turn_views()[0].record.tools[0].error == "boom"

    async def test_a_turn_the_worker_no_longer_runs_is_shown_ended(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            link.start_turn("while True: pass")
            await until(pilot, lambda: app.session.busy)
            link.emit(WorkerStarted(epoch=2, pid=4343, version="0.1.0", agent="python"))
            await until(pilot, lambda: not app.session.busy)
            record = app.session.transcript.turn_views()[-1].record
            assert record.outcome == "failed"
            assert "restarted" in (record.error or "")

    async def test_an_unknown_event_is_shown_not_a_crash(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            link.emit(UnknownEvent(type="hologram"))
            await until(pilot, lambda: "hologram" in str(app.session.transcript.items[-1:]))


class TestLongOutput:
    async def test_a_100000_line_output_is_folded_live_and_ended(self, until: Until) -> None:
        lines = [str(i) for i in range(100_000)]
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await started(app, pilot, until)
            turn = link.start_turn("for i in range(100000): print(i)")
            for start in range(0, len(lines), 10_000):
                link.emit(
                    TextChunk(turn_id=turn, text="".join(f"{n}\n" for n in lines[start : start + 10_000]))
                )
            await until(pilot, lambda: live_segments(app))
            segment = live_segments(app)[0]
            await until(pilot, lambda: segment.text.endswith("99999\n") and live_size(app) > 200)
            live = rendered(app.session.transcript.live).splitlines()[1:]  # after the prompt
            assert [line.strip() for line in live[:20]] == lines[:20]
            fold = " ".join(line.strip() for line in live[20:-200])  # it may wrap
            how = "o on the selected turn opens the whole output"
            assert fold == f"… 99,780 lines hidden · {how} · tui transcript {link.session_id}"
            assert [line.strip() for line in live[-200:]] == lines[-200:]
            await link.end_turn()
            await until(pilot, lambda: app.session.transcript.turn_views() and app.session.turn is None)
            view = app.session.transcript.turn_views()[-1]
            await until(pilot, lambda: view.size.height > 0)
            shown = rendered(view).splitlines()
            assert shown[0].startswith("\u276f for i in range(100000)")
            assert "99,780 lines hidden" in shown[21]
            assert shown[-2].strip() == "99999"
            assert shown[-1].strip().startswith("#1 · ")  # its number, time and duration
            assert view.record.reply == "".join(f"{n}\n" for n in lines)  # the record keeps all

    async def test_an_ended_turn_from_the_session_shows_only_the_head_and_the_tail(
        self, until: Until
    ) -> None:
        reply = "".join(f"line {i}\n" for i in range(100_000))
        record = history(1)[0].model_copy(update={"reply": reply})
        link = WorkerLink(history=[record])
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await started(app, pilot, until)
            view = app.session.transcript.turn_views()[0]
            await until(pilot, lambda: view.size.height > 0)
            shown = rendered(view).splitlines()
            assert shown[20].strip() == "line 19"
            assert "99,780 lines hidden" in shown[21]
            assert [line.strip() for line in shown[-200:]] == [f"line {i}" for i in range(99_800, 100_000)]

    async def test_a_long_markdown_reply_shows_its_start_and_end_around_a_fold(self, until: Until) -> None:
        reply = "".join(f"Paragraph **{i}**.\n\n" for i in range(5000))
        record = history(1)[0].model_copy(update={"reply": reply})
        app = TuiApp(WorkerLink(history=[record], agent="llm", reply_format="markdown"))
        async with app.run_test(size=(100, 30)) as pilot:
            await started(app, pilot, until)
            view = app.session.transcript.turn_views()[0]
            await until(pilot, lambda: view.size.height > 0)
            shown = [line.strip() for line in rendered(view).splitlines()]
            assert shown[1] == "Paragraph 0."  # rendered: bold, not asterisks
            folds = [line for line in shown if "lines hidden · o on the selected turn" in line]
            assert len(folds) == 1
            assert shown[-1] == "Paragraph 4999."
            assert len(shown) < 5_000  # not the 10,000 lines of the whole reply

    async def test_a_tool_s_long_output_is_folded(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await started(app, pilot, until)
            turn = link.start_turn("run()")
            link.emit(ToolStarted(turn_id=turn, call_id="c1", name="run", args={"code": "seq 1000"}))
            link.emit(ToolOutput(turn_id=turn, call_id="c1", text="".join(f"{i}\n" for i in range(1000))))
            await until(pilot, lambda: live_tools(app))
            block = live_tools(app)[0]
            block.collapsed = False
            await until(pilot, lambda: "780 lines hidden" in rendered(app.session.transcript.live))


class TestAnsweredLines:
    async def test_an_answer_shows_at_the_question_not_after_the_output(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await started(app, pilot, until)
            turn = link.start_turn("ask('Deploy?')")
            link.emit(TextChunk(turn_id=turn, text="before\n"))
            link.emit(ToolStarted(turn_id=turn, call_id="c1", name="ask", args={"question": "Deploy?"}))
            qid = await link.ask("Deploy?", ["staging", "prod"])
            await until(pilot, lambda: app.session.question is not None)
            await link.answer(qid, ["prod"])
            link.emit(ToolEnded(turn_id=turn, call_id="c1", status="completed", value="prod"))
            link.emit(TextChunk(turn_id=turn, text="after\n"))
            await link.end_turn()
            await until(pilot, lambda: app.session.transcript.turn_views() and app.session.turn is None)
            view = app.session.transcript.turn_views()[0]
            await until(pilot, lambda: view.size.height > 0)
            shown = [line.strip() for line in rendered(view).splitlines()]
            assert shown[1:-1] == [
                "before",
                "▸ ask: Deploy? · completed",
                "answered by alice: prod",
                "after",
            ]
            assert shown[-1].startswith("#1 · ")

    async def test_in_a_turn_from_the_session_it_shows_under_the_tool_that_asked(self, until: Until) -> None:
        record = TurnRecord(
            turn_id="h1",
            prompt="ask('Deploy?')",
            reply="after\n",
            outcome="completed",
            tools=[ToolRecord(call_id="c1", name="ask", args={"question": "Deploy?"}, status="completed")],
            answered=["answered by alice: prod"],
            ended_seq=3,
        )
        app = TuiApp(WorkerLink(history=[record]))
        async with app.run_test(size=(100, 30)) as pilot:
            await started(app, pilot, until)
            view = app.session.transcript.turn_views()[0]
            await until(pilot, lambda: view.size.height > 0)
            shown = [line.strip() for line in rendered(view).splitlines()]
            assert shown[1:] == ["▸ ask: Deploy? · completed", "answered by alice: prod", "after"]


class TestHighlight:
    async def test_a_highlighted_text_is_marked_in_the_prompt_the_tools_and_the_reply(
        self, until: Until
    ) -> None:
        record = TurnRecord(
            turn_id="h1",
            prompt="print('Zero')",
            reply="zero\nnothing\nZERO here\n",
            outcome="completed",
            tools=[ToolRecord(call_id="c1", name="ask", args={"question": "zero?"})],
            ended_seq=3,
        )
        link = WorkerLink(history=[record])
        app = TuiApp(link)
        async with app.run_test(size=(100, 30)) as pilot:
            await started(app, pilot, until)
            view = app.session.transcript.turn_views()[0]
            await until(pilot, lambda: view.size.height > 0)

            def marked() -> list[str]:
                match = view.style_of("lines--match").bgcolor
                strips = view.render_lines(Region(0, 0, view.size.width, view.size.height))
                return [
                    seg.text for strip in strips for seg in strip if seg.style and seg.style.bgcolor == match
                ]

            assert marked() == []
            view.highlight = "zero"
            await pilot.pause()
            assert marked() == ["Zero", "zero", "zero", "ZERO"]
            shown = rendered(view)
            assert "print('Zero')" in shown and "ZERO here" in shown  # the rest of each line stays
            view.highlight = ""
            await pilot.pause()
            assert marked() == []


class TestHistory:
    async def test_attach_shows_the_last_turns_and_loads_older_ones_at_the_top(self, until: Until) -> None:
        link = WorkerLink(history=history(300))
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            assert routes(link, "transcript")[0]["limit"] == 40
            # the newest turns first, as many as fill the screen, then the rest of the page
            await until(pilot, lambda: len(app.session.transcript.turn_views()) == 40)
            assert app.session.transcript.turn_views()[-1].record.turn_id == "h299"
            app.session.transcript.scroll_home(animate=False, immediate=True)
            await until(pilot, lambda: len(routes(link, "transcript")) > 1)
            assert routes(link, "transcript")[1]["before"] == "h260"
            await until(pilot, lambda: app.session.transcript.turn_views()[0].record.turn_id == "h220")

    async def test_up_recalls_earlier_prompts(self, until: Until) -> None:
        link = WorkerLink(history=history(2))
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            await pilot.press("up")
            assert app.session.prompt.text == "print(1)"
            await pilot.press("up")
            assert app.session.prompt.text == "print(0)"
            await pilot.press("down", "down")
            assert app.session.prompt.text == ""

    async def test_ctrl_j_starts_a_new_line_instead_of_sending(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            await pilot.press("a", "ctrl+j", "b")
            assert app.session.prompt.text == "a\nb"
            assert not routes(link, "turn")


class TestQueue:
    async def test_enter_while_busy_queues_and_unqueue_takes_it_back(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            link.start_turn("slow()")
            await until(pilot, lambda: app.session.busy)
            await pilot.press(*"next()", "enter")
            await until(pilot, lambda: app.session.queue)
            assert routes(link, "turn")[0]["delivery"] == "auto"  # the worker queued it
            assert "next()" in text_of(app, "#queue-row")
            assert app.session.status.status.queued == 1
            await pilot.press(*"/unqueue", "enter")
            await until(pilot, lambda: not app.session.queue)
            assert routes(link, "unqueue")
            assert app.session.prompt.text == "next()"

    async def test_queued_prompt_runs_after_the_turn(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            link.start_turn("slow()")
            await until(pilot, lambda: app.session.busy)
            await pilot.press(*"next()", "enter")
            await until(pilot, lambda: app.session.queue)
            await link.end_turn()
            await until(pilot, lambda: app.session.turn is not None and app.session.turn.prompt == "next()")
            assert not app.session.query_one("#queue-row").display


class TestQuestions:
    async def test_a_number_picks_an_option_and_enter_answers_with_it(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            link.start_turn("ask('color?')")
            qid = await link.ask("Which color?", ["red", "green", "blue"])
            await asked(app, pilot, until)
            await until(pilot, lambda: not app.session.prompt_box.display)
            await pilot.press("2")  # picked, not sent: the hint says Enter answers
            await pilot.pause()
            assert not routes(link, "answer")
            assert "Enter answers" in str(app.session.query_one("#question-hint", Static).render())
            await pilot.press("enter")
            await until(pilot, lambda: routes(link, "answer"))
            assert routes(link, "answer")[0] == {
                "question_id": qid,
                "selected": ["green"],
                "freeform": None,
                "client_id": link.client_id,
            }
            await until(pilot, lambda: not app.session.query(QuestionPanel))
            assert app.session.prompt_box.display

    async def test_multi_select_toggles_then_enter_answers(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            link.start_turn("ask('which?')")
            await link.ask("Which ones?", ["a", "b", "c"], multiple=True)
            await asked(app, pilot, until)
            await pilot.press("1", "3", "enter")
            await until(pilot, lambda: routes(link, "answer"))
            assert routes(link, "answer")[0]["selected"] == ["a", "c"]

    async def test_keys_arriving_together_act_in_order_on_the_option_under_the_cursor(
        self, until: Until
    ) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            link.start_turn("ask('which?')")
            await link.ask("Which ones?", ["a", "b", "c"], multiple=True, freeform=False)
            await asked(app, pilot, until)
            panel = app.session.query_one(QuestionPanel)
            # One read of the terminal (tmux, SSH batch them): both keys are queued before either acts.
            app.post_message(events.Key("down", None))
            app.post_message(events.Key("space", " "))
            await until(pilot, lambda: panel.picked)
            await pilot.pause()
            assert panel.picked == {1}, "the option the cursor moved to (b), not the one it left"
            await pilot.press("enter")
            await until(pilot, lambda: routes(link, "answer"))
            assert routes(link, "answer")[0]["selected"] == ["b"]

    async def test_freeform_answer(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            link.start_turn("ask('name?')")
            await link.ask("Your name?")
            await asked(app, pilot, until)
            await pilot.press(*"Ada", "enter")
            await until(pilot, lambda: routes(link, "answer"))
            assert routes(link, "answer")[0]["freeform"] == "Ada"

    async def test_a_question_without_options_takes_the_typing_at_once(self, until: Until) -> None:
        link = WorkerLink(history=history(2))
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            link.start_turn("ask('Still there?')")
            await link.ask("Still there?")
            await asked(app, pilot, until)
            await until(pilot, lambda: isinstance(app.focused, Input))
            await pilot.press("tab")  # stays in the question
            assert isinstance(app.focused, Input)
            await pilot.press(*"yes", "enter")
            await until(pilot, lambda: routes(link, "answer"))
            assert routes(link, "answer")[0]["freeform"] == "yes"

    async def test_tab_goes_between_options_and_freeform_line(self, until: Until) -> None:
        link = WorkerLink(history=history(2))
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            link.start_turn("ask('color?')")
            await link.ask("Which color?", ["red", "green"])
            await asked(app, pilot, until)
            panel = app.session.query_one(QuestionPanel)
            await until(pilot, lambda: app.focused is panel.query_one("#choices"))
            await pilot.press("tab")
            assert app.focused is panel.query_one("#freeform")
            await pilot.press("tab")
            assert app.focused is panel.query_one("#choices")
            await pilot.press("shift+tab")
            assert app.focused is panel.query_one("#freeform")

    async def test_esc_dismisses_the_question_and_does_not_interrupt(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            link.start_turn("ask('x?')")
            await link.ask("Go on?", ["yes", "no"])
            await asked(app, pilot, until)
            await pilot.press("escape")
            await until(pilot, lambda: routes(link, "dismiss"))
            assert not routes(link, "interrupt")
            assert app.session.busy

    async def test_a_question_resolved_elsewhere_disappears_saying_who(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            link.start_turn("ask('x?')")
            qid = await link.ask("Go on?", ["yes", "no"])
            await asked(app, pilot, until)
            link.emit(
                QuestionResolved(
                    question_id=qid,
                    how="answered",
                    selected=["no"],
                    client_id="tui:other:2",
                    by=By(name="bob"),
                )
            )
            await until(pilot, lambda: not app.session.query(QuestionPanel))
            assert app.session.turn is not None
            assert app.session.turn.answered == ["answered by bob: no"]


class TestKeys:
    async def test_esc_interrupts_a_running_turn(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            link.start_turn("slow()")
            await until(pilot, lambda: app.session.busy)
            await pilot.press("escape")
            await until(pilot, lambda: not app.session.busy)
            assert routes(link, "interrupt")
            assert app.session.transcript.turn_views()[-1].record.outcome == "interrupted"

    async def test_ctrl_c_interrupts_a_running_turn(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            link.start_turn("slow()")
            await until(pilot, lambda: app.session.busy)
            await pilot.press("ctrl+c")
            await until(pilot, lambda: routes(link, "interrupt"))
        assert app.return_code is None or app.return_code == 0

    async def test_ctrl_c_twice_on_an_idle_prompt_detaches(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link, clock=lambda: 1000.0)  # the two presses are close however busy the machine
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            await pilot.press("ctrl+c")
            assert app.is_running
            await pilot.press("ctrl+c")
            await until(pilot, lambda: app.return_code is not None)
        assert app.return_code == 0
        assert not routes(link, "stop")

    async def test_ctrl_d_detaches_over_the_prompt_s_own_binding(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            await pilot.press("a", "left", "ctrl+d")
            await until(pilot, lambda: app.return_code is not None)
        assert app.return_code == 0

    async def test_the_footer_names_what_esc_does_now_and_f1_is_the_help(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)

        def footer() -> dict[str, str]:
            return {k: b.binding.description for k, b in app.active_bindings.items() if b.binding.show}

        async with app.run_test() as pilot:
            await started(app, pilot, until)
            assert "escape" not in footer(), "idle: Esc has nothing to do"
            assert footer()["f1"] == "Help"
            await pilot.press("f1")
            await until(
                pilot, lambda: any("F1" in i.line and "Keys:" in i.line for i in app.session.transcript.items)
            )
            link.start_turn("import time")
            await until(pilot, lambda: footer().get("escape") == "Interrupt")
            await link.ask("Go on?", ["yes", "no"])
            await until(pilot, lambda: footer().get("escape") == "Dismiss")

    async def test_attached_mid_turn_enter_queues_and_esc_interrupts(self, until: Until) -> None:
        """Attaching while a turn runs says at once what Enter and Esc do then, as when the turn
        starts while attached (before, the prompt said "Enter sends" and Esc was not offered
        until the next turn)."""
        link = WorkerLink()
        link.start_turn("import time")
        app = TuiApp(link)

        def footer() -> dict[str, str]:
            return {k: b.binding.description for k, b in app.active_bindings.items() if b.binding.show}

        async with app.run_test() as pilot:
            await started(app, pilot, until)
            await until(pilot, lambda: footer().get("escape") == "Interrupt")
            assert app.session.prompt.placeholder == "Enter queues behind the running turn"

    async def test_help_at_80_columns_wraps_each_line_under_its_own_text(self, until: Until) -> None:
        """A help line too long for 80 columns goes on under its description, not under the keys."""
        app = TuiApp(WorkerLink())
        async with app.run_test(size=(80, 24)) as pilot:
            await started(app, pilot, until)
            await pilot.press("f1")
            await until(pilot, lambda: notes(app))
            note = notes(app)[-1]
            drawn = [strip.text.rstrip() for strip in note.render_lines(note.region.reset_offset)]
            esc = next(i for i, line in enumerate(drawn) if line.lstrip().startswith("Esc "))
            column = drawn[esc].index("leave the selection")
            after = drawn[esc + 1]
            assert after[:column].strip() == "" and after[column : column + 1].strip(), drawn

    async def test_the_keys_panel_lists_only_this_apps_keys_and_esc_closes_it(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            app.action_show_help_panel()
            await until(pilot, lambda: app.screen.query("HelpPanel"))
            listed = [b.binding for b in app.screen.active_bindings.values() if not b.binding.system]
            described = {b.description for b in listed}
            assert "Newline" in described and "Detach" in described
            assert not described & {"Delete line", "Move cursor left by word", "Select all"}, described
            assert len(listed) < 20, [b.description for b in listed]
            await pilot.press("escape")
            await until(pilot, lambda: not app.screen.query("HelpPanel"))
            assert not routes(link, "interrupt")

    async def test_the_empty_prompt_has_a_mark_and_says_how_to_send(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            assert str(app.session.query_one("#prompt-mark").render()) == "\u276f"
            assert "Enter sends" in app.session.prompt.placeholder
            assert "Ctrl+J new line" in app.session.prompt.placeholder


class TestCommands:
    async def test_completions_show_brackets_as_typed(self, until: Until) -> None:
        from textual.widgets import OptionList

        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            await pilot.press(*"/qu")
            completions = app.session.prompt_box.query_one(OptionList)
            await until(pilot, lambda: completions.option_count)
            shown = str(completions.render_line(0).text)
            assert "/queue [PROMPT]" in shown, shown

    async def test_slash_completes_and_tab_takes_it(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            await pilot.press("/", "d", "e")
            await until(pilot, lambda: app.session.prompt_box.completing)
            await pilot.press("tab")
            assert app.session.prompt.text == "/detach"

    async def test_tab_typed_fast_completes_and_stays_in_the_prompt(self, until: Until) -> None:
        link = WorkerLink(history=history(2))
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            app.session.transcript.turn_views()[0]  # a focusable block Tab could wrongly go to
            await pilot.press("/", "h", "e", "tab")  # no pause: completions not shown yet
            assert app.session.prompt.text == "/help"
            assert app.focused is app.session.prompt
            await pilot.press("shift+tab")
            assert app.focused is app.session.prompt

    async def test_enter_typed_fast_sends_the_text_not_a_completion_of_an_earlier_one(
        self, until: Until
    ) -> None:
        """Keys typed fast (a paste, tmux send-keys) arrive before the completions follow them:
        Enter after "/queue print(1)" sends it, not the "/queue " offered for "/qu"."""
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            await pilot.press(*"/qu")
            await until(pilot, lambda: app.session.prompt_box.completing)
            # As a terminal delivers a paste: every key queued before the prompt handles one.
            prompt = app.session.prompt
            for char in "eue print(1)":
                prompt.post_message(events.Key(char, char))
            prompt.post_message(events.Key("enter", "\r"))
            await until(pilot, lambda: any(r.route == "turn" for r in link.requests))
            assert app.session.prompt.text == ""

    async def test_at_path_completes_files_for_a_local_session(self, until: Until, tmp_path: Path) -> None:
        (tmp_path / "notes.md").write_text("x")
        link = WorkerLink(paths_complete=True, agent="model", prompt_syntax="text")
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            app.session.prompt_box.root = tmp_path
            await pilot.press("@", "n")
            await until(pilot, lambda: app.session.prompt_box.completing)
            await pilot.press("tab")
            assert app.session.prompt.text == "@notes.md "

    async def test_at_path_in_a_python_session_puts_the_file_in_as_a_string(
        self, until: Until, tmp_path: Path
    ) -> None:
        """`@notes.md` is no Python: the program would fail; `'notes.md'` is what it means."""
        (tmp_path / "notes.md").write_text("x")
        (tmp_path / "src").mkdir()
        link = WorkerLink(paths_complete=True)
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            app.session.prompt_box.root = tmp_path
            await pilot.press(*"text = @n")
            await until(pilot, lambda: app.session.prompt_box.completing)
            await pilot.press("tab")
            assert app.session.prompt.text == "text = 'notes.md' "
            app.session.prompt.clear()
            await pilot.press("@", "s")
            await until(pilot, lambda: app.session.prompt_box.completing)
            await pilot.press("tab")
            assert app.session.prompt.text == "@src/"  # a folder goes on completing

    async def test_exit_stops_the_worker_and_exit_delete_deletes(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            await pilot.press(*"/exit --delete", "enter")
            await until(pilot, lambda: app.return_code is not None)
        assert [r.route for r in link.requests][-2:] == ["stop", "delete"]
        assert app.return_code == 0

    async def test_exit_and_enter_stops_without_deleting(self, until: Until) -> None:
        """``/exit --delete`` is offered below ``/exit``; Enter runs what was typed, never it."""
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            await pilot.press(*"/exit")
            await until(pilot, lambda: app.session.prompt_box.completing)
            await pilot.press("enter")
            await until(pilot, lambda: app.return_code is not None)
        routes = [r.route for r in link.requests]
        assert "stop" in routes and "delete" not in routes

    async def test_model_and_stats(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            await pilot.press(*"/model big", "enter")
            await until(pilot, lambda: app.session.status.status.model == "big")
            await pilot.press(*"/stats", "enter")
            await until(pilot, lambda: any("stats:" in i.line for i in app.session.transcript.items))

    async def test_model_alone_says_the_model_and_lists_the_choices(self, until: Until) -> None:
        link = WorkerLink(models=["fast", "big"])
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            await pilot.press(*"/mo")
            await until(pilot, lambda: app.session.prompt_box.completing)
            words = app.session.prompt_box._words
            assert "/model " in words and "/mode " not in words, "a python session has no modes"
            await pilot.press(*"del", "enter")
            await until(pilot, lambda: any(n.title == "Which model?" for n in app._notifications))
            said = next(str(n.message) for n in app._notifications if n.title == "Which model?")
            assert said.endswith("/model NAME switches: fast, big (Tab completes)."), said
            await pilot.press(*"/mode", "enter")
            await until(pilot, lambda: any("has no modes" in str(n.message) for n in app._notifications))


class TestLink:
    async def test_a_prompt_typed_while_the_link_is_down_is_sent_once_when_back(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            link.no_worker_timeout = 600.0  # back when the test says, however busy the machine
            link.located = Located("starting")
            link.drop("the worker restarted")
            await until(pilot, lambda: isinstance(app.session.link_state, Reconnecting))
            await pilot.press(*"print(2)", "enter")
            await until(pilot, lambda: app.session.query_one("#outbox-row").display)
            assert "print(2)" in text_of(app, "#outbox-row")
            link.located = Located("live")
            await until(pilot, lambda: app.session.turn is not None)
            sent = routes(link, "turn")
            assert len({s["request_id"] for s in sent}) == 1
            assert sum(1 for t in link.journal if t.type == "turn_started") == 1
            await until(pilot, lambda: not app.session.query_one("#outbox-row").display)

    async def test_ctrl_r_retries_now_and_the_working_clock_stops_while_the_link_is_down(
        self, until: Until
    ) -> None:
        link = WorkerLink()
        app = TuiApp(link)

        def footer() -> dict[str, str]:
            return {k: b.binding.description for k, b in app.active_bindings.items() if b.binding.show}

        async with app.run_test() as pilot:
            await started(app, pilot, until)
            assert "ctrl+r" not in footer()
            link.start_turn("slow()")
            await until(pilot, lambda: app.session.busy)
            link.backoff = type(link.backoff)(first=600.0, factor=1.0, jitter=0.0, cap=600.0)
            link.no_worker_timeout = 600.0  # back when the test says, however busy the machine
            link.located = Located("starting")
            link.drop("the worker stopped answering")
            await until(pilot, lambda: isinstance(app.session.link_state, Reconnecting))
            assert footer().get("ctrl+r") == "Retry now"
            row = app.session.status.session_row()
            assert "working (unknown while the link is down" in row and "last seen" in row
            link.located = Located("live")
            await pilot.press("ctrl+r")  # without it, the next try is 10 minutes away
            await until(pilot, lambda: isinstance(app.session.link_state, Live))
            assert "ctrl+r" not in footer()

    async def test_worker_gone_ends_the_turn_and_exits_4(self, until: Until) -> None:
        link = WorkerLink()
        app = TuiApp(link, gone_exit_after=0.05)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            link.start_turn("slow()")
            await until(pilot, lambda: app.session.busy)
            link.located = Located("gone", "the session was deleted")
            link.drop()
            await until(pilot, lambda: isinstance(app.session.link_state, Gone) and not app.session.busy)
            assert "gone: the session was deleted" in app.session.status.link_row()
            await until(pilot, lambda: app.return_code is not None)
        assert app.return_code == 4

    async def test_a_follower_failing_unexpectedly_says_so_and_keys_still_work(self, until: Until) -> None:
        link = FailingLink()
        app = TuiApp(link)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            link.failure = RuntimeError("the stream broke")
            link.attend(("ana", "viewer"))  # any event: the stream raises instead of delivering it
            await until(pilot, lambda: any("session failed" in i.line for i in app.session.transcript.items))
            # The link's state has one home: the screen shows the attachment's.
            assert isinstance(app.session.link_state, Gone)
            assert app.session.attachment.link_state == app.session.link_state
            assert app.session.attachment.ended
            assert app.session.status.status == app.session.attachment.snapshot()  # drawn from it
            line = app.session.transcript.items[-1].line
            assert "the connection to the session failed: RuntimeError: the stream broke" in line
            assert "tui attach 3f2a9c0e" in line
            assert "gone: the connection to the session failed" in app.session.status.link_row()
            await pilot.press(*"print(1)", "enter")  # the screen is not frozen
            await until(pilot, lambda: routes(link, "turn"))
            assert routes(link, "turn")[0]["prompt"] == "print(1)"
        assert app.return_code is None


class FailingLink(WorkerLink):
    """A session whose event stream raises `failure` (what no follower expects) once it is set."""

    failure: Exception | None = None

    async def open_stream(self, cursor: int) -> AsyncIterator[Event | Live]:
        async for item in super().open_stream(cursor):
            if self.failure is not None:
                raise self.failure
            yield item


class TestAway:
    async def test_reattach_says_what_happened_since_this_client_last_saw_it(
        self, until: Until, tmp_path: Path
    ) -> None:
        link = WorkerLink(history=history(3))
        app = TuiApp(link, state_dir=tmp_path)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            await pilot.press("ctrl+d")
        link.start_turn("later()")
        await link.end_turn("failed", error="boom")
        link.start_turn("ask()")
        await link.ask("Ready?", ["yes"])
        again = TuiApp(link, state_dir=tmp_path)
        async with again.run_test() as pilot:
            await started(again, pilot, until)
            away = text_of(again, "#away")
            assert "1 turn ended (1 failed)" in away
            assert "a question is waiting" in away
            assert again.session.query_one("#away").display
            await pilot.press("1", "enter")  # answer the waiting question
            await until(pilot, lambda: routes(link, "answer"))
            assert not again.session.query_one("#away").display

    async def test_turns_shown_in_another_window_are_not_news_and_new_turns_clear_the_line(
        self, until: Until, tmp_path: Path
    ) -> None:
        link = WorkerLink(history=history(3))
        first = TuiApp(link, state_dir=tmp_path)
        async with first.run_test() as pilot:
            await started(first, pilot, until)
            link.start_turn("seen()")
            await link.end_turn("completed")
            # every event applied (the turn is not "current" before it is even started, either)
            await until(pilot, lambda: first.session.cursor >= len(link.journal))
            await until(pilot, lambda: first.session.session_state.current is None)
            second = TuiApp(link, state_dir=tmp_path)  # another window of the same user
            async with second.run_test() as two:
                await started(second, two, until)
                assert not second.session.query_one("#away").display

    async def test_the_line_says_how_long_and_goes_when_new_turns_arrive(
        self, until: Until, tmp_path: Path
    ) -> None:
        link = WorkerLink(history=history(3))
        SeenStore(tmp_path).put(link.where, link.session_id, Seen(cursor=3, at=time.time() - 7500))
        app = TuiApp(link, state_dir=tmp_path)
        async with app.run_test() as pilot:
            await started(app, pilot, until)
            assert text_of(app, "#away").startswith("While you were away (2 h 5 min): 2 turns ended")
            link.start_turn("more()")
            await until(pilot, lambda: not app.session.query_one("#away").display)


async def test_a_theme_chosen_is_kept_in_config_toml_with_the_users_comments(
    until: Until, tmp_path: Path
) -> None:
    (tmp_path / "config.toml").write_text(
        '# mine\ndefault_agent = "python"  # keep\n\n[sandbox]\nhidden = []\n'
    )

    def keep(theme: str) -> Path:
        return save_setting("theme", theme, tmp_path)

    app = TuiApp(WorkerLink(), theme=load_config(tmp_path).theme, keep_theme=keep)
    async with app.run_test() as pilot:
        await started(app, pilot, until)
        app.theme = "nord"  # as the palette's "Change theme" does
        await until(pilot, lambda: 'theme = "nord"' in (tmp_path / "config.toml").read_text())
    text = (tmp_path / "config.toml").read_text()
    assert text.startswith('# mine\ndefault_agent = "python"  # keep\n') and "[sandbox]\nhidden = []" in text
    again = TuiApp(WorkerLink(), theme=load_config(tmp_path).theme, keep_theme=keep)
    async with again.run_test() as pilot:
        await started(again, pilot, until)
        assert again.theme == "nord"


async def test_a_resumed_python_session_says_its_variables_are_gone(until: Until) -> None:
    link = WorkerLink()
    link.start_turn("x = 1")
    await link.end_turn()
    link.resumed_at_turn = 1
    link.emit(WorkerLeaving(reason="stopped by tui stop"))
    link.emit(WorkerStarted(epoch=2, pid=4343, version="0.1.0", agent="python"))
    app = TuiApp(link)
    async with app.run_test() as pilot:
        await started(app, pilot, until)
        await until(pilot, lambda: any("variables" in i.line for i in app.session.transcript.items if i.line))
        said = [i.line for i in app.session.transcript.items if i.line]
        assert said[:3] == [
            "the worker is leaving: stopped by tui stop",
            "a new worker runs the session: tui 0.1.0",
            "the Python variables of the turns above are gone; run what you need again",
        ]
