"""The slash commands typed at the prompt, and what completes as the user types."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["COMMANDS", "SlashCommand", "complete", "complete_path", "parse"]


@dataclass(frozen=True)
class SlashCommand:
    """One command: how it is typed and what it does."""

    name: str
    usage: str
    help: str


COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand("/detach", "/detach", "leave the session; its worker keeps running"),
    SlashCommand("/exit", "/exit", "stop the session's worker and leave"),
    SlashCommand("/exit --delete", "/exit --delete", "stop the worker, delete the session and leave"),
    SlashCommand("/archive", "/archive", "hide the session from `tui sessions`"),
    SlashCommand("/model", "/model NAME", "switch the session's model"),
    SlashCommand("/queue", "/queue [PROMPT]", "show the queue, or queue PROMPT behind the running turn"),
    SlashCommand("/unqueue", "/unqueue", "take the last queued prompt back into the prompt"),
    SlashCommand("/stats", "/stats", "the session's figures: turns, tokens, uptime, who is attached"),
    SlashCommand("/help", "/help", "commands and keys"),
)


def parse(line: str) -> tuple[str, str]:
    """Split a slash command line into its command and the rest (``("/model", "big")``)."""
    text = line.strip()
    if text.startswith("/exit") and text.split()[1:2] == ["--delete"]:
        return "/exit --delete", ""
    name, _, rest = text.partition(" ")
    return name, rest.strip()


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
