"""Pictures of what a coding agent's turn shows (pytest-textual-snapshot, WorkerLink): a titled
tool call with its diff, the plan as a checklist, a permission question; and its slash commands
completing in the prompt.

Update one with ``.venv/bin/pytest tests/ui/test_acp_snapshots.py -k NAME --snapshot-update``.
"""

from __future__ import annotations

from typing import Any

from helpers import app_until
from test_ui_snapshots import SnapCompare, flushed, make_app, settle
from textual.pilot import Pilot

from tui.protocol import (
    AgentCommand,
    AgentInfo,
    Diff,
    Plan,
    PlanEntry,
    TextChunk,
    ToolEnded,
    ToolOutput,
    ToolStarted,
)
from tui.testing.double import WorkerLink
from tui.ui import TuiApp

OLD = "def greet(name):\n    print('hi', name)\n\n\ndef main():\n    greet('world')\n"
NEW = "def greet(name: str) -> None:\n    print(f'hello {name}')\n\n\ndef main():\n    greet('world')\n"


def agent_link() -> WorkerLink:
    return WorkerLink(agent="claude", reply_format="markdown")


def edit_turn(link: WorkerLink, *, steps_done: int) -> str:
    """A turn in which the agent plans, edits greet.py and ticks its plan off."""
    turn = link.start_turn("type the greeting")
    steps = ["Read greet.py", "Add type hints", "Run the tests"]
    entries = [
        PlanEntry(
            content=step,
            status="completed" if i < steps_done else "in_progress" if i == steps_done else "pending",
        )
        for i, step in enumerate(steps)
    ]
    link.emit(
        Plan(
            turn_id=turn,
            entries=entries[:1] + [e.model_copy(update={"status": "pending"}) for e in entries[1:]],
        )
    )
    link.emit(TextChunk(turn_id=turn, text="I'll add type hints to `greet`.\n\n"))
    link.emit(
        ToolStarted(
            turn_id=turn,
            call_id="c1",
            name="edit",
            args={"path": "greet.py"},
            title="Edit greet.py",
            kind="edit",
            locations=["greet.py"],
        )
    )
    link.emit(ToolOutput(turn_id=turn, call_id="c1", diff=Diff(path="greet.py", old=OLD, new=NEW)))
    link.emit(ToolEnded(turn_id=turn, call_id="c1", status="completed"))
    link.emit(Plan(turn_id=turn, entries=entries))  # the same plan, updated in place
    return turn


class TestCodingAgent:
    def test_running_turn_with_a_diff_and_a_plan(self, snap_compare: SnapCompare) -> None:
        """A running turn: the plan as a checklist (one done, one doing, one to do), then the
        edit titled "Edit greet.py · edit · completed" open on its coloured unified diff."""
        link = agent_link()

        async def script(link: WorkerLink, pilot: Pilot[Any]) -> None:
            edit_turn(link, steps_done=1)

        assert snap_compare(make_app(link), terminal_size=(100, 36), run_before=settle(script, link))

    def test_ended_turn_keeps_its_plan_and_diff(self, snap_compare: SnapCompare) -> None:
        """The same turn once ended and opened (a click, or Enter when selected): the checklist
        all done, the tool line ``▾`` and its diff (a collapsed ``▸`` hides the diff)."""
        link = agent_link()

        async def script(link: WorkerLink, pilot: Pilot[Any]) -> None:
            edit_turn(link, steps_done=3)
            await link.reply("Done: `greet` is typed.\n")
            await flushed(pilot)
            pilot.app.session.transcript.turn_views()[0].expanded = True
            await flushed(pilot)

        assert snap_compare(make_app(link), terminal_size=(100, 36), run_before=settle(script, link))

    def test_permission_question(self, snap_compare: SnapCompare) -> None:
        """A permission request as a question: the agent's options, labels made unique."""
        link = agent_link()

        async def script(link: WorkerLink, pilot: Pilot[Any]) -> None:
            turn = link.start_turn("run the tests")
            link.emit(
                ToolStarted(turn_id=turn, call_id="c1", name="execute", title="Run make test", kind="execute")
            )
            await link.ask("Allow Run make test?", ["Allow", "Allow (2)", "Reject"], freeform=False)

        assert snap_compare(make_app(link), terminal_size=(100, 30), run_before=settle(script, link))


async def test_the_agents_commands_complete_in_the_prompt() -> None:
    link = agent_link()
    link.emit(AgentInfo(commands=[AgentCommand(name="review", description="review the changes")]))
    app = make_app(link)
    async with app.run_test(size=(100, 30)) as pilot:
        assert isinstance(pilot.app, TuiApp)
        session = pilot.app.session
        await app_until(pilot, session.attached.is_set, "the attach")
        await pilot.press("/", "r", "e", "v")  # type the start of the agent's command (/re: /resume too)
        box = session.prompt_box
        await app_until(pilot, lambda: box.completing, "the completions")
        assert "/review " in box._words
        await pilot.press("tab")  # take it
        await pilot.press(*"main.py", "enter")  # and send it: it goes to the agent, not to tui
        await app_until(pilot, lambda: any(r.route == "turn" for r in link.requests), "the prompt to be sent")
        sent = next(r for r in link.requests if r.route == "turn")
        assert sent.body["prompt"] == "/review main.py"


async def test_a_turn_attached_midway_keeps_the_calls_made_before_once_it_ends() -> None:
    link = agent_link()
    turn = edit_turn(link, steps_done=1)  # before the app attaches
    app = make_app(link)
    async with app.run_test(size=(100, 30)) as pilot:
        assert isinstance(pilot.app, TuiApp)
        session = pilot.app.session
        await app_until(pilot, session.attached.is_set, "the attach")
        await link.reply("Done.\n")
        await flushed(pilot)

        view = session.transcript.turn_views()[0]
        assert view.record.turn_id == turn
        assert [p.tool.title for p in view.parts if p.tool is not None] == ["Edit greet.py"]
