"""An edit an agent made, shown as a unified diff: removed lines red, added lines green."""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from rich.style import StyleType
from rich.text import Text

from tui.protocol import Diff

__all__ = ["diff_text"]

CONTEXT_LINES = 3
"""Unchanged lines shown around each change."""

MAX_LINES = 400
"""The longest diff shown whole; longer ones are cut with a line saying how much was left out."""


def diff_text(diff: Diff, styles: Mapping[str, StyleType] | None = None) -> Text:
    """`diff` as a unified diff: a header naming the file (new or edited), then its hunks.

    Args:
        diff: the edit.
        styles: Rich styles for ``header``, ``hunk``, ``removed`` and ``added`` lines.
    """
    style: dict[str, StyleType] = {
        "header": "bold",
        "hunk": "cyan",
        "removed": "red",
        "added": "green",
        **(styles or {}),
    }
    old = (diff.old or "").splitlines(keepends=True)
    new = diff.new.splitlines(keepends=True)
    lines = list(
        difflib.unified_diff(
            old,
            new,
            fromfile="/dev/null" if diff.old is None else _side("a", diff.path),
            tofile=_side("b", diff.path),
            n=CONTEXT_LINES,
        )
    )
    text = Text(no_wrap=False, end="")
    if not lines:
        text.append(f"{diff.path}: no change", style=style["header"])
        return text
    shown = lines[:MAX_LINES]
    for i, line in enumerate(shown):
        body = line.rstrip("\n")
        if line.startswith(("---", "+++")) and i < 2:
            kind = "header"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("-"):
            kind = "removed"
        elif line.startswith("+"):
            kind = "added"
        else:
            kind = ""
        text.append(body, style=style.get(kind, ""))
        if i < len(shown) - 1:
            text.append("\n")
    if len(lines) > MAX_LINES:
        text.append(f"\n… {len(lines) - MAX_LINES} more lines", style="italic")
    return text


def _side(prefix: str, path: str) -> str:
    """git's ``a/`` and ``b/`` before a relative path; an absolute one is shown as it is."""
    return path if path.startswith("/") else f"{prefix}/{path}"
