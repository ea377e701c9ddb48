"""The event follower: the one code that follows a session's events (protocol.md, "Followers").

`Follower(link, cursor)` is an async iterator of events and `LinkState` changes. It keeps one
stream open, applies events strictly in order (a ``seq`` at or below its cursor is skipped) and
moves its cursor only once the consumer took the event. When the stream drops it asks the link
where the worker is: live, reconnect at once; starting, back off and say so with `Reconnecting`
(the delay to show as a countdown); gone, yield `Gone` and stop.

A worker that said ``worker_leaving`` is gone when its stream ends after that event: a replayed
``worker_leaving`` followed by a newer ``worker_started`` is history, not an ending.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from tui.errors import (
    InvalidRequest,
    NotFound,
    Refused,
    TuiError,
    Unreachable,
    UnreadableEvent,
    WorkerUnavailable,
)
from tui.link.base import AttachLink, Backoff, Gone, LinkState, Live, Located, Reconnecting
from tui.protocol import Event, WorkerLeaving, WorkerStarted
from tui.protocol.ids import short_id

__all__ = ["Follower", "Retries", "backoff_delay"]


def backoff_delay(backoff: Backoff, attempt: int, *, rng: random.Random | None = None) -> float:
    """The wait before try `attempt` (1-based): first * factor^(attempt-1), capped, ± jitter."""
    base = min(backoff.cap, backoff.first * backoff.factor ** max(0, attempt - 1))
    spread = (rng or random).uniform(-backoff.jitter, backoff.jitter)
    return max(0.0, min(backoff.cap, base * (1.0 + spread)))


class Retries:
    """The one retry policy of a client: each try waits `backoff_delay` (jitter included), at
    least the link's last ``retry:`` hint; once no worker was live for the link's
    ``no_worker_timeout`` it gives up with `Gone`. `Follower` follows with it, and
    `tui.link.attachment.Attachment` fetches its first transcript with it.

    The caller waits each `Reconnecting.delay` its own way (a client may cut it short: Ctrl+R).
    """

    def __init__(self, link: AttachLink) -> None:
        self.link = link
        self.attempt = 0
        self._no_worker_since: float | None = None

    def live(self) -> None:
        """A worker answered: the no-worker clock stops."""
        self._no_worker_since = None

    def reset(self) -> None:
        """Something was delivered: the next drop starts from the first delay again."""
        self.attempt = 0
        self._no_worker_since = None

    def next(self, reason: str) -> Reconnecting | Gone:
        """The next try (its delay), or `Gone` once no worker was live for too long."""
        now = time.monotonic()
        if self._no_worker_since is None:
            self._no_worker_since = now
        elif now - self._no_worker_since > self.link.no_worker_timeout:
            again = self.link.command("attach", short_id(getattr(self.link, "session_id", "")))
            waited = self.link.no_worker_timeout
            return Gone(f"no worker was live for {waited:g} s ({reason}); `{again}` tries again")
        self.attempt += 1
        delay = backoff_delay(self.link.backoff, self.attempt)
        if self.link.retry_hint is not None:
            delay = max(delay, self.link.retry_hint)
        return Reconnecting(self.attempt, delay, reason)


class Follower:
    """Follow one session's events from `cursor`, across dropped streams and restarted workers.

    Args:
        link: where the session is.
        cursor: the last seq already applied (0: from the start of the journal).
        sleep: how to wait between tries (tests may pass their own).

    Attributes:
        cursor: the seq of the last event the consumer took.
        epoch: the epoch of the worker being followed (0 until known).
        state: the last `LinkState` yielded.
    """

    def __init__(
        self,
        link: AttachLink,
        cursor: int = 0,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.link = link
        self.cursor = cursor
        self.epoch = 0
        self.state: LinkState | None = None
        self._sleep = sleep
        self._iter: AsyncIterator[Event | LinkState] | None = None

    def __aiter__(self) -> Follower:
        return self

    async def __anext__(self) -> Event | LinkState:
        if self._iter is None:
            self._iter = self._run()
        return await self._iter.__anext__()

    async def aclose(self) -> None:
        """Stop following (closes the open stream)."""
        if self._iter is not None and hasattr(self._iter, "aclose"):
            await self._iter.aclose()

    def _live(self, version: str, epoch: int, disk_full: str | None = None) -> Live | None:
        """The `Live` to yield, or None when the consumer already knows this worker is live (and
        whether its disk is full: `disk_full` None keeps what is known)."""
        known = self.state.disk_full if isinstance(self.state, Live) else ""
        disk = known if disk_full is None else disk_full
        if isinstance(self.state, Live) and (not epoch or epoch == self.epoch) and disk == known:
            return None
        self.epoch = max(self.epoch, epoch)
        if not version and isinstance(self.state, Live):
            version = self.state.version
        self.state = Live(version, self.epoch, disk)
        return self.state

    async def _locate(self) -> Located:
        try:
            return await self.link.locate()
        except (Refused, NotFound) as exc:
            code = exc.exit_code if isinstance(exc, Refused) else WorkerUnavailable.exit_code
            return Located("gone", str(exc), code)
        except (WorkerUnavailable, Unreachable) as exc:
            return Located("starting", str(exc))

    async def _run(self) -> AsyncIterator[Event | LinkState]:
        retries = Retries(self.link)
        reason = "connecting"
        located = await self._locate()
        while True:
            if located.status == "gone":
                self.state = Gone(located.reason or "the session's worker is gone", located.exit_code)
                yield self.state
                return
            if located.status == "live":
                delivered = False
                leaving: WorkerLeaving | None = None
                try:
                    async for item in self.link.open_stream(self.cursor):
                        if isinstance(item, Live):
                            # The stream is open: a worker is live, whatever it sends next.
                            retries.live()
                            live = self._live(
                                item.version or located.version, item.epoch or located.epoch, item.disk_full
                            )
                            if live is not None:
                                yield live
                            continue
                        event = item
                        if event.seq <= self.cursor:
                            continue
                        if not delivered:
                            delivered = True
                            retries.reset()
                            live = self._live(located.version, located.epoch)
                            if live is not None:
                                yield live
                        leaving = event if isinstance(event, WorkerLeaving) else None
                        yield event
                        self.cursor = event.seq
                        if isinstance(event, WorkerStarted) and event.epoch > self.epoch:
                            self.epoch = event.epoch
                            self.state = Live(event.version, event.epoch)
                            yield self.state
                    reason = "the stream ended"
                except (WorkerUnavailable, Unreachable) as exc:
                    reason = str(exc)
                except (Refused, NotFound) as exc:
                    code = exc.exit_code if isinstance(exc, Refused) else WorkerUnavailable.exit_code
                    self.state = Gone(str(exc), code)
                    yield self.state
                    return
                except UnreadableEvent as exc:
                    # The same line would come again on every reconnect: stop, and say which.
                    self.state = Gone(str(exc), 1)
                    yield self.state
                    return
                except InvalidRequest as exc:
                    # A cursor ahead of the journal cannot be followed without a gap.
                    self.state = Gone(f"{exc}; attach again to start from the journal", 1)
                    yield self.state
                    return
                except TuiError as exc:
                    reason = str(exc)
                if leaving is not None and not leaving.restarting:
                    why = leaving.reason or "stopped"
                    again = self.link.command("attach", short_id(getattr(self.link, "session_id", "")))
                    self.state = Gone(f"the worker stopped ({why}); `{again}` starts it again")
                    yield self.state
                    return
                if delivered:
                    located = await self._locate()
                    if located.status == "live":
                        continue
                # A stream that delivered nothing and dropped: back off before the next try.
            else:
                reason = located.reason or "the worker is starting"
            step = retries.next(reason)
            self.state = step
            yield step
            if isinstance(step, Gone):
                return
            await self._sleep(step.delay)
            located = await self._locate()
