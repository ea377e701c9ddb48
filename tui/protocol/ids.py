"""Session ids as people see them.

An id is 16 lowercase hex characters; it is printed short, its first `SHORT` characters, and any
unique prefix resolves (`tui.store.resolve_id`).
"""

from __future__ import annotations

__all__ = ["SHORT", "short_id"]

SHORT = 8
"""How many characters of an id are printed."""


def short_id(session_id: str) -> str:
    """The id as people see it: its first `SHORT` characters."""
    return session_id[:SHORT]
