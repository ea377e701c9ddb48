"""What the link tells the app, as typed messages: the UI reacts to these, it never polls."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from tui.link.base import LinkState
from tui.protocol import Event, Info, Transcript

__all__ = ["Attached", "LinkEvents", "LinkMessage", "LinkStateChanged"]


@dataclass
class LinkMessage(Message, bubble=False):
    """Something the session's link reported (handled by the screen, never bubbled)."""


@dataclass
class LinkEvents(LinkMessage):
    """Events of the session's journal and link state changes, in order, each once.

    One message carries everything that arrived while the previous one was being handled: the
    follower appends to `items` until the screen takes the batch, so a burst of 20,000 chunks
    costs a handful of messages, not 20,000.
    """

    items: list[Event | LinkState]


@dataclass
class LinkStateChanged(LinkMessage):
    """The link went live, is reconnecting, or is gone."""

    state: LinkState


@dataclass
class Attached(LinkMessage):
    """The session's last turns, pending question and queue: shown before any event."""

    transcript: Transcript
    info: Info | None
