"""The page's server side: one `Attachment` per session a page follows, beside the fan-out.

`Pages` keeps, for each session a browser page follows through ``GET …/changes``, one
`Followed`: an `Attachment` (`tui.link.attachment`) on a `ServedLink`, whose events are the
session's shared stream of the fan-out (`tui.web.fanout`: no stream of its own to the worker),
and a `PageView` (`tui.link.page`) that words each batch of its changes once for every page.
The changes made are kept in a ring, each numbered ``EPOCH-N`` (the epoch names this attachment:
a new one, after ``tui web`` restarted or the last page left, numbers afresh). A page sends the
last id it drew as its cursor (``Last-Event-ID``) and is sent what follows it: no gap, no repeat.
A page with no cursor, one of another epoch, or one older than the ring gets a snapshot first
(the session as the changes so far left it), numbered as the last change it stands for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket as sockets
from collections.abc import AsyncIterator, Callable

import anyio
import anyio.abc

from tui.access.engines import engine_for
from tui.errors import TuiError, WorkerUnavailable
from tui.link.attachment import Attachment
from tui.link.base import Live
from tui.link.launch import bridge_endpoint
from tui.link.local import LocalLink
from tui.link.page import PageView
from tui.protocol import Event, decode_event
from tui.protocol.events import ShareChanged
from tui.protocol.ids import make_client_id
from tui.protocol.messages import Transcript
from tui.protocol.page import PageChange
from tui.protocol.wording import unshared_transcript
from tui.redact import redact_frame, redact_json
from tui.store import StatePaths
from tui.web.fanout import FanOuts, Shared, _messages, _seq, private
from tui.web.forward import KEEPALIVE, OpenStream, RawStream
from tui.web.streaming import Emit, FollowerStream

__all__ = ["PAGE_TURNS", "ChangesResponse", "Followed", "Pages", "ServedLink"]

log = logging.getLogger("tui.web.changes")

PAGE_TURNS = 20
"""Ended turns an attachment keeps for a page's snapshot (older ones: ``GET …/turns``)."""
RING = 4096
"""Changes kept for pages that are behind or that come back after a dropped stream."""
RING_BYTES = 8 * 1024 * 1024
LINGER = 30.0
"""Seconds an attachment stays after its last page left, so that a page coming back resumes."""


class ServedLink(LocalLink):
    """A session of this machine as the web bridge follows it: its events read from the fan-out's
    shared stream of the session (one stream from the worker for every follower), its requests
    and its worker found and restarted as `LocalLink` does. Unless it is for the owner's pages
    (`everything`), it is never given a share made or revoked (`tui.web.fanout.private`): not as
    an event, not as a transcript's line."""

    def __init__(
        self, state: StatePaths, session_id: str, fanouts: FanOuts, *, everything: bool = True
    ) -> None:
        host = sockets.gethostname()
        super().__init__(
            state, session_id, client_id=make_client_id("web", host, os.getpid()), engine=engine_for(state)
        )
        self.fanouts = fanouts
        self.everything = everything

    async def transcript(
        self,
        limit: int = 50,
        *,
        before: str | None = None,
        after: str | None = None,
        around: str | None = None,
        first: bool = False,
    ) -> Transcript:
        said = await super().transcript(limit, before=before, after=after, around=around, first=first)
        return said if self.everything else unshared_transcript(said)

    def open_stream(self, cursor: int) -> AsyncIterator[Event | Live]:
        return self._events(cursor)

    async def _events(self, cursor: int) -> AsyncIterator[Event | Live]:
        path = self.bridge_client().socket_path
        car = self.engine.locate(self.session_id)
        if car is not None and car.address is not None:
            path = bridge_endpoint(car, self.paths)  # a worker on a cluster's node: over TCP
        assert path is not None
        shared = await self.fanouts.join(path, cursor)
        try:
            yield Live()
            sent = cursor
            while True:
                if sent < shared.base:  # older than the ring: the journal, from a stream of its own
                    reached = None
                    async for event in _replay(shared, sent):
                        if self.everything or not isinstance(event, ShareChanged):
                            yield event
                        reached = sent = event.seq
                    if reached is None or sent < shared.base:
                        return
                    continue
                changed = shared.changed
                got = shared.after(sent)
                if got is not None:
                    chunk, _ = got
                    for message in chunk.split(b"\n\n"):
                        seq = _seq(message) if message else None
                        if seq is None or seq <= sent:
                            continue
                        if self.everything or not private(message):
                            yield _decode(message)
                        sent = seq
                elif shared.ended:
                    return
                else:
                    await changed.wait()
        finally:
            with anyio.CancelScope(shield=True):
                await self.fanouts.leave(shared)


