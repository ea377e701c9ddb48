"""What the link tells the app, as typed messages: the UI reacts to these, it never polls."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from tui.link.base import LinkState
from tui.protocol import Event, Info, Transcript

__all__ = ["Attached", "LinkEvent", "LinkMessage", "LinkStateChanged"]


@dataclass
class LinkMessage(Message):
    """Something the session's link reported."""


@dataclass
class LinkEvent(LinkMessage):
    """An event of the session's journal, in order, each once."""

    event: Event


@dataclass
class LinkStateChanged(LinkMessage):
    """The link went live, is reconnecting, or is gone."""

    state: LinkState


@dataclass
class Attached(LinkMessage):
    """The session's last turns, pending question and queue: shown before any event."""

    transcript: Transcript
    info: Info | None
