"""The pending question, in the prompt's place: options by arrows or number, a freeform line
when the question allows one, Esc dismisses."""

from __future__ import annotations

from textual import events, on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, OptionList, SelectionList, Static
from textual.widgets.option_list import Option

from tui.protocol import PendingQuestion

__all__ = ["QuestionPanel"]


class QuestionPanel(Vertical):
    """One question the session is waiting on."""

    DEFAULT_CSS = """
    QuestionPanel { height: auto; border-top: tall $accent; background: $surface; padding: 0 1; }
    QuestionPanel > #question-text { text-style: bold; padding: 0 0 1 0; }
    QuestionPanel > OptionList, QuestionPanel > SelectionList { height: auto; max-height: 12; border: none; }
    QuestionPanel > Input, QuestionPanel > Input:focus {
        border: none; height: 1; padding: 0 1; background: $boost;
    }
    QuestionPanel > #question-hint { color: $text-muted; }
    """

    class Answered(Message):
        """The user answered: option labels and/or free text."""

        def __init__(self, question_id: str, selected: list[str], freeform: str | None) -> None:
            super().__init__()
            self.question_id = question_id
            self.selected = selected
            self.freeform = freeform

    class Dismissed(Message):
        """The user dismissed the question."""

        def __init__(self, question_id: str) -> None:
            super().__init__()
            self.question_id = question_id

    def __init__(self, question: PendingQuestion, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.question = question

    def compose(self) -> ComposeResult:
        question = self.question
        yield Static(question.text, id="question-text", markup=False)
        labels = [
            f"{n}. {o.label}" + (f" — {o.description}" if o.description else "")
            for n, o in enumerate(question.options, 1)
        ]
        if question.options and question.multiple:
            yield SelectionList[int](*[(label, i) for i, label in enumerate(labels)], id="choices")
        elif question.options:
            yield OptionList(*[Option(label) for label in labels], id="choices")
        if question.freeform:
            placeholder = (
                "or type an answer, Enter sends" if question.options else "type an answer, Enter sends"
            )
            yield Input(placeholder=placeholder, id="freeform")
        yield Static(self._hint(), id="question-hint", markup=False)

    def _hint(self) -> str:
        q = self.question
        parts = []
        if q.options:
            parts.append("↑↓ or 1-9 choose")
            parts.append("Space toggles, Enter answers" if q.multiple else "Enter answers")
        if q.freeform:
            parts.append("Tab to type" if q.options else "Enter answers")
        parts.append("Esc dismisses")
        return " · ".join(parts)

    def on_mount(self) -> None:
        self.focus_first()

    def focus_first(self) -> None:
        """Focus the options, or the freeform line when there are none."""
        first = self.query("#choices, #freeform")
        if first:
            first.first().focus()

    def _selected(self) -> list[str]:
        if not self.question.multiple:
            return []
        choices = self.query_one("#choices", SelectionList)
        return [self.question.options[i].label for i in sorted(choices.selected)]

    @on(OptionList.OptionSelected, "#choices")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        label = self.question.options[event.option_index].label
        self.post_message(self.Answered(self.question.question_id, [label], None))

    @on(Input.Submitted, "#freeform")
    def _typed(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        selected = self._selected()
        if text or selected:
            self.post_message(self.Answered(self.question.question_id, selected, text or None))

    def on_key(self, event: events.Key) -> None:
        q = self.question
        focused = self.screen.focused
        if event.key in ("tab", "shift+tab"):
            # Tab goes between the options and the freeform line, never out of the question.
            event.stop()
            event.prevent_default()
            stops = list(self.query("#choices, #freeform"))
            if stops:
                at = stops.index(focused) if focused in stops else -1
                step = 1 if event.key == "tab" else -1
                stops[(at + step) % len(stops)].focus()
            return
        if isinstance(focused, Input):
            return
        if event.character and event.character.isdigit() and q.options:
            number = int(event.character)
            if 1 <= number <= len(q.options):
                event.stop()
                event.prevent_default()
                if q.multiple:
                    self.query_one("#choices", SelectionList).toggle(number - 1)
                else:
                    self.post_message(self.Answered(q.question_id, [q.options[number - 1].label], None))
        elif event.key == "enter" and q.multiple:
            event.stop()
            event.prevent_default()
            selected = self._selected()
            if selected:
                self.post_message(self.Answered(q.question_id, selected, None))

    def dismiss(self) -> None:
        """Dismiss the question (Esc)."""
        self.post_message(self.Dismissed(self.question.question_id))