def _decode(message: bytes) -> Event:
    at = message.index(b"\ndata: ") + 7
    end = message.find(b"\n", at)
    return decode_event(message[at:] if end < 0 else message[at:end])


async def _replay(shared: Shared, sent: int) -> AsyncIterator[Event]:
    """The journal after `sent`, until the ring holds what comes next."""
    stream = await RawStream.open(shared.socket, shared.path, b"cursor=%d" % sent, {"X-Tui-Fanout": "shared"})
    try:
        if stream.status_code != 200:
            raise WorkerUnavailable(f"the worker answered {stream.status_code} to a replay")
        rest = b""
        async for chunk in stream.aiter_raw():
            messages, rest = _messages(rest, chunk)
            for message in messages:
                seq = _seq(message)
                if seq is not None and seq > sent:
                    yield _decode(redact_frame(message))
                    sent = seq
            if sent >= shared.base:
                return
    except OSError as exc:
        raise WorkerUnavailable(f"the worker's stream dropped: {exc}") from exc
    finally:
        await stream.aclose()


def frame(cursor: str, change: PageChange) -> bytes:
    """One change as an SSE message, its secrets taken out (`tui.redact`): the events it is made
    from are redacted in the fan-out's ring already; a snapshot's turns come from the worker."""
    data = redact_json(change.wire())
    return b"id: %s\nevent: %s\ndata: %s\n\n" % (cursor.encode(), change.type.encode(), data)


class Followed:
    """One session followed by pages: its attachment, its `PageView`, the ring of changes made.
    The owner's pages and the participants' follow a session through two of them (`everything`:
    the owner's, which says the shares made and revoked)."""

    def __init__(
        self,
        state: StatePaths,
        session_id: str,
        fanouts: FanOuts,
        gone: Callable[[Followed], None],
        *,
        everything: bool = True,
    ) -> None:
        self.session_id = session_id
        self.everything = everything
        self.epoch = secrets.token_hex(4)
        self.link = ServedLink(state, session_id, fanouts, everything=everything)
        self.attachment = Attachment(self.link, page=PAGE_TURNS, keep_turns=PAGE_TURNS)
        self.view = PageView(self.attachment)
        self.made = 0
        """How many changes were made (the last one's number)."""
        self.base = 0
        """Every change after this number is in the ring."""
        self.ring: list[bytes] = []
        """The changes after `base`, in order: the one numbered N is at N - base - 1."""
        self.size = 0
        self.ended = False
        self.followers = 0
        self.changed = asyncio.Event()
        self.attached = asyncio.Event()
        self._gone = gone
        self._linger: asyncio.TimerHandle | None = None
        self._closing: asyncio.Task[None] | None = None
        self._task = asyncio.create_task(self._run(), name=f"page attachment {session_id[:8]}")

    def cursor(self, number: int | None = None) -> str:
        return f"{self.epoch}-{self.made if number is None else number}"

    async def _run(self) -> None:
        try:
            async for batch in self.attachment:
                made = self.view.changes(batch)
                for change in made:
                    if change.snapshot:
                        self.attached.set()
                    self.made += 1
                    data = frame(self.cursor(), change)
                    self.ring.append(data)
                    self.size += len(data)
                if len(self.ring) > RING or self.size > RING_BYTES:
                    self._trim()
                if made:
                    self._wake()
        except asyncio.CancelledError:
            raise
        except (TuiError, EOFError, OSError) as exc:
            log.warning("following session %s for its pages stopped: %s", self.session_id[:8], exc)
        except Exception:
            log.exception("following session %s for its pages failed", self.session_id[:8])
        finally:
            self.ended = True
            self.attached.set()
            self._wake()
            self._gone(self)

    def _trim(self) -> None:
        """Drop the older half of the ring (a page that needed them gets a snapshot)."""
        drop = len(self.ring) // 2 or 1
        self.base += drop
        del self.ring[:drop]
        self.size = sum(len(data) for data in self.ring)

    def _wake(self) -> None:
        changed, self.changed = self.changed, asyncio.Event()
        changed.set()

    def start_from(self, cursor: str) -> tuple[bytes | None, int]:
        """Where a page whose last change was `cursor` starts: a snapshot to send first (None when
        the ring holds what follows its cursor) and the number it stands at."""
        epoch, _, number = cursor.partition("-")
        if epoch == self.epoch and number.isdigit() and self.base <= int(number) <= self.made:
            return None, int(number)
        return frame(self.cursor(), self.view.snapshot()), self.made

    def after(self, number: int) -> bytes | None:
        """The changes after `number` as one chunk (None: nothing newer yet)."""
        if number >= self.made:
            return None
        at = number - self.base
        return self.ring[at] if at == len(self.ring) - 1 else b"".join(self.ring[at:])

    def join(self) -> None:
        self.followers += 1
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None

    def leave(self) -> None:
        self.followers -= 1
        if self.followers <= 0 and not self.ended:
            self._linger = asyncio.get_running_loop().call_later(LINGER, self._end)

    def _end(self) -> None:
        if self.followers <= 0:
            self._gone(self)
            self._closing = asyncio.create_task(self.close())

    async def close(self) -> None:
        if self._linger is not None:
            self._linger.cancel()
        self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task
        await self.attachment.close()
        await self.link.close()


