"""A session's events up to one seq, read once (`history`): what a load replays (`tui acp`'s
``session/load``) without applying each event to a session's state.

The events come from the session's journal file when this machine holds it (`AttachLink.stored`:
read straight through once, in batches, each read in a thread); an event is decoded only when its
type is one the caller asked for. What the file does not hold (a remote session, a journal on
another machine) comes through the worker's event stream (`Follower`, with its retries), which is
closed once the seq is reached.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Collection

from tui.errors import UnreadableEvent
from tui.link.base import AttachLink, Gone, Live, Reconnecting
from tui.link.follow import Follower
from tui.link.watch import gone_error
from tui.protocol import Event
from tui.protocol.ids import short_id

__all__ = ["history"]


async def history(
    link: AttachLink, until: int, *, after: int = 0, types: Collection[str] | None = None
) -> AsyncIterator[list[Event]]:
    """The events with ``after < seq <= until``, in order, in batches; only those whose type is
    in `types` when given (the others are skipped undecoded where the journal is read here).

    Raises:
        UnreadableEvent: a line that is no event this version can read.
        WorkerGoneError: the session's worker went away for good before `until` was read.
        TuiError: the session could not be read.
    """
    cursor = after
    stored = link.stored(after, until, types) if after < until else None
    if stored is not None:
        try:
            while (batch := await asyncio.to_thread(next, stored, None)) is not None:
                cursor, lines = batch
                events = []
                for line in lines:
                    try:
                        events.append(line.decode())
                    except ValueError as exc:
                        raise UnreadableEvent(
                            f"the journal of session {short_id(link.session_id)} holds a line this "
                            f"version cannot read (seq {line.seq}): {exc}"
                        ) from exc
                if events:
                    yield events
        finally:
            with contextlib.suppress(ValueError):  # still reading in its thread: its file is let go with it
                stored.close()
    if cursor >= until:
        return
    follower = Follower(link, cursor)
    try:
        async for item in follower:
            if isinstance(item, Gone):
                raise gone_error(item)
            if isinstance(item, (Live, Reconnecting)):
                continue  # the follower retries by itself
            if item.seq > until:
                return
            if types is None or item.type in types:
                yield [item]
            if item.seq >= until:
                return
    finally:
        await follower.aclose()
