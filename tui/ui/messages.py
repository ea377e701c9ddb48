"""What the session's attachment tells the app, as typed messages: the UI reacts to these, it
never polls."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

__all__ = ["Arrived", "LinkMessage"]


@dataclass
class LinkMessage(Message, bubble=False):
    """Something the session's link reported (handled by the screen, never bubbled)."""


@dataclass
class Arrived(LinkMessage):
    """Something arrived for the session's attachment: its handler takes it all (`take`) and
    draws the changes.

    What arrives while one is handled waits for the next, posted once the screen was painted,
    so a burst of 20,000 chunks costs a handful of messages, not 20,000.
    """
