"""Live events to every open ``/events`` stream, each through its own bounded queue.

Publishing never waits: a follower whose client stopped reading fills its queue, which is then
emptied and marked *behind*; its stream goes back to reading the journal from the last event it
sent. One stalled client therefore neither holds the others back nor grows memory past
``limit`` events or ``limit_bytes`` bytes.

Each stream says what it has written (`Subscription.wrote`), so a turn can wait until what it said
has left for every follower (`Hub.written`): the model agent does so after the first text of a
reply, before it reads more of the provider's stream.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, deque
from typing import Final, NamedTuple

from tui.protocol import Presence
from tui.protocol.ids import client_label
from tui.store import JournalLine

__all__ = ["BEHIND", "CLOSED", "Frame", "Hub", "Subscription", "sse_frame"]

log = logging.getLogger("tui.worker.hub")


class _Signal:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


BEHIND: Final = _Signal("BEHIND")
"""The follower fell too far behind: read the journal from the last seq sent."""
CLOSED: Final = _Signal("CLOSED")
"""The worker is leaving: end the stream."""


def sse_frame(line: JournalLine) -> bytes:
    """The SSE message of one event: ``id``, ``event`` and its stored JSON as ``data``."""
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (line.seq, line.type.encode(), line.raw)


class Frame(NamedTuple):
    """One event as every stream sends it: made once per event, shared by all followers."""

    seq: int
    data: bytes


class Subscription:
    """One follower's queue of live events."""

    def __init__(
        self,
        client_id: str | None,
        limit: int,
        limit_bytes: int,
        who: Presence | None = None,
        *,
        events: bool = True,
        quiet: bool = False,
        written: int = 0,
    ) -> None:
        self.client_id = client_id
        self.who = who
        """The person whose stream this is (None: not counted as attached)."""
        self.named = not quiet
        """Whether the journal's `status` may name this stream's person: a quiet stream's opening
        writes nothing (a reader), it is named by the next status written for any other reason,
        and its closing writes nothing while it never was."""
        self.events = events
        """Whether events are pushed to it (False: it only says who is attached, and hears notices)."""
        self.limit = limit
        self.limit_bytes = limit_bytes
        self.size = 0
        """Bytes of the queued events."""
        self.items: deque[Frame] = deque()
        self.notices: list[bytes] = []
        """Lines for the stream that are not events (SSE comments: ``: disk_full …``)."""
        self.behind = False
        self.closed = False
        self.dropped = 0
        """How many times this follower fell behind (for logs and tests)."""
        self.written = written
        """The seq of the last event this stream has written to its client (`wrote`)."""
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._wake = asyncio.Event()

    def push(self, frame: Frame) -> None:
        if self.closed:
            return
        if self.behind:
            pass
        elif len(self.items) >= self.limit or self.size + len(frame.data) > self.limit_bytes:
            self.items.clear()
            self.size = 0
            self.behind = True
            self.dropped += 1
            log.info("follower %s fell behind; its stream reads the journal instead", self.client_id or "?")
        else:
            self.items.append(frame)
            self.size += len(frame.data)
        self._wake.set()

    def notice(self, text: bytes) -> None:
        if not self.closed:
            self.notices.append(text)
            self._wake.set()

    def close(self) -> None:
        self.closed = True
        self._wake.set()
        self.release()

    def wrote(self, seq: int) -> None:
        """The stream has written every event up to `seq` to its client's socket."""
        self.written = seq
        if self._waiters:
            self.release(seq)

    def written_to(self, seq: int) -> asyncio.Future[None]:
        """A future set once the stream has written `seq` (or ended)."""
        waiter = asyncio.get_running_loop().create_future()
        if self.written >= seq or self.closed:
            waiter.set_result(None)
        else:
            self._waiters = [(wanted, w) for wanted, w in self._waiters if not w.done()]
            self._waiters.append((seq, waiter))
        return waiter

    def release(self, seq: int | None = None) -> None:
        """Set the waiters for `seq` and before it (None: all of them, the stream ends)."""
        kept: list[tuple[int, asyncio.Future[None]]] = []
        for wanted, waiter in self._waiters:
            if seq is None or wanted <= seq:
                if not waiter.done():
                    waiter.set_result(None)
            else:
                kept.append((wanted, waiter))
        self._waiters = kept

    async def next(self, idle: float) -> list[Frame] | _Signal | bytes | None:
        """Every queued event, or a signal, or a notice, or None when `idle` seconds passed with nothing."""
        if self.notices:
            return self.notices.pop(0)
        if not self.items and not self.behind and not self.closed:
            self._wake.clear()
            try:
                async with asyncio.timeout(idle):  # no task of its own, as `wait_for` makes
                    await self._wake.wait()
            except TimeoutError:
                return None
        if self.closed:
            return CLOSED
        if self.behind:
            self.behind = False
            self.items.clear()
            self.size = 0
            return BEHIND
        batch = list(self.items)
        self.items.clear()
        self.size = 0
        return batch


