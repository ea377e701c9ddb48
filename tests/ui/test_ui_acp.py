"""The app on a real worker running the test ACP agent: the status row names the agent, its
model, mode, context and cost; a tool call the agent renames is renamed live."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from acp_agent import agent_pids, configure
from helpers import stop_workers, wait_until

from tui.access.local import LocalAccess
from tui.store import StatePaths
from tui.ui import TuiApp
from tui.ui.widgets.prompt import PromptArea

Until = Callable[..., Awaitable[None]]

pytestmark = pytest.mark.slow


@pytest.fixture
async def tester(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[LocalAccess, str]]:
    """A session of the test agent (``[agents.tester]``) with its worker live."""
    config = tmp_path / "config"
    config.mkdir()
    configure(config, tmp_path / "agent-state")
    monkeypatch.setenv("TUI_CONFIG_DIR", str(config))
    work = tmp_path / "work"
    work.mkdir()
    access = LocalAccess(StatePaths(state_dir))
    sid = await access.create(working_directory=str(work), agent="tester")
    try:
        yield access, sid
    finally:
        stop_workers(state_dir)
        for pid in agent_pids(sid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not agent_pids(sid), "the agent to end")


async def test_the_status_row_names_the_agent_its_model_mode_context_and_cost(
    tester: tuple[LocalAccess, str], state_dir: Path, until: Until
) -> None:
    access, sid = tester
    app = TuiApp(await access.link(sid, client_id="tui:test:1"), state_dir=state_dir)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, app.session.attached.is_set, 30)
        row = app.session.status.session_row
        await until(pilot, lambda: "model Fast One" in row(), 30)
        assert "tester" in row() and "mode Ask" in row() and "model default" not in row()
        app.session.submit("usage rename slow")
        await until(pilot, lambda: "cost $0.42" in row(), 30)
        assert "context 12.3k/200.0k (6%)" in row()
        # the call first said "Preparing file…"; the live block shows what the agent said last
        await until(
            pilot,
            lambda: any(
                "Write out.txt" in str(b.title)
                for b in (app.session.transcript.live.tools if app.session.transcript.live else [])
            ),
            30,
        )
        assert not any(
            "Preparing" in str(b.title)
            for b in (app.session.transcript.live.tools if app.session.transcript.live else [])
        )
        await pilot.press("escape")  # interrupt the slow rest of the turn
        await until(pilot, lambda: app.session.transcript.turn_views() and not app.session.busy, 30)
        tool = app.session.transcript.turn_views()[-1].record.tools[0]
        assert tool.title == "Write out.txt" and tool.args["content"] == "written by the agent\n"


async def test_slash_mode_and_slash_model_switch_the_agents_own_and_a_new_worker_keeps_them(
    tester: tuple[LocalAccess, str], state_dir: Path, until: Until
) -> None:
    access, sid = tester
    app = TuiApp(await access.link(sid, client_id="tui:test:1"), state_dir=state_dir)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, app.session.attached.is_set, 30)
        row = app.session.status.session_row
        await until(pilot, lambda: "mode Ask" in row(), 30)
        prompt = app.session.query_one(PromptArea)
        prompt.focus()
        await pilot.press(*"/mode c")
        await pilot.press("tab")  # the agent's one mode that starts with c
        await until(pilot, lambda: prompt.text == "/mode code")
        await pilot.press("enter")
        await until(pilot, lambda: "mode Code" in row(), 30)
        await pilot.press(*"/model sm")
        await pilot.press("tab")
        await until(pilot, lambda: prompt.text == "/model smart")
        await pilot.press("enter")
        await until(pilot, lambda: "model Smart One" in row(), 30)
        app.session.submit("which")  # the agent says what it was switched to
        await until(pilot, lambda: app.session.transcript.turn_views() and not app.session.busy, 30)
        assert "mode code, model smart" in app.session.transcript.turn_views()[-1].record.reply
        lines = [item.line for item in app.session.transcript.items if item.line]
        assert "mode: code" in lines and "model: Smart One" in lines
    assert await access.stop(sid)
    wait_until(lambda: not agent_pids(sid), "the agent to end with its worker")
    # a new worker starts a new agent process (which loads its session in mode ask, model fast)
    again = TuiApp(await access.link(sid, client_id="tui:test:2"), state_dir=state_dir)
    async with again.run_test(size=(160, 40)) as pilot:
        await until(pilot, again.session.attached.is_set, 30)
        row = again.session.status.session_row
        await until(pilot, lambda: "mode Code" in row() and "model Smart One" in row(), 30)
        again.session.submit("which")
        await until(
            pilot, lambda: len(again.session.transcript.turn_views()) == 2 and not again.session.busy, 30
        )
        assert "mode code, model smart" in again.session.transcript.turn_views()[-1].record.reply


async def test_enter_sends_a_whole_model_or_command_even_while_longer_ones_complete(
    tester: tuple[LocalAccess, str], state_dir: Path, until: Until
) -> None:
    """``/model smart`` switches to ``smart`` though ``smart[1m]`` is offered below it, and
    ``/mode`` runs ``/mode`` though ``/model`` starts with it: Enter takes a completion only for
    what is not yet whole."""
    access, sid = tester
    app = TuiApp(await access.link(sid, client_id="tui:test:1"), state_dir=state_dir)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, app.session.attached.is_set, 30)
        row = app.session.status.session_row
        await until(pilot, lambda: "model Fast One" in row(), 30)
        prompt = app.session.query_one(PromptArea)
        prompt.focus()
        await pilot.press(*"/model smart")
        await until(pilot, lambda: app.session.prompt_box.completing)  # smart[1m] is offered
        await pilot.press("enter")
        await until(pilot, lambda: "model Smart One" in row(), 30)
        assert prompt.text == ""
        await pilot.press(*"/mode", "enter")
        await until(pilot, lambda: any(n.title == "Which mode?" for n in app._notifications))
        assert not prompt.text.startswith("/model")
