"""The slash commands people type, one table for the full-screen app and the piped surface.

Each command says how it is typed, what it does, what a client needs to be permitted it (the
`Permission` of `tui.protocol.principal`) and which surfaces take it. `parse` splits a typed line;
`format_stats` is what ``/stats`` prints on either surface, `format_children` what ``/children`` does,
`format_context` what ``/context`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from tui.protocol import ChildView, Stats
from tui.protocol.ids import client_label, short_id
from tui.protocol.messages import ContextList
from tui.protocol.principal import Permission

__all__ = [
    "COMMANDS",
    "SlashCommand",
    "Surface",
    "commands_for",
    "find",
    "format_children",
    "format_context",
    "format_stats",
    "needs",
    "parse",
]

Surface = Literal["tui", "piped"]
"""Where a command is typed: the full-screen app, or a script on stdin."""

_BOTH: frozenset[Surface] = frozenset({"tui", "piped"})
_TUI: frozenset[Surface] = frozenset({"tui"})


@dataclass(frozen=True)
class SlashCommand:
    """One command: how it is typed, what it does, who may use it and where."""

    name: str
    usage: str
    help: str
    needs: Permission | None = None
    """What the client must be permitted (None: anyone attached may)."""
    surfaces: frozenset[Surface] = _BOTH


COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand("/detach", "/detach", "leave the session; its worker keeps running"),
    SlashCommand("/exit", "/exit", "stop the session's worker and leave", "owner"),
    SlashCommand(
        "/exit --delete", "/exit --delete", "stop the worker, delete the session and leave", "owner", _TUI
    ),
    SlashCommand("/archive", "/archive", "hide the session from `tui sessions`", "owner", _TUI),
    SlashCommand("/model", "/model NAME", "switch the session's model", "owner"),
    SlashCommand("/mode", "/mode NAME", "switch the agent's mode (an ACP agent's)", "owner", _TUI),
    SlashCommand(
        "/queue", "/queue [PROMPT]", "show the queue, or queue PROMPT behind the running turn", "write"
    ),
    SlashCommand("/unqueue", "/unqueue", "take the last queued prompt back into the prompt", "write", _TUI),
    SlashCommand("/resume", "/resume", "run the queue held after an interrupt", "write"),
    SlashCommand("/copy", "/copy", "copy the last reply to the clipboard", None, _TUI),
    SlashCommand("/stats", "/stats", "the session's figures: turns, tokens, uptime, who is attached"),
    SlashCommand("/children", "/children", "the sessions this one started, how each stands, how to attach"),
    SlashCommand("/note", "/note TEXT", "leave a note the agent is given with its next turn", "write"),
    SlashCommand(
        "/context",
        "/context [remove NAME]",
        "the context sources the agent sees: age, size, a failing command's error; or remove one",
    ),
    SlashCommand("/restart", "/restart", "move the session to a new worker (the tui installed)", "owner"),
    SlashCommand(
        "/rewind",
        "/rewind N [--force]",
        "files and conversation back as before turn N (/rewind --undo: the files as before it)",
        "owner",
    ),
    SlashCommand("/find", "/find TEXT", "find TEXT in the whole session (Ctrl+F)", None, _TUI),
    SlashCommand(
        "/search", "/search TEXT", "find TEXT in every session, and open a hit where it was", None, _TUI
    ),
    SlashCommand("/help", "/help", "commands and keys", None, _TUI),
)


def commands_for(surface: Surface) -> tuple[SlashCommand, ...]:
    """The commands `surface` takes, in the table's order."""
    return tuple(c for c in COMMANDS if surface in c.surfaces)


def find(name: str, surface: Surface) -> SlashCommand | None:
    """The command called `name` (as `parse` returns it) that `surface` takes, if any."""
    return next((c for c in commands_for(surface) if c.name == name), None)


def parse(line: str) -> tuple[str, str]:
    """Split a slash command line into its command and the rest (``("/model", "big")``)."""
    text = line.strip()
    if text.startswith("/exit") and text.split()[1:2] == ["--delete"]:
        return "/exit --delete", ""
    name, _, rest = text.partition(" ")
    return name, rest.strip()


def needs(name: str, rest: str = "") -> Permission | None:
    """What running `name` with argument `rest` needs (a bare ``/queue`` only lists the queue)."""
    command = next((c for c in COMMANDS if c.name == name), None)
    if command is None or (name == "/queue" and not rest):
        return None
    if name == "/context":
        return "owner" if rest.split()[:1] == ["remove"] else None  # removing is the owner's
    return command.needs


def _client(client_id: str) -> str:
    """``terminal on vm (pid 7019)`` for ``tui:vm:7019``."""
    parts = client_id.split(":")
    label = client_label(client_id)
    if label is None or len(parts) != 3:
        return client_id
    return f"{label} on {parts[1]} (pid {parts[2]})"


def format_stats(stats: Stats) -> str:
    """The line ``/stats`` shows."""
    return (
        f"stats: {stats.turns} turns · tokens {stats.tokens_in} in / {stats.tokens_out} out · "
        f"up {int(stats.uptime)}s · {stats.events} events · "
        f"attached: {', '.join(_client(c) for c in stats.attached) or 'nobody'}"
    )


_CHILD_STATES = {"asking": "waiting for an answer", "completed": "done"}


def format_children(children: Iterable[ChildView], attach: Callable[[str], str]) -> str:
    """The lines ``/children`` shows: each child's short id, how it stands (its question, its
    error), its first prompt line and the command that attaches to it (`attach(short_id)`)."""
    rows = list(children)
    if not rows:
        return (
            "children: none; a program's delegate(PROMPT) or `tui send --new --parent ID PROMPT` starts one"
        )
    lines = [f"children: {len(rows)}"]
    for child in rows:
        state = _CHILD_STATES.get(child.state, child.state)
        why = child.question.text if child.question else child.error or ""
        first = child.prompt.splitlines()[0] if child.prompt else ""
        short = short_id(child.child_id)
        lines.append(
            f"  {short}  {state}{f' ({why})' if why else ''}  {first[:40]}  `{attach(short)}`".rstrip()
        )
    return "\n".join(lines)


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    return f"{seconds // 60} min" if seconds < 7200 else f"{seconds // 3600} h"


def format_context(listed: ContextList, add: str) -> str:
    """The lines ``/context`` shows: each source's name, what it runs, the age and size of its
    value, and a failing command's error (its value); `add` is the command that adds one."""
    if not listed.sources:
        return f"context: none; `{add}` adds one"
    lines = [f"context: {len(listed.sources)} source{'s' if len(listed.sources) != 1 else ''}"]
    width = max(len(e.name) for e in listed.sources)
    for entry in listed.sources:
        what = entry.cmd or entry.path or "pushed"
        every = f"every {entry.every:g} s: " if entry.every else ""
        if entry.at is None:
            value = "no value yet"
        else:
            age = _age((listed.now - entry.at).total_seconds())
            value = f"{age} old, {entry.size:,} chars"
        what = what if len(what) <= 60 else what[:59] + "…"
        line = f"  {entry.name:<{width}}  {value}  · {every}{what}"
        if entry.error:
            said = [part.strip() for part in entry.value.splitlines() if part.strip()]
            # A command's last line of output, then its exit status (the worker's last line).
            status = bool(said) and said[-1].startswith("(exit status")
            error = " ".join(said[-2:] if status else said[-1:])
            line += f"  · failed: {error[-100:] or 'no output'}"
        lines.append(line)
    return "\n".join(lines)
