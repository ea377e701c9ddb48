"""The page's changes in words (`tui.link.page`): a new kind of change needs Python only, and the
running turn drawn from its steps ends as the ended turn's view draws it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tui.link import changes as ch
from tui.link.page import PAGE_CHANGES, PageView
from tui.protocol import (
    By,
    Note,
    TextChunk,
    ToolEnded,
    ToolOutput,
    ToolStarted,
    TurnStarted,
    UnknownEvent,
)
from tui.protocol.page import PageChange, status_view, turn_view
from tui.protocol.state import SessionState, note_line
from tui.protocol.wording import unknown_line

APP_JS = Path(__file__).parent.parent / "tui" / "web" / "static" / "app.js"


def _view() -> PageView:
    attachment = SimpleNamespace(
        session=SessionState(),
        link=SimpleNamespace(session_id="0123456789abcdef"),
        link_state=None,
        info=None,
    )
    return PageView(attachment)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Tremor:
    """A change of a kind the page has never seen."""

    magnitude: int


def test_a_new_kind_of_change_is_shown_in_words_with_no_line_of_javascript() -> None:
    page = APP_JS.read_text()
    # The page draws by the fields a change sets, never by its type: no type is named in it.
    for typ in [*(t.__name__ for t in PAGE_CHANGES), "Snapshot", "StatusChanged", "Tremor"]:
        assert f'"{typ}"' not in page and f"'{typ}'" not in page, typ
    PAGE_CHANGES[Tremor] = lambda view, change: view.line(
        f"the ground shook ({change.magnitude})", "", "Tremor"
    )
    try:
        view = _view()
        (made, *_) = view.changes([Tremor(4)])  # type: ignore[list-item]
    finally:
        del PAGE_CHANGES[Tremor]
    assert made.type == "Tremor" and made.words == "the ground shook (4)"
    assert made.lines is not None and [line.text for line in made.lines] == ["the ground shook (4)"]
    # an event this version does not know reaches the page as the attachment's line for it
    said = unknown_line(UnknownEvent(type="quake", seq=9).type)
    (line, *_) = _view().changes([ch.Line(said)])
    assert line.lines is not None and line.lines[-1].text == "(an event this version does not know: quake)"


def _draw(steps: list[dict[str, Any]], change: PageChange) -> None:
    """What the page does with a change's step (app.js, `putStep`)."""
    if change.step is None or change.at is None:
        return
    step = change.step.model_dump()
    old = steps[change.at] if change.at < len(steps) else None
    if change.append and old is not None and old["kind"] == step["kind"]:
        if step["kind"] == "tool":
            old["tool"]["output"] += step["tool"]["output"]
        else:
            old["text"] += step["text"]
    elif change.at < len(steps):
        steps[change.at] = step
    else:
        steps.append(step)


def test_the_running_turn_drawn_step_by_step_is_the_turn_as_its_record_says() -> None:
    view = _view()
    state = view.session
    turn = "t-1"
    events = [
        TextChunk(turn_id=turn, text="Let me "),
        TextChunk(turn_id=turn, text="look.\n"),
        ToolStarted(turn_id=turn, call_id="c1", name="run_python", args={"code": "print(1)"}),
        ToolOutput(turn_id=turn, call_id="c1", text="1\n"),
        ToolOutput(turn_id=turn, call_id="c1", text="2\n"),
        Note(text="look at the logs", by=By(name="ana", kind="participant")),
        ToolEnded(turn_id=turn, call_id="c1", status="completed", value=3),
        TextChunk(turn_id=turn, text="It printed "),
        TextChunk(turn_id=turn, text="two lines."),
    ]
    start = TurnStarted(turn_id=turn, prompt="go", seq=1)
    state.apply(start)
    assert state.current is not None
    drawn = view.changes([ch.TurnStarted(state.current.record(), None, False)])
    steps: list[dict[str, Any]] = []
    for seq, event in enumerate(events, 2):
        event = event.model_copy(update={"seq": seq})
        state.apply(event)
        change: Any = ch.Line(note_line(event)) if isinstance(event, Note) else ch.Output(turn, event)  # type: ignore[arg-type]
        for made in view.changes([change]):
            _draw(steps, made)
            drawn.append(made)
    assert state.current is not None
    assert steps == [s.model_dump() for s in turn_view(state.current.record()).steps]
    assert [s["kind"] for s in steps] == ["text", "tool", "line", "text"]
    assert steps[2]["text"] == "note from ana (participant): look at the logs"
    # a page that joins now is drawn the same turn at once
    (snapshot_turn,) = view.snapshot().turns or []
    assert [s.model_dump() for s in snapshot_turn.steps] == steps


def test_the_pages_status_row_names_tokens_only_once_some_were_spent() -> None:
    python = status_view("idle", agent="python", model=None, tokens=(0, 0), attached=[])
    assert python.parts == ["python"]
    model = status_view("idle", agent="model", model="gpt", tokens=(1200, 300), attached=[])
    assert model.parts == ["model · gpt", "tokens 1.2k in / 300 out"]
