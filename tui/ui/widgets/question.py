"""The pending question, in the prompt's place: options by arrows or number (one line each, a
mark for each option picked when several may be), Enter answers, a freeform line when the
question allows one, Esc dismisses. A viewer reads it and is told who may answer."""

from __future__ import annotations

import time

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from tui.protocol import PendingQuestion

__all__ = ["QuestionPanel"]

VIEWER_HINT = "You are viewing: only the owner and collaborators answer this question"
"""What a viewer reads under a question instead of the keys that answer it."""

OPTIONS_ONLY = "This question takes one of its options: ↑↓ or 1-9 choose, Enter answers"
"""What typing says when the question takes no typed answer."""

OPTIONS_ONLY_SEVERAL = "This question takes its options only: Space or 1-9 pick, Enter answers"
"""The same, for a question that takes several options."""

NOTICE_SECONDS = 5.0
"""How long that notice shows; typing on while it shows does not repeat it."""


class QuestionPanel(Vertical):
    """One question the session is waiting on."""

    DEFAULT_CSS = """
    QuestionPanel {
        height: auto; border-top: tall $accent; background: $surface; padding: 0 1;
    }
    QuestionPanel > #question-text { text-style: bold; max-height: 4; }
    QuestionPanel > OptionList, QuestionPanel > OptionList:focus {
        height: auto; max-height: 10; border: none; padding: 0; background: $surface;
    }
    QuestionPanel > Input, QuestionPanel > Input:focus {
        border: none; height: 1; padding: 0 1; background: $boost;
    }
    QuestionPanel > #question-hint { color: $text-muted; }
    """

    # Space is a binding, as the arrows are: keys that arrive together (tmux, SSH) act in the
    # order they came, so `Down Space` toggles the option the cursor moved to.
    BINDINGS = [Binding("space", "toggle_highlighted", "Toggle", show=False)]

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

    def __init__(self, question: PendingQuestion, *, may_answer: bool = True, id: str | None = None) -> None:
        super().__init__(id=id)
        self.question = question
        self.may_answer = may_answer
        """Whether this client may answer (a viewer reads the question, and is told who answers)."""
        self.picked: set[int] = set()
        """The options picked so far (a question that takes several)."""
        self._told_at = -NOTICE_SECONDS
        """When typing was last told the question takes options only (monotonic seconds)."""

    def compose(self) -> ComposeResult:
        question = self.question
        yield Static(question.text, id="question-text", markup=False)
        if question.options:
            yield OptionList(*[Option(self._option(i)) for i in range(len(question.options))], id="choices")
        if question.freeform and self.may_answer:
            placeholder = (
                "or type an answer, Enter sends" if question.options else "type an answer, Enter sends"
            )
            # Not selected on focus: a key typed at the options moves here and the next must not replace it.
            yield Input(placeholder=placeholder, id="freeform", select_on_focus=False)
        yield Static(self._hint(), id="question-hint", markup=False)

    def _option(self, index: int) -> Text:
        """Option `index` on one line: its mark when several may be picked, number, label, and
        its description dimmed after it (user text: never read as markup)."""
        option = self.question.options[index]
        mark = ("[x] " if index in self.picked else "[ ] ") if self.question.multiple else ""
        line = Text(f"{mark}{index + 1}. {option.label}")
        if option.description:
            line.append(f"  {option.description}", style="dim")
        line.no_wrap = True
        line.overflow = "ellipsis"
        return line

    def _hint(self) -> str:
        q = self.question
        if not self.may_answer:
            return VIEWER_HINT
        parts = []
        if q.options and q.multiple:
            parts.append(f"{len(self.picked)} selected")
        if q.options:
            parts.append("↑↓ or 1-9 choose")
            parts.append("Space toggles, Enter answers" if q.multiple else "Enter answers")
        if q.freeform:
            parts.append("Tab to type" if q.options else "Enter answers")
        parts.append("Esc dismisses")
        return " · ".join(parts)

    def toggle(self, index: int) -> None:
        """Pick option `index`, or unpick it (a question that takes several)."""
        self.picked ^= {index}
        choices = self.query_one("#choices", OptionList)
        choices.replace_option_prompt_at_index(index, self._option(index))
        self.query_one("#question-hint", Static).update(self._hint())

    def on_mount(self) -> None:
        self.focus_first()

    def focus_first(self) -> None:
        """Focus the options, or the freeform line when there are none (unless the focus is in
        the question already: a key may have moved it on)."""
        if not self.is_attached:
            return  # answered or removed before this deferred call ran
        focused = self.screen.focused
        if focused is not None and self in focused.ancestors:
            return
        first = self.query("#choices, #freeform")
        if first:
            first.first().focus()

    def _selected(self) -> list[str]:
        if not self.question.multiple:
            return []
        return [self.question.options[i].label for i in sorted(self.picked)]

    @on(OptionList.OptionSelected, "#choices")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if self.question.multiple:
            self.toggle(event.option_index)
            return
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
        if event.character and event.character.isdigit() and 1 <= int(event.character) <= len(q.options):
            number = int(event.character)
            event.stop()
            event.prevent_default()
            if q.multiple:
                self.toggle(number - 1)
            else:  # picked, not sent: Enter answers (a permission is never given by a stray digit)
                choices = self.query_one("#choices", OptionList)
                choices.highlighted = number - 1
                choices.focus()
        elif event.is_printable and self.may_answer and not (event.key == "space" and q.multiple):
            # Typing is never dropped: it starts the typed answer, or is told it has nowhere to go.
            event.stop()
            event.prevent_default()
            self._typed_elsewhere(event.character or "")
        elif event.key == "enter" and q.multiple:
            event.stop()
            event.prevent_default()
            selected = self._selected()
            if selected or not self.may_answer:
                self.post_message(self.Answered(q.question_id, selected, None))
            else:
                self.notify("Pick one or more first (Space or 1-9), then Enter.", title="Nothing picked")

    def _typed_elsewhere(self, character: str) -> None:
        """A printable key that chooses no option: the first of a typed answer when the question
        takes one (the freeform line gets the focus and the character), else a one-line notice."""
        freeform = self.query("#freeform").results(Input)
        line = next(freeform, None)
        if line is not None:
            line.insert_text_at_cursor(character)
            line.focus()
            return
        now = time.monotonic()
        if now - self._told_at >= NOTICE_SECONDS:  # once for a run of keys, not once a key
            self._told_at = now
            told = OPTIONS_ONLY_SEVERAL if self.question.multiple else OPTIONS_ONLY
            self.notify(told, title="Options only", timeout=NOTICE_SECONDS)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "toggle_highlighted":
            return self.question.multiple and bool(self.question.options)
        return True

    def action_toggle_highlighted(self) -> None:
        """Space: pick the option under the cursor, or unpick it."""
        highlighted = self.query_one("#choices", OptionList).highlighted
        if highlighted is not None:
            self.toggle(highlighted)

    def dismiss(self) -> None:
        """Dismiss the question (Esc)."""
        self.post_message(self.Dismissed(self.question.question_id))
