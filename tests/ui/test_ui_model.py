"""What a model session shows (WorkerLink): reasoning folded, tokens and retries in the status row,
``/model`` completing profile names."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tui.protocol import Status, TextChunk, Thinking
from tui.testing.double import WorkerLink
from tui.ui import TuiApp
from tui.ui.widgets.live import ThinkingBlock
from tui.ui.widgets.prompt import PromptArea

Until = Callable[..., Awaitable[None]]


async def _started(app: TuiApp, pilot, until: Until) -> None:  # type: ignore[no-untyped-def]
    await until(pilot, app.session.attached.is_set)


async def test_reasoning_is_folded_and_the_reply_follows_it(until: Until) -> None:
    link = WorkerLink(agent="model", reply_format="markdown", model="local")
    app = TuiApp(link)
    async with app.run_test(size=(100, 30)) as pilot:
        await _started(app, pilot, until)
        turn = link.start_turn("why?")
        link.emit(Thinking(turn_id=turn, text="the user asks "))
        link.emit(Thinking(turn_id=turn, text="why"))
        link.emit(TextChunk(turn_id=turn, text="Because."))
        await until(pilot, lambda: app.session.transcript.live and app.session.transcript.live.thinking)
        live = app.session.transcript.live
        assert live is not None
        block: ThinkingBlock = live.thinking[0]
        await until(pilot, lambda: block.title == "thinking (4 words)")
        assert block.collapsed and block.text == "the user asks why"


async def test_the_status_row_shows_tokens_context_and_a_retry(until: Until) -> None:
    link = WorkerLink(agent="model", reply_format="markdown", model="local")
    app = TuiApp(link)
    async with app.run_test(size=(140, 30)) as pilot:
        await _started(app, pilot, until)
        link.start_turn("hi")
        link.emit(
            Status(
                state="working",
                model="local",
                context_used=4000,
                context_limit=32768,
                tokens_in=1200,
                tokens_out=300,
                activity="retrying in 3 s (rate-limited, HTTP 429)",
            )
        )
        row = app.session.status.session_row
        await until(pilot, lambda: "retrying in 3 s" in row())
        assert "model local" in row() and "context 4.0k/32.8k" in row()
        assert "tokens 1.2k in / 300 out" in row()


async def test_tab_completes_model_profiles_after_slash_model(until: Until) -> None:
    link = WorkerLink(agent="model", reply_format="markdown", model="local", models=["local", "sonnet"])
    app = TuiApp(link)
    async with app.run_test(size=(100, 30)) as pilot:
        await _started(app, pilot, until)
        prompt = app.session.query_one(PromptArea)
        prompt.focus()
        await pilot.press(*"/model so")
        await pilot.press("tab")  # completes the only profile that starts so
        await until(pilot, lambda: prompt.text == "/model sonnet")
