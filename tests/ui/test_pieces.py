"""How a turn's pieces read (`tui.ui.pieces`): the tool title, the stamp, program output."""

from __future__ import annotations

from typing import Any

from rich.style import Style
from rich.text import Text

from tui.protocol import By, Diff, ToolRecord, TurnRecord
from tui.protocol.page import tool_view
from tui.ui.pieces import outcome_text, prompt_text, stamp_text, tool_title, verbatim_text
from tui.ui.widgets.lines import RichBlock
from tui.ui.widgets.turn import TurnView


def style(name: str) -> Any:
    return Style()


def test_a_tool_title_keeps_whole_arguments_and_counts_the_rest() -> None:
    args = {
        "query": "Which checks should run before we deploy this to production today?",
        "paths": ["lint", "types", "tests"],
        "regex": False,
        "all": True,
    }
    title = tool_title("search", args, "completed")
    assert title.endswith("… +3 more) · completed"), title
    assert "regex=fa" not in title
    words = title.removeprefix("search(query='").split("…")[0].split()
    assert all(w in args["query"].split() for w in words)  # cut between words


def test_a_tool_title_leaves_out_arguments_left_out() -> None:
    title = tool_title("search", {"query": "Go on?", "paths": None, "regex": False}, "completed")
    assert title == "search(query='Go on?', regex=false) · completed"


def test_a_tool_title_shows_a_list_by_whole_items_and_code_by_its_first_line() -> None:
    assert 'paths=["alpha", "beta", …+3]' in tool_title(
        "search", {"query": "pick some", "paths": ["alpha", "beta", "gamma", "delta", "epsilon"]}, None
    )
    assert tool_title("run", {"code": "import os\n\nprint(os.getcwd())"}, "completed") == (
        "run: import os (+1 lines) · completed"
    )


def test_a_question_s_call_reads_as_the_question_and_its_options_in_words() -> None:
    """A program's ask() and a model's ask_user read alike, as the question box says them: no
    Python quotes around the question, no JSON around the options."""
    asked = tool_title("ask", {"question": "Which?", "options": ["a", "b"]}, None)
    assert asked == "ask: Which? · a / b · running"
    model = {"question": "Deploy it's build?", "options": ["yes", "no"], "multiple": False, "freeform": True}
    assert tool_title("ask_user", model, "completed") == "ask_user: Deploy it's build? · yes / no · completed"
    labelled = [{"label": "lint", "description": "ruff"}, {"label": "types"}]
    assert tool_title("ask", {"question": "Run?", "options": labelled, "multiple": True}, "completed") == (
        "ask: Run? · lint / types (several) · completed"
    )
    assert tool_title("ask", {"question": "Your name?"}, "completed") == "ask: Your name? · completed"
    many = tool_title("ask", {"question": "Pick", "options": [f"option number {n}" for n in range(9)]}, None)
    assert many.startswith("ask: Pick · option number 0 / option number 1") and "…+" in many


def test_an_ended_turn_says_its_number_time_and_duration() -> None:
    record = TurnRecord(
        turn_id="t",
        prompt="x",
        number=14,
        outcome="completed",
        started_at="2026-01-01T15:02:00+00:00",
        ended_at="2026-01-01T15:02:03.2+00:00",
    )
    assert stamp_text(record).startswith("#14 · ") and stamp_text(record).endswith(" · 3.2 s")
    line = outcome_text(record.model_copy(update={"outcome": "failed", "error": "boom"}), style)
    assert line is not None and line.plain.startswith("✗ failed: boom  · #14")
    assert outcome_text(TurnRecord(turn_id="t", prompt="x", outcome="completed"), style) is None


def test_a_traceback_is_coloured_only_on_its_own_lines() -> None:
    out = verbatim_text(
        "before\nTraceback (most recent call last):\n"
        '  File "<program 2>", line 1, in <module>\n    1 / 0\n    ~~^~~\n'
        "ZeroDivisionError: division by zero\nafter\n"
    )
    styled = {out.plain[s.start : s.end] for s in out.spans}
    assert {'"<program 2>"', "ZeroDivisionError", "    ~~^~~"} <= styled
    assert not any("before" in s or "after" in s for s in styled)


def test_a_python_prompt_is_coloured_and_user_text_is_never_markup() -> None:
    text = prompt_text("print('[bold]x[/bold]')", By(name="root"), style, python=True)
    assert "[bold]x[/bold]" in text.plain
    assert any(s.style != Style() for s in text.spans)


def _drawn(view: TurnView) -> str:
    """The words of an ended turn's blocks drawn from Rich renderables (titles, diffs, outcome)."""
    texts = [b._make(style) for b in view.blocks if isinstance(b, RichBlock)]
    return "\n".join(t.plain for t in texts if isinstance(t, Text))


def _failed_edit() -> TurnRecord:
    diff = Diff(path="notes.txt", old="old line\n", new="new line\n")
    tool = ToolRecord(
        call_id="c1", name="edit", title="Edit notes.txt", status="error", error="failed", diffs=[diff]
    )
    return TurnRecord(turn_id="t1", prompt="edit it", tools=[tool], outcome="completed")


def test_a_failed_call_says_it_failed_once_on_the_screen_and_the_page() -> None:
    drawn = _drawn(TurnView(_failed_edit()))
    assert "Edit notes.txt · error" in drawn
    assert "failed" not in drawn, drawn  # not ``error  failed``
    (view,) = [tool_view(t) for t in _failed_edit().tools]
    assert view.status == "error" and view.error == ""
    said = _failed_edit().model_copy(deep=True)
    said.tools[0].error = "permission denied"
    assert "error  permission denied" in _drawn(TurnView(said))


def test_a_collapsed_call_hides_its_diff_and_an_open_one_shows_it() -> None:
    view = TurnView(_failed_edit())
    assert "▸ Edit notes.txt" in _drawn(view)
    assert "new line" not in _drawn(view)
    view.expanded = True
    assert "▾ Edit notes.txt" in _drawn(view) and "+new line" in _drawn(view)