class Hub:
    """Fans appended events out to the open streams."""

    def __init__(self, limit: int = 4096, limit_bytes: int = 8 * 1024 * 1024) -> None:
        self.limit = limit
        self.limit_bytes = limit_bytes
        self._subs: set[Subscription] = set()
        self._live: set[Subscription] = set()
        """The subscriptions events are pushed to."""
        self.closed = False
        self.published = 0
        """The seq of the last event published."""
        self._present: tuple[frozenset[Subscription], list[Presence]] | None = None
        """Who is attached, and the open streams it was worked out from (the worker asks after
        every event it appends, so it is worked out again only when they change)."""

    def subscribe(
        self, client_id: str | None, who: Presence | None = None, *, events: bool = True, quiet: bool = False
    ) -> Subscription:
        """A new follower; it receives every event published from now on (with `events` False,
        none: it is counted as attached and hears notices, as the web bridge's followers of one
        shared stream are; `quiet`: see `Subscription.named`)."""
        sub = Subscription(
            client_id, self.limit, self.limit_bytes, who, events=events, quiet=quiet, written=self.published
        )
        if self.closed:
            # The worker is leaving: a late stream gets the journal (worker_leaving included), then ends.
            sub.close()
        self._subs.add(sub)
        if events:
            self._live.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._subs.discard(sub)
        self._live.discard(sub)
        sub.release()

    def publish(self, line: JournalLine) -> None:
        """Hand an appended event to every follower (never waits): its SSE message is made once,
        here, and the same bytes go to every stream."""
        self.published = line.seq
        if not self._live:
            return
        frame = Frame(line.seq, sse_frame(line))
        for sub in self._live:
            sub.push(frame)

    async def written(self, at_most: float) -> None:
        """Return once every open stream has written the events published so far to its client,
        or after `at_most` seconds (a follower that stopped reading is not waited for longer)."""
        seq = self.published
        waits = [sub.written_to(seq) for sub in self._live if sub.written < seq and not sub.closed]
        if waits:
            _, late = await asyncio.wait(waits, timeout=at_most)
            for waiter in late:
                waiter.cancel()

    def notice(self, text: bytes) -> None:
        """Send every open stream a line that is not an event (an SSE comment)."""
        for sub in self._subs:
            sub.notice(text)

    def close_all(self) -> None:
        """End every stream (the worker is leaving), and every stream opened from now on."""
        self.closed = True
        for sub in self._subs:
            sub.close()

    def named_all(self) -> None:
        """A status naming everyone attached now was written (or the last one already did)."""
        for sub in self._subs:
            sub.named = True

    @property
    def attached(self) -> list[str]:
        """The client ids of the open streams, each once."""
        return sorted({s.client_id for s in self._subs if s.client_id})

    @property
    def present(self) -> list[Presence]:
        """Who the open streams are for, each name once (owner first, then by name), with what
        each is attached with (each label once, `Presence.streams` counting the streams)."""
        open_now = frozenset(s for s in self._subs if s.who is not None and not s.closed)
        if self._present is None or self._present[0] != open_now:
            self._present = (open_now, self._people(open_now))
        return self._present[1]

    @staticmethod
    def _people(subs: frozenset[Subscription]) -> list[Presence]:
        people: dict[str, Presence] = {}
        via: dict[str, Counter[str]] = {}
        for sub in subs:
            assert sub.who is not None
            people.setdefault(sub.who.name, sub.who)
            via.setdefault(sub.who.name, Counter())[client_label(sub.client_id) or "client"] += 1
        order = {"owner": 0, "collaborator": 1, "viewer": 2}
        # Each label once, with how many streams it stands for: a status grows with the people
        # and what they attach with, not with the streams (1,000 tabs of one person are one entry).
        return [
            p.model_copy(
                update={
                    "via": sorted(via[p.name]),
                    "streams": {label: n for label, n in sorted(via[p.name].items()) if n > 1},
                }
            )
            for p in sorted(people.values(), key=lambda p: (order[p.kind], p.name))
        ]

    @property
    def streams(self) -> int:
        """How many open streams events are sent to."""
        return len(self._live)

    def __len__(self) -> int:
        return len(self._subs)
