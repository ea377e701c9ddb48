"""One worker stream per session, shared by every follower of it through `tui web`.

Each event arrives once from the worker and is kept, as the SSE message the worker made, in a
bounded ring of recent events; each follower sends from its own cursor what the ring holds after
it, several events in one write when it is behind. A follower whose cursor is older than the ring
(it came from far back, or its client read too slowly and the ring moved past it) reads the
journal from its cursor on a stream of its own until it reaches the ring, then joins it: no gap
and no repeat. Who is attached stays the worker's to count: each follower also holds a
``presence`` stream, which carries no events (`tui.worker.bridge`).

A follower that has sent everything the ring holds, on a connection the server lets it write to
directly (`tui.web.wire`), waits as a `Direct` of the shared stream: each new event is framed once
(the owner's bytes and a participant's, chunked or not) and written to every such follower's
transport in one pass, with no task woken and no ASGI layer per follower. One that cannot be
written now (its transport paused by a client reading slowly, a ping or notice of its own being
sent, its client gone) is let go and goes on from its own task as before: it reads the ring from
where it is, waits for its client, and falls behind onto the journal if it must.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from bisect import bisect_right
from collections.abc import Callable

from tui.errors import WorkerUnavailable
from tui.redact import HOLD, StreamRedactor, load_rules
from tui.web.forward import KEEPALIVE, OpenStream, RawStream, _unavailable
from tui.web.streaming import Emit, FollowerStream
from tui.web.wire import Wire, chunk

__all__ = ["Direct", "FanOuts", "FollowResponse", "Shared", "private"]

log = logging.getLogger("tui.web.fanout")

RING = 4096
"""Events a shared stream keeps for followers that are behind."""
RING_BYTES = 8 * 1024 * 1024


def _messages(rest: bytes, chunk: bytes) -> tuple[list[bytes], bytes]:
    """The whole SSE messages in what arrived (each without its blank line), and the rest."""
    parts = (rest + chunk if rest else chunk).split(b"\n\n")
    return parts, parts.pop()


_PRIVATE = b"\nevent: share_changed\n"


def private(message: bytes) -> bool:
    """Whether an event's message is the owner's alone: a share made or revoked, which no
    participant is sent (nor told of through the page, a transcript or an export)."""
    return _PRIVATE in message[:64]


def _seq(message: bytes) -> int | None:
    """The id of an event's message; None for a comment (``: ping``)."""
    if not message.startswith(b"id: "):
        return None
    return int(message[4 : message.index(b"\n")])


class Direct:
    """A caught-up follower the shared stream writes its events to itself (`Shared.hold`)."""

    __slots__ = ("chunked", "everything", "let_go", "sending", "sent", "wire", "wrote")

    def __init__(self, wire: Wire, sending: asyncio.Lock, *, everything: bool, chunked: bool) -> None:
        self.wire = wire
        self.chunked = chunked
        """How its body is framed (`Wire.chunked`)."""
        self.sending = sending
        """The follower's own `emit` holds it while it writes: no event goes in between."""
        self.everything = everything
        self.sent = 0
        """The seq of the last event the follower was sent (or passed over, being private)."""
        self.wrote = 0.0
        """When an event was last written to it (monotonic seconds)."""
        self.let_go = asyncio.Event()
        """Set when the shared stream stops writing to it: its own task goes on from `sent`."""


