"""The pass-through stream on its own: chunks as they come, keepalive pings, ended from outside."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import httpx

from tui.web.forward import OpenStream, StreamResponse


class _Slow(httpx.AsyncByteStream):
    """A worker's body: one event, then silence until told to go on."""

    def __init__(self, go_on: asyncio.Event) -> None:
        self.go_on = go_on

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b"id: 1\nevent: note\ndata: {}\n\n"
        await self.go_on.wait()
        yield b"id: 2\nevent: note\ndata: {}\n\n"


class Sent(list[bytes]):
    """What the stream sent, with an event to wait on for more."""

    def __init__(self) -> None:
        super().__init__()
        self.more = asyncio.Event()

    async def until(self, enough: Callable[[Sent], bool]) -> None:
        async with asyncio.timeout(10):
            while not enough(self):
                self.more.clear()
                await self.more.wait()


async def _serve(response: StreamResponse, sent: Sent, done: asyncio.Event) -> None:
    async def receive() -> dict[str, object]:
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, object]) -> None:
        if message["type"] == "http.response.body":
            sent.append(bytes(message.get("body", b"")))  # type: ignore[arg-type]
            sent.more.set()

    await response({"type": "http"}, receive, send)  # type: ignore[arg-type]


async def test_silence_gets_keepalive_pings_between_whole_events() -> None:
    go_on, done = asyncio.Event(), asyncio.Event()
    upstream = httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=_Slow(go_on))
    handle = OpenStream("digest", "s" * 16)
    sent = Sent()
    task = asyncio.create_task(_serve(StreamResponse(upstream, handle, keepalive=0.05), sent, done))
    await sent.until(lambda s: s.count(b": ping\n\n") >= 2)
    go_on.set()
    async with asyncio.timeout(10):
        await task
    body = b"".join(sent)
    assert body.startswith(b"id: 1\n")
    assert body.count(b"id: 2\n") == 1
    assert body.endswith(b"id: 2\nevent: note\ndata: {}\n\n")


async def test_closing_the_handle_ends_the_stream() -> None:
    go_on, done = asyncio.Event(), asyncio.Event()
    upstream = httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=_Slow(go_on))
    handle = OpenStream("digest", "s" * 16, participant_id="p1")
    ended: list[OpenStream] = []
    sent = Sent()
    response = StreamResponse(upstream, handle, keepalive=60, on_end=ended.append)
    task = asyncio.create_task(_serve(response, sent, done))
    await sent.until(bool)
    handle.close("token revoked")
    async with asyncio.timeout(10):
        await task
    assert ended == [handle]
    assert sent[-1] == b""
    assert b"id: 2" not in b"".join(sent)
