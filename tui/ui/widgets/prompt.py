"""The prompt: a multi-line input with history, slash-command and ``@path`` completion."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, ScrollableContainer, Vertical
from textual.message import Message
from textual.widgets import OptionList, Static, TextArea
from textual.widgets.option_list import Option

from tui.protocol import AgentChoice, AgentCommand
from tui.terminal import visible
from tui.ui.screens.starting import PLACEHOLDER
from tui.ui.slash import COMMANDS, complete, complete_path

__all__ = ["PLACEHOLDER", "PromptArea", "PromptBox"]


class PromptArea(TextArea):
    """Where prompts are typed: Enter sends, Ctrl+J or Alt+Enter starts a new line, Up/Down on
    the first/last line walk the history."""

    # TextArea's ~30 editing keys (word left, delete line, …) and the scrolling keys it inherits
    # are every text box's: kept working, but left out of the keys panel (system bindings), which
    # lists what is this app's own.
    BINDINGS = [
        *(
            replace(binding, system=True, show=False)
            for base in (ScrollableContainer, TextArea)
            for binding in base.BINDINGS
            if isinstance(binding, Binding)
        ),
        Binding(
            "ctrl+j", "newline", "Newline", id="prompt.newline", tooltip="Start a new line in the prompt"
        ),
        Binding(
            "alt+enter",
            "newline",
            "Newline",
            show=False,
            id="prompt.newline-alt",
            tooltip="Start a new line in the prompt",
        ),
    ]

    DEFAULT_CSS = """
    PromptArea {
        height: auto; max-height: 10; min-height: 1; border: none; padding: 0 1; background: $surface;
    }
    PromptArea:focus { border: none; }
    PromptArea .text-area--cursor-line { background: transparent; }
    """

    class Submitted(Message):
        """Enter was pressed: the prompt's text."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(
            id=id, soft_wrap=True, show_line_numbers=False, tab_behavior="focus", placeholder=PLACEHOLDER
        )
        self.sent: list[str] = []
        """Prompts sent before, oldest first."""
        self._place: int | None = None
        self._draft = ""

    @property
    def box(self) -> PromptBox | None:
        return next((node for node in self.ancestors if isinstance(node, PromptBox)), None)

    async def _on_key(self, event: events.Key) -> None:
        box = self.box
        if event.key in ("tab", "shift+tab"):
            # Tab never leaves the prompt: it completes what is typed now, even when the
            # completions for it are not shown yet (keys typed fast arrive before `Changed`).
            event.stop()
            event.prevent_default()
            if box is not None:
                box.complete_now(self.text, forward=event.key == "tab")
            return
        if box is not None and box.completing and box.offered_for != self.text:
            # Keys typed fast (a paste, tmux send-keys) arrive before `Changed`: the completions
            # shown are those of an earlier text ("/re" → /resume), and Enter must not take one
            # for "/rewind 1". Offer what completes the text as it is now first.
            box.refresh_completions(self.text)
        if (
            box is not None
            and box.completing
            and event.key in ("up", "down", "tab", "enter")
            and not (event.key == "enter" and box.is_whole(self.text))
        ):
            event.stop()
            event.prevent_default()
            box.completion_key(event.key)
            return
        if event.key in ("ctrl+j", "alt+enter"):
            # Handled here, not only by the binding: a terminal's Ctrl+J (LF) reaches the
            # TextArea as a key it neither inserts nor lets the binding see.
            event.stop()
            event.prevent_default()
            self.action_newline()
            return
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.post_message(self.Submitted(self.text))
            return
        if event.key == "up" and self.cursor_location[0] == 0 and self.sent:
            event.stop()
            event.prevent_default()
            self._walk(-1)
            return
        if (
            event.key == "down"
            and self.cursor_location[0] == self.document.line_count - 1
            and self._place is not None
        ):
            event.stop()
            event.prevent_default()
            self._walk(1)
            return
        await super()._on_key(event)

    def _walk(self, step: int) -> None:
        if self._place is None:
            self._draft = self.text
            self._place = len(self.sent)
        place = max(0, min(len(self.sent), self._place + step))
        self._place = place
        text = self.sent[place] if place < len(self.sent) else self._draft
        if place == len(self.sent):
            self._place = None
        self.load_text(text)
        self.move_cursor(self.document.end)

    def remember(self, text: str) -> None:
        """Add a sent prompt to the history."""
        if text and (not self.sent or self.sent[-1] != text):
            self.sent.append(text)
        self._place = None

    def action_newline(self) -> None:
        self.insert("\n")


