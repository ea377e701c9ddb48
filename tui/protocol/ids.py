"""Ids as people see them: sessions by a short prefix, clients by what they are.

A session id is 16 lowercase hex characters; it is printed short, its first `SHORT` characters,
and any unique prefix resolves (`tui.store.resolve_id`). A client id is
``<surface>:<host>:<pid>``: the surface says what the client is (the full-screen app, ``tui
send``, a script on stdin …), so that two terminals of one person, or a script beside them, can be
told apart in the status row, on each turn and in ``/stats``.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["BY_PARENT", "SHORT", "Surface", "client_label", "make_client_id", "short_id"]

SHORT = 8
"""How many characters of an id are printed."""

Surface = Literal["tui", "send", "answer", "dismiss", "interrupt", "script", "acp", "parent", "note", "web"]
"""What a client is: the full-screen app, one of the session commands, or a piped script."""

_LABELS = {
    "tui": "terminal",
    "script": "script",
    "acp": "editor",
    "page": "browser",
    "parent": "through its parent",
    "web": "tui web",
}

BY_PARENT = "by-parent"
"""The surface of a parent session's own answer to its child's question (``by-parent:PARENT:pid``):
its transcript says "answered by parent"."""


def short_id(session_id: str) -> str:
    """The id as people see it: its first `SHORT` characters."""
    return session_id[:SHORT]


def make_client_id(surface: Surface, host: str, pid: int) -> str:
    """A client's id: ``tui:vm:7019`` for the app on host ``vm``, ``send:vm:7020`` for ``tui send``."""
    return f"{surface}:{host}:{pid}"


def client_label(client_id: str | None) -> str | None:
    """What a client is, for people: ``terminal``, ``tui send``, ``script``; None when unknown."""
    if not client_id or ":" not in client_id:
        return None
    surface = client_id.split(":", 1)[0]
    return _LABELS.get(surface, f"tui {surface}")
