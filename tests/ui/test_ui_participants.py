"""A participant's TUI (WorkerLink): who is attached, and what a viewer or collaborator may not do."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from textual.widgets import Static

from tui.link.base import Located, Principal
from tui.testing.double import WorkerLink
from tui.ui import TuiApp
from tui.ui.widgets.question import QuestionPanel

Until = Callable[..., Awaitable[None]]

VIEWER = Principal(kind="viewer", name="ana")
COLLABORATOR = Principal(kind="collaborator", name="bo", turns_left=3)


def refusals(app: TuiApp) -> list[str]:
    return [str(n.message) for n in app._notifications if n.title == "Not permitted"]


def palette(app: TuiApp) -> list[str]:
    return [c.title for c in app.get_system_commands(app.session)]


async def started(app: TuiApp, pilot, until: Until) -> None:  # type: ignore[no-untyped-def]
    await until(pilot, app.session.attached.is_set)


async def test_the_status_row_lists_who_is_attached_now(until: Until) -> None:
    link = WorkerLink()
    app = TuiApp(link)
    async with app.run_test() as pilot:
        await started(app, pilot, until)
        assert "attached:" not in app.session.status.link_row()
        link.attend(("root", "owner"), ("ana", "viewer"))
        await until(pilot, lambda: "attached: root, ana (viewer)" in app.session.status.link_row())
        link.start_turn("print(1)")  # a state change keeps the list
        await until(pilot, lambda: app.session.busy)
        assert "attached: root, ana (viewer)" in app.session.status.link_row()
        link.attend(("root", "owner"))
        await until(pilot, lambda: "ana" not in app.session.status.link_row())
        assert "attached: root" in app.session.status.link_row()


async def test_the_transcript_names_who_was_attached_before_this_client(until: Until) -> None:
    link = WorkerLink()
    link.attend(("root", "owner"), ("bo", "collaborator"))
    app = TuiApp(link)
    async with app.run_test() as pilot:
        await started(app, pilot, until)
        assert "attached: root, bo (collaborator)" in app.session.status.link_row()


async def test_a_viewer_has_no_prompt_and_is_told_why(until: Until) -> None:
    link = WorkerLink(principal=VIEWER)
    app = TuiApp(link)
    async with app.run_test() as pilot:
        await started(app, pilot, until)
        await until(pilot, lambda: app.session.query_one("#viewing", Static).display)
        line = str(app.session.query_one("#viewing", Static).render())
        assert line == (
            "Viewing as ana: you can follow and read; "
            "sending, answering and interrupting need a collaborator's share."
        )
        assert not app.session.prompt_box.display
        assert "as ana (viewer)" in app.session.status.link_row()
        titles = palette(app)
        assert "Session: exit" not in titles
        assert "Session: archive" not in titles
        assert "Session: interrupt the running turn" not in titles
        assert "Session: stats" in titles


async def test_a_viewer_asking_to_interrupt_or_exit_gets_one_line_and_nothing_is_sent(until: Until) -> None:
    link = WorkerLink(principal=VIEWER)
    app = TuiApp(link)
    async with app.run_test() as pilot:
        await started(app, pilot, until)
        link.start_turn("while True: pass")
        await until(pilot, lambda: app.session.busy)
        shown = {k: b.binding.description for k, b in app.active_bindings.items() if b.binding.show}
        assert "escape" not in shown, "a viewer's footer does not offer to interrupt"
        await pilot.press("escape")
        await until(pilot, lambda: refusals(app))
        assert refusals(app) == ["Interrupting needs a collaborator's share; you are viewing as ana."]
        app.session.run_command("/exit")
        await until(pilot, lambda: len(refusals(app)) == 2)
        assert refusals(app)[1] == "/exit is for the session's owner; you are ana, a viewer here."
        app.session.submit("print(2)")
        await until(pilot, lambda: len(refusals(app)) == 3)
        assert not [r for r in link.requests if r.route in ("interrupt", "stop", "turn")]
        assert app.session.busy


async def test_a_viewer_reads_a_question_but_cannot_answer_it(until: Until) -> None:
    link = WorkerLink(principal=VIEWER)
    app = TuiApp(link)
    async with app.run_test() as pilot:
        await started(app, pilot, until)
        link.start_turn("ask()")
        await link.ask("Which one?", ["a", "b"])
        await until(pilot, lambda: app.session.query(QuestionPanel))
        panel = app.session.query_one(QuestionPanel)
        assert "only the owner and collaborators answer" in str(panel.query_one("#question-hint").render())
        assert not app.session.prompt_box.display
        await pilot.press("escape")
        await until(pilot, lambda: refusals(app))
        assert refusals(app)[0].startswith("Dismissing a question needs a collaborator's share")
        await until(pilot, lambda: app.focused is panel.query_one("#choices"))
        await pilot.press("enter")  # says so, instead of doing nothing
        await until(pilot, lambda: len(refusals(app)) == 2)
        assert refusals(app)[1].startswith("Answering a question needs a collaborator's share")
        assert not [r for r in link.requests if r.route in ("answer", "dismiss")]


async def test_a_collaborator_sends_and_sees_its_turns_left_but_may_not_exit(until: Until) -> None:
    link = WorkerLink(principal=COLLABORATOR)
    app = TuiApp(link)
    async with app.run_test() as pilot:
        await started(app, pilot, until)
        assert app.session.prompt_box.display
        assert "as bo (collaborator), 3 turns left" in app.session.status.link_row()
        link.principal = Principal(kind="collaborator", name="bo", turns_left=2)
        await pilot.press(*"print(1)", "enter")
        await until(pilot, lambda: [r for r in link.requests if r.route == "turn"])
        await until(pilot, lambda: "2 turns left" in app.session.status.link_row())
        app.session.run_command("/archive")
        await until(pilot, lambda: refusals(app))
        assert refusals(app) == ["/archive is for the session's owner; you are bo, a collaborator here."]
        assert "Session: interrupt the running turn" in palette(app)
        assert "Session: exit" not in palette(app)
        assert not [r for r in link.requests if r.route == "archive"]


async def test_a_revoked_share_says_so_not_that_the_worker_is_gone(until: Until) -> None:
    link = WorkerLink(principal=VIEWER)
    app = TuiApp(link, gone_exit_after=None)
    async with app.run_test() as pilot:
        await started(app, pilot, until)
        reason = "the share of session 3f2a9c0e for ana was revoked; ask its owner for a new one"
        link.located = Located("gone", reason, exit_code=6)
        link.drop()
        await until(pilot, lambda: [n for n in app._notifications if n.severity == "error"])
        titles = [n.title for n in app._notifications if n.severity == "error"]
        assert titles == ["The share was revoked"]


async def test_the_palette_offers_interrupt_only_while_a_turn_runs(until: Until) -> None:
    """Chosen on an idle session it did nothing, and said nothing."""
    link = WorkerLink()
    app = TuiApp(link)
    async with app.run_test() as pilot:
        await started(app, pilot, until)
        assert "Session: interrupt the running turn" not in palette(app)
        link.start_turn("slow()")
        await until(pilot, lambda: app.session.busy)
        assert "Session: interrupt the running turn" in palette(app)
