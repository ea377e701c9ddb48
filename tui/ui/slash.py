"""What completes as the user types at the prompt: slash commands and ``@path`` words.

The commands themselves (names, help, who may use them, parsing) are the core's table,
`tui.link.slash`, shared with the piped surface.
"""

from __future__ import annotations

import os
from pathlib import Path

from tui.link.slash import SlashCommand, commands_for, parse

__all__ = ["COMMANDS", "SlashCommand", "complete", "complete_path", "parse"]

COMMANDS: tuple[SlashCommand, ...] = commands_for("tui")
"""The commands typed in the full-screen app."""


def complete(text: str) -> list[SlashCommand]:
    """The commands that start with what was typed (nothing once a space follows the name)."""
    if not text.startswith("/") or "\n" in text:
        return []
    if " " in text and not text.startswith("/exit "):
        return []
    return [c for c in COMMANDS if c.name.startswith(text) and c.name != text]


def complete_path(word: str, root: Path | None = None, limit: int = 12) -> list[str]:
    """``@path`` completions for `word` (which starts with ``@``): files under `root`.

    Returns:
        Whole words (``@src/main.py``, folders ending in ``/``), sorted, hidden files only when
        the typed name starts with a dot.
    """
    typed = word[1:]
    base = root or Path.cwd()
    folder, _, stem = typed.rpartition("/")
    where = base / folder if folder else base
    try:
        entries = sorted(os.scandir(where), key=lambda e: e.name)
    except OSError:
        return []
    found = []
    for entry in entries:
        if not entry.name.startswith(stem) or (entry.name.startswith(".") and not stem.startswith(".")):
            continue
        path = f"{folder}/{entry.name}" if folder else entry.name
        found.append("@" + path + ("/" if entry.is_dir() else ""))
        if len(found) >= limit:
            break
    return found
