"""An agent's plan as a checklist: done, doing and still to do, updated in place."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.style import StyleType
from rich.text import Text
from textual.widgets import Static

from tui.protocol import PlanEntry

__all__ = ["PlanView", "plan_text"]

MARKS = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}
"""How each entry's status is drawn."""


def plan_text(entries: Sequence[PlanEntry], styles: Mapping[str, StyleType] | None = None) -> Text:
    """`entries` as a checklist, one line each: ``[x]`` done, ``[>]`` doing, ``[ ]`` to do.

    Args:
        entries: the plan as it stands.
        styles: Rich styles by status (``completed``, ``in_progress``, ``pending``).
    """
    style: dict[str, StyleType] = {"completed": "dim", "in_progress": "bold", "pending": "", **(styles or {})}
    text = Text(end="")
    done = sum(1 for e in entries if e.status == "completed")
    text.append(f"Plan · {done}/{len(entries)} done", style="bold")
    for entry in entries:
        text.append("\n")
        text.append(f"{MARKS[entry.status]} {entry.content}", style=style[entry.status])
    return text


class PlanView(Static):
    """The running turn's plan; each `plan` event replaces it in place."""

    DEFAULT_CSS = """
    PlanView { height: auto; padding: 0 0 0 2; }
    PlanView > .plan--completed { color: $text-muted; }
    PlanView > .plan--in_progress { color: $text-warning; text-style: bold; }
    PlanView > .plan--pending { color: $text; }
    """
    COMPONENT_CLASSES = {"plan--completed", "plan--in_progress", "plan--pending"}

    def __init__(self, entries: Sequence[PlanEntry] = ()) -> None:
        super().__init__()
        self.entries: list[PlanEntry] = list(entries)

    def show(self, entries: Sequence[PlanEntry]) -> None:
        """The plan changed: draw it again."""
        self.entries = list(entries)
        self.refresh(layout=True)

    def render(self) -> Text:
        return plan_text(self.entries, plan_styles(self))


def plan_styles(widget: Static) -> dict[str, StyleType]:
    """The checklist's styles from `widget`'s theme (its ``plan--*`` component classes)."""
    return {
        status: widget.get_component_rich_style(f"plan--{status}", partial=True)
        for status in ("completed", "in_progress", "pending")
    }