class Pages:
    """The attachments of every session pages follow, one per session."""

    def __init__(self, state: StatePaths, fanouts: FanOuts) -> None:
        self.state = state
        self.fanouts = fanouts
        self._followed: dict[tuple[str, bool], Followed] = {}

    def _gone(self, followed: Followed) -> None:
        key = (followed.session_id, followed.everything)
        if self._followed.get(key) is followed:
            del self._followed[key]

    async def join(self, session_id: str, *, everything: bool = True) -> Followed:
        """The session's attachment (made when there is none, and read up to its first state),
        counting one more page; `everything` for the owner's pages, else the participants' one."""
        key = (session_id, everything)
        followed = self._followed.get(key)
        if followed is None or followed.ended:
            followed = Followed(self.state, session_id, self.fanouts, self._gone, everything=everything)
            self._followed[key] = followed
        followed.join()
        try:
            await followed.attached.wait()
        except BaseException:
            followed.leave()
            raise
        return followed

    async def close(self) -> None:
        for followed in list(self._followed.values()):
            self._gone(followed)
            await followed.close()


class ChangesResponse(FollowerStream):
    """One page's stream of changes: a snapshot first when its cursor is not in the ring, then
    every change after it; its presence stream keeps it counted as attached; a keepalive when
    quiet; endable from outside (revoked token, server stopping)."""

    def __init__(
        self,
        followed: Followed,
        cursor: str,
        presence: RawStream,
        handle: OpenStream,
        *,
        keepalive: float = KEEPALIVE,
        on_end: Callable[[OpenStream], None] | None = None,
    ) -> None:
        super().__init__(presence, handle, keepalive=keepalive, on_end=on_end)
        self.followed = followed
        self.cursor = cursor

    async def _pump(self, emit: Emit) -> None:
        followed = self.followed
        first, sent = followed.start_from(self.cursor)
        if first is not None:
            await emit(first)
        while True:
            if sent < followed.base:  # the ring moved past this page: the state now
                first, sent = followed.start_from("")
                assert first is not None
                await emit(first)
            changed = followed.changed
            chunk = followed.after(sent)
            if chunk is not None:
                sent = followed.made
                await emit(chunk)
            elif followed.ended:
                break
            else:
                await changed.wait()

    async def _listen(self, emit: Emit) -> None:
        with contextlib.suppress(OSError):
            async for _ in self.presence.aiter_raw():
                pass
        # The worker is leaving or gone: the page comes back with its cursor for what follows.

    async def _leave(self) -> None:
        self.followed.leave()
