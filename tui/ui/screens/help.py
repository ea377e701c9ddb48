"""What ``/help`` (and F1) shows on the session screen: the commands and the keys."""

from __future__ import annotations

import textwrap

from tui.ui import slash

__all__ = ["help_text"]


def help_text(columns: int = 0) -> str:
    """What /help shows: the commands and the keys; given `columns`, a line too long for them
    goes on under its own text."""
    width = max(len(c.usage) for c in slash.COMMANDS)
    keys = [
        ("Enter", "send (queues while a turn runs)"),
        ("Ctrl+J, Alt+Enter", "new line"),
        ("Up / Down", "prompt history"),
        ("PgUp / PgDn", "scroll the transcript (older turns load past the first)"),
        ("Shift+Up / Down", "scroll the transcript by lines"),
        ("Ctrl+Home / End", "the session's first turn / back to the live bottom"),
        ("Alt+Up / Down", "select a turn: p, y, t copy its prompt, reply, tool output"),
        ("", "Enter shows its tool output, o opens the whole reply"),
        ("Ctrl+F, /find", "find text in the whole session (Enter/Down next, Up previous)"),
        ("Esc", "leave the selection or search, close completions, dismiss a question, or interrupt"),
        ("Ctrl+C", "interrupt; twice on an idle prompt: detach"),
        ("Ctrl+D, Ctrl+Q", "detach (the session keeps running)"),
        ("Ctrl+P", "command palette (themes too)"),
        ("F1", "this help"),
        ("Ctrl+R", "while reconnecting: try now"),
        ("@path", "complete a file (this machine's sessions)"),
    ]
    width = max(width, *(len(k) for k, _ in keys))
    indent = " " * (width + 4)

    def row(name: str, text: str) -> str:
        head = f"  {name:<{width}}  "
        if columns <= len(indent) + 20:
            return head + text
        return textwrap.fill(text, columns, initial_indent=head, subsequent_indent=indent)

    commands = "\n".join(row(c.usage, c.help) for c in slash.COMMANDS)
    lines = "\n".join(row(k, h) for k, h in keys)
    return f"Commands:\n{commands}\nKeys:\n{lines}"
