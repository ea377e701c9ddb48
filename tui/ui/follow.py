"""Where the app gets its events: the one event follower of `tui.link`.

Until `tui.link.follow.Follower` exists this module keeps a minimal stand-in with the same shape
(an async iterator of events and `LinkState` changes), so the app has a single place to switch.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

from tui.errors import NotFound, Refused, TuiError
from tui.link.base import AttachLink, Gone, LinkState, Live, Reconnecting
from tui.protocol import Event

__all__ = ["follow"]


def follow(link: AttachLink, cursor: int) -> AsyncIterator[Event | LinkState]:
    """Follow `link` from `cursor`: events in order, each once, and the link's state changes."""
    try:
        from tui.link.follow import Follower  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return _follow(link, cursor)
    return Follower(link, cursor)  # type: ignore[no-any-return,unused-ignore]


async def _follow(link: AttachLink, cursor: int) -> AsyncIterator[Event | LinkState]:
    attempt = 0
    delay = link.backoff.first
    while True:
        delivered = False
        try:
            async for event in link.open_stream(cursor):
                if event.seq and event.seq <= cursor:
                    continue
                if not delivered:
                    delivered = True
                    attempt, delay = 0, link.backoff.first
                yield event
                cursor = max(cursor, event.seq)
            reason = "the stream ended"
        except (Refused, NotFound) as exc:
            yield Gone(str(exc), exc.exit_code if isinstance(exc, Refused) else 4)
            return
        except TuiError as exc:
            reason = str(exc)
        located = await link.locate()
        if located.status == "gone":
            yield Gone(located.reason or reason, located.exit_code)
            return
        attempt += 1
        if located.status == "live" and attempt == 1:
            yield Live()
            continue
        jitter = 1 + random.uniform(-link.backoff.jitter, link.backoff.jitter)
        wait = min(delay * jitter, link.backoff.cap)
        yield Reconnecting(attempt=attempt, delay=wait, reason=reason)
        await asyncio.sleep(wait)
        delay = min(delay * link.backoff.factor, link.backoff.cap)
        if located.status == "live" or (await link.locate()).status == "live":
            yield Live()