class Shared:
    """A session's one stream from its worker and the ring of its recent events."""

    def __init__(self, socket: str, path: str, gone: Callable[[Shared], None]) -> None:
        self.socket = socket
        self.path = path
        self._gone = gone
        self.seqs: list[int] = []
        self.frames: list[bytes] = []
        self.size = 0
        self.base = 0
        """Every event after this seq up to `last` is in the ring."""
        self.last = 0
        self.ended = False
        self.followers = 0
        self.changed = asyncio.Event()
        self.private: set[int] = set()
        """The seqs in the ring of the events a participant is not sent (`private`)."""
        self.held: dict[Direct, None] = {}
        """The caught-up followers written to in one pass as each event arrives, in the order
        they came."""
        self.redactor = StreamRedactor()
        """Every event is kept in the ring with its secrets taken out (`tui.redact`): what a
        follower of `tui web` is sent never holds them."""
        self._release: asyncio.TimerHandle | None = None
        self._held: bytes | None = None
        self._upstream: RawStream | None = None
        self._reader: asyncio.Task[None] | None = None
        self.opening: asyncio.Task[None] | None = None

    async def open(self, cursor: int) -> None:
        self.base = self.last = cursor
        upstream = await RawStream.open(
            self.socket, self.path, b"cursor=%d" % cursor, {"X-Tui-Fanout": "shared"}
        )
        if upstream.status_code != 200:
            body = await upstream.aread()
            await upstream.aclose()
            raise ValueError(f"the worker answered {upstream.status_code}: {body[:200]!r}")
        self._upstream = upstream
        self._reader = asyncio.create_task(self._read(upstream))

    async def _read(self, upstream: RawStream) -> None:
        rest = b""
        try:
            async for chunk in upstream.aiter_raw():
                messages, rest = _messages(rest, chunk)
                kept: list[bytes] = []
                for message in messages:
                    seq = _seq(message)
                    if seq is None or seq <= self.last:
                        continue
                    self.last = seq
                    kept.extend(self.redactor.feed(message))
                self._keep(kept)
        except OSError:
            pass
        finally:
            self._keep(self.redactor.flush())
            self.ended = True
            for follower in list(self.held):
                self._let_go_of(follower)
            self._wake()
            self._gone(self)
            await upstream.aclose()

    def _keep(self, messages: list[bytes]) -> None:
        """Put redacted messages in the ring and wake the followers; a chunk the redactor holds
        back is let go `HOLD` seconds after it was held if nothing came to complete its line."""
        held = self.redactor.held
        if held is not self._held:
            if self._release is not None:
                self._release.cancel()
                self._release = None
            if held is not None:
                self._release = asyncio.get_running_loop().call_later(HOLD, self._let_go)
            self._held = held
        if not messages:
            return
        before = self.seqs[-1] if self.seqs else self.base
        frames = []
        for message in messages:
            frame = message + b"\n\n"
            seq = _seq(message) or 0
            mine = private(message)
            if mine:
                self.private.add(seq)
            self.seqs.append(seq)
            self.frames.append(frame)
            frames.append((mine, frame))
            self.size += len(frame)
        if len(self.frames) > RING or self.size > RING_BYTES:
            self._trim()
        if self.held:
            self._write_held(before, frames)
        self._wake()

    def _write_held(self, before: int, frames: list[tuple[bool, bytes]]) -> None:
        """Write the events just kept (`frames`, each with whether it is `private`; they follow
        seq `before`) to every held follower that was sent everything before them and can be
        written now; let go of the others."""
        last = self.seqs[-1]
        bodies: dict[tuple[bool, bool], bytes] = {}
        now = time.monotonic()
        for follower in list(self.held):
            wire = follower.wire
            if follower.sent != before or follower.sending.locked() or not wire.writable:
                self._let_go_of(follower)
                continue
            key = (follower.everything, follower.chunked)
            body = bodies.get(key)
            if body is None:
                body = b"".join(f for mine, f in frames if follower.everything or not mine)
                body = bodies[key] = chunk(body) if body and follower.chunked else body
            if body:
                try:
                    wire.transport.write(body)
                except (OSError, RuntimeError):
                    self._let_go_of(follower)
                    continue
                follower.wrote = now
            follower.sent = last

    def _let_go_of(self, follower: Direct) -> None:
        del self.held[follower]
        follower.let_go.set()

    async def hold(self, follower: Direct, sent: int) -> int:
        """Write each new event to `follower` (which was sent everything up to `sent`, all the
        ring holds) until it cannot be written or the stream ends; the seq it was sent up to."""
        follower.sent = sent
        follower.let_go.clear()
        self.held[follower] = None
        try:
            await follower.let_go.wait()
        finally:
            self.held.pop(follower, None)
        return follower.sent

    def _let_go(self) -> None:
        self._release = None
        self._keep(self.redactor.flush())

    def _trim(self) -> None:
        drop = len(self.frames) // 2
        self.base = self.seqs[drop - 1]
        del self.seqs[:drop]
        del self.frames[:drop]
        self.size = sum(len(f) for f in self.frames)
        self.private = {seq for seq in self.private if seq > self.base}

    def _wake(self) -> None:
        changed, self.changed = self.changed, asyncio.Event()
        changed.set()

    def after(self, sent: int, *, everything: bool = True) -> tuple[bytes, int] | None:
        """What the ring holds after `sent` as one chunk, and the seq it ends at; None when nothing
        newer is here yet. `sent` must not be older than `base`. Without `everything` (a
        participant's stream) the `private` events are left out of the chunk (which may then be
        empty)."""
        at = bisect_right(self.seqs, sent)
        if at == len(self.frames):
            return None
        if not everything and self.private and max(self.private) > sent:
            kept = zip(self.frames[at:], self.seqs[at:], strict=True)
            return b"".join(frame for frame, seq in kept if seq not in self.private), self.seqs[-1]
        chunk = self.frames[at] if at == len(self.frames) - 1 else b"".join(self.frames[at:])
        return chunk, self.seqs[-1]

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        elif self._upstream is not None:
            await self._upstream.aclose()


