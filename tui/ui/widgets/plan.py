"""An agent's plan as a checklist: done, doing and still to do, updated in place."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.style import StyleType
from rich.text import Text

from tui.protocol import PlanEntry

__all__ = ["plan_text"]

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