class PromptBox(Vertical):
    """The prompt and the completions shown above it while typing ``/`` or ``@``."""

    DEFAULT_CSS = """
    PromptBox { height: auto; border-top: tall $primary; background: $surface; }
    PromptBox > OptionList { height: auto; max-height: 8; display: none; border: none; background: $panel; }
    PromptBox > #prompt-row { height: auto; }
    PromptBox #prompt-mark {
        width: 2; padding: 0 0 0 1; color: $accent; text-style: bold; background: $surface;
    }
    PromptBox.-queueing #prompt-mark { color: $warning; }
    PromptBox.-completing > OptionList { display: block; }
    PromptBox.-queueing { border-top: tall $warning; }
    """

    def __init__(self, *, paths: bool = False, root: Path | None = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.paths = paths
        """Whether ``@path`` completes (this machine's files)."""
        self.root = root
        self.agent_commands: list[AgentCommand] = []
        """The agent's own slash commands (``/info`` and ``agent_info``): they complete too."""
        self.python = False
        """Whether a prompt is a Python program (``/info``'s ``prompt_syntax``): a file taken from
        ``@path``'s completions goes in as a string literal, ``'notes.md'``, as ``@notes.md`` is
        no Python."""
        self.models: list[str] = []
        """The model profiles ``/model`` takes (from the worker's ``/info``)."""
        self.agent_models: list[AgentChoice] = []
        """The models an ACP agent offers (its setting of category ``model``): ``/model`` takes them."""
        self.modes: list[AgentChoice] = []
        """The modes an ACP agent offers: ``/mode`` takes them."""
        self._words: list[str] = []
        self.offered_for: str | None = None
        """The text the completions shown were made for."""

    def compose(self) -> ComposeResult:
        yield OptionList(id="completions")
        with Horizontal(id="prompt-row"):
            yield Static("\u276f", id="prompt-mark", markup=False)
            yield PromptArea(id="prompt")

    @property
    def completing(self) -> bool:
        """Whether completions are shown."""
        return self.has_class("-completing")

    @on(TextArea.Changed, "#prompt")
    def _changed(self, event: TextArea.Changed) -> None:
        self.refresh_completions(event.text_area.text)

    def refresh_completions(self, text: str) -> None:
        """Offer what completes `text`."""
        self.offered_for = text
        options: list[Option] = []
        self._words = []
        commands = [c for c in complete(text) if c.name != "/mode" or self.modes]  # an agent's modes
        theirs = self._agent_completions(text)
        takes = next((c for c in ("/model ", "/mode ") if text.startswith(c)), None)
        if takes is not None and "\n" not in text:
            typed = text.removeprefix(takes).strip()
            choices = (
                self.modes
                if takes == "/mode "
                else [AgentChoice(value=m) for m in self.models] + self.agent_models
            )
            for choice in choices:
                if choice.value.startswith(typed) and choice.value != typed:
                    self._words.append(f"{takes}{choice.value}")
                    label = choice.value
                    if choice.name and choice.name != choice.value:
                        label += f"  {choice.name}"
                    if choice.description:
                        label += f" · {choice.description}"
                    options.append(Option(Text(label)))
        elif commands or theirs:
            for command in commands:
                self._words.append(command.name + (" " if command.usage != command.name else ""))
                options.append(Option(Text(f"{command.usage:<18} {command.help}")))
            for agent_command in theirs:
                self._words.append(f"/{agent_command.name} ")
                line = f"{'/' + agent_command.name:<18} {agent_command.description}"
                options.append(Option(Text(line)))
        elif self.paths:
            word = text.rsplit(None, 1)[-1] if text.strip() else ""
            if word.startswith("@") and not text.endswith((" ", "\n")):
                for found in complete_path(word, self.root):
                    shown = visible(found)  # a file's name is whatever a program made it
                    self._words.append(shown)
                    options.append(Option(Text(shown)))
        completions = self.query_one(OptionList)
        completions.set_options(options)
        if options:
            completions.highlighted = 0
        self.set_class(bool(options), "-completing")

    def _agent_completions(self, text: str) -> list[AgentCommand]:
        if not text.startswith("/") or any(c in text for c in " \n"):
            return []
        return [c for c in self.agent_commands if f"/{c.name}".startswith(text) and f"/{c.name}" != text]

    def is_whole(self, text: str) -> bool:
        """Whether `text` is already a whole command, or ``/model``/``/mode`` with a whole choice:
        Enter sends it, though longer ones that start with it are offered (``/mode`` beside
        ``/model``, Claude Code's ``sonnet`` beside ``sonnet[1m]``)."""
        typed = text.strip()
        takes = next((c for c in ("/model ", "/mode ") if text.startswith(c)), None)
        if takes is not None:
            value = text.removeprefix(takes).strip()
            if takes == "/mode ":
                return any(c.value == value for c in self.modes)
            return value in self.models or any(c.value == value for c in self.agent_models)
        return any(c.name == typed for c in COMMANDS) or any(
            f"/{c.name}" == typed for c in self.agent_commands
        )

    def is_agent_command(self, text: str) -> bool:
        """Whether `text` runs one of the agent's own commands (it goes to the agent as a prompt);
        tui's own commands of the same name win."""
        name = text.strip().split(maxsplit=1)[0] if text.strip() else ""
        if any(c.name == name for c in COMMANDS):
            return False
        return any(f"/{c.name}" == name for c in self.agent_commands)

    def complete_now(self, text: str, *, forward: bool = True) -> None:
        """Tab: take the highlighted completion of `text` (the first one when none is shown yet);
        Shift+Tab while completions are shown moves up through them."""
        if self.completing and not forward:
            self.query_one(OptionList).action_cursor_up()
            return
        if not self.completing:
            self.refresh_completions(text)
        if self._words:
            self.accept(self.query_one(OptionList).highlighted or 0)

    def close(self) -> None:
        """Hide the completions."""
        self.set_class(False, "-completing")

    def completion_key(self, key: str) -> None:
        """Up/Down move through the completions; Tab or Enter takes one."""
        completions = self.query_one(OptionList)
        if key == "up":
            completions.action_cursor_up()
        elif key == "down":
            completions.action_cursor_down()
        else:
            self.accept(completions.highlighted or 0)

    @on(OptionList.OptionSelected, "#completions")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.accept(event.option_index)

    def accept(self, index: int) -> None:
        """Put completion `index` into the prompt."""
        if not 0 <= index < len(self._words):
            return
        word = self._words[index]
        prompt = self.query_one(PromptArea)
        text = prompt.text
        if word.startswith("@"):
            head = text[: len(text) - len(text.rsplit(None, 1)[-1])]
            if self.python and not word.endswith("/"):  # a folder goes on completing as @path
                word = repr(word[1:])
            new = head + word + ("" if word.endswith("/") else " ")
        else:
            new = word
        prompt.load_text(new)
        prompt.move_cursor(prompt.document.end)
        if not word.endswith("/"):
            self.close()
        prompt.focus()