class FanOuts:
    """The shared streams of every session being followed, one per worker socket."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._shared: dict[str, Shared] = {}
        self._rules: asyncio.Future[None] | None = None

    def _gone(self, shared: Shared) -> None:
        if self._shared.get(shared.socket) is shared:
            del self._shared[shared.socket]

    async def join(self, socket: str, at: int) -> Shared:
        """The socket's shared stream (opened at `at` when there is none), counting one more follower.

        Raises:
            WorkerUnavailable: the worker could not be reached (``no_worker``).
        """
        shared = self._shared.get(socket)
        if shared is None or shared.ended:
            if self._rules is None:
                # Every event is redacted: the detectors are made now, in a thread, not when the
                # first event arrives and every follower would wait behind them.
                self._rules = asyncio.get_running_loop().run_in_executor(None, load_rules)
            shared = Shared(socket, self.path, self._gone)
            self._shared[socket] = shared
            shared.opening = asyncio.create_task(shared.open(at))
        assert shared.opening is not None
        try:
            await asyncio.shield(shared.opening)
        except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError) as exc:
            self._gone(shared)
            raise _unavailable(exc) from exc
        shared.followers += 1
        return shared

    async def leave(self, shared: Shared) -> None:
        shared.followers -= 1
        if shared.followers <= 0:
            self._gone(shared)
            await shared.close()

    async def close(self) -> None:
        for shared in list(self._shared.values()):
            self._gone(shared)
            await shared.close()


class FollowResponse(FollowerStream):
    """One follower's event stream: the shared events from its cursor, its presence stream's
    notices, a keepalive when quiet; endable from outside (revoked token, server stopping)."""

    def __init__(
        self,
        fanouts: FanOuts,
        shared: Shared,
        presence: RawStream,
        cursor: int,
        handle: OpenStream,
        *,
        keepalive: float = KEEPALIVE,
        on_end: Callable[[OpenStream], None] | None = None,
    ) -> None:
        super().__init__(presence, handle, keepalive=keepalive, on_end=on_end)
        self.fanouts = fanouts
        self.shared = shared
        self.cursor = cursor
        self.everything = handle.participant_id is None
        """The owner's stream: every event; a participant's leaves out the `private` ones."""
        self.direct: Direct | None = None

    def _wrote(self) -> float:
        return self.direct.wrote if self.direct is not None else 0.0

    def _direct(self) -> Direct | None:
        """This follower as the shared stream writes to it; None when its connection cannot be
        written to past ASGI (no `Wire`, or no body being sent on it)."""
        if self.direct is None and self.wire is not None:
            chunked = self.wire.chunked
            if chunked is not None:
                self.direct = Direct(self.wire, self.sending, everything=self.everything, chunked=chunked)
        return self.direct

    async def _replay(self, sent: int, emit: Emit) -> int | None:
        """Send the journal after `sent` from a stream of the follower's own until the ring holds
        what comes next; the seq reached, or None when the worker ended that stream."""
        shared = self.shared
        stream = await RawStream.open(
            shared.socket, shared.path, b"cursor=%d" % sent, {"X-Tui-Fanout": "shared"}
        )
        try:
            if stream.status_code != 200:
                return None
            rest = b""
            redactor = StreamRedactor()
            async for chunk in stream.aiter_raw():
                messages, rest = _messages(rest, chunk)
                out = []
                for message in messages:
                    seq = _seq(message)
                    if seq is not None and seq > sent:
                        if self.everything or not private(message):
                            out.extend(redactor.feed(message))
                        sent = seq
                if sent >= shared.base:
                    held = redactor.held
                    if held is not None and (_seq(held) or 0) > shared.base:
                        # The ring has the held chunk (redacted with what follows it): go on there.
                        sent = (_seq(held) or 0) - 1
                    else:
                        out.extend(redactor.flush())
                if out:
                    await emit(b"".join(m + b"\n\n" for m in out))
                if sent >= shared.base:
                    return sent
            return None
        finally:
            await stream.aclose()

    async def _pump(self, emit: Emit) -> None:
        shared, sent = self.shared, self.cursor
        with contextlib.suppress(OSError, WorkerUnavailable):
            while True:
                if sent < shared.base:
                    reached = await self._replay(sent, emit)
                    if reached is None:
                        break
                    sent = reached
                    continue
                changed = shared.changed
                got = shared.after(sent, everything=self.everything)
                if got is not None:
                    chunk, sent = got
                    if chunk:
                        await emit(chunk)
                elif shared.ended:
                    break
                elif (direct := self._direct()) is not None:
                    sent = await shared.hold(direct, sent)
                else:
                    await changed.wait()

    async def _listen(self, emit: Emit) -> None:
        rest = b""
        with contextlib.suppress(OSError):
            async for chunk in self.presence.aiter_raw():
                messages, rest = _messages(rest, chunk)
                for message in messages:
                    if message and message != b": ping":
                        await emit(message + b"\n\n")
        # The worker is leaving or gone: its last events come on the shared stream.

    async def _leave(self) -> None:
        await self.fanouts.leave(self.shared)
