"""`BridgeClient`'s requests to a local worker go through `UnixHttp` (tui/link/raw.py): one
connection kept open across requests, one the worker let go of replaced without the caller
seeing it, a chunked answer read whole, a refusal mapped as before, a worker gone said as before;
and its event stream, read off the socket chunk by chunk (`UnixHttp.stream`), not through httpx.
The server here is a plain asyncio server on a Unix socket speaking HTTP/1.1 as uvicorn does."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tui.errors import NotFound, WorkerGone
from tui.link.base import Live, RouteCall
from tui.link.client import BridgeClient
from tui.protocol import TextChunk
from tui.protocol.messages import NoteRequest
from tui.protocol.routes import BRIDGE

Answer = Callable[[str, bytes], bytes]
"""What the server answers a request (its head, its body): the bytes of the answer."""


def _json(status: int, body: object, *, chunked: bool = False, close: bool = False) -> bytes:
    data = json.dumps(body).encode()
    head = [f"HTTP/1.1 {status} X", "content-type: application/json"]
    if close:
        head.append("connection: close")
    if chunked:
        half = len(data) // 2
        payload = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (data[:half], data[half:])) + b"0\r\n\r\n"
        head.append("transfer-encoding: chunked")
    else:
        payload = data
        head.append(f"content-length: {len(data)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + payload


class Server:
    def __init__(self, answer: Answer, *, close_after_each: bool = False) -> None:
        self.answer = answer
        self.close_after_each = close_after_each
        self.connections = 0
        self.seen: list[tuple[str, bytes]] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode()
                length = 0
                for line in head.split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                body = await reader.readexactly(length)
                self.seen.append((head, body))
                writer.write(self.answer(head, body))
                await writer.drain()
                if self.close_after_each:
                    break  # as a server letting an idle kept connection go, without saying so
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def serving(tmp_path: Path, server: Server) -> AsyncIterator[BridgeClient]:
    sock = str(tmp_path / "w.sock")
    listening = await asyncio.start_unix_server(server.serve, sock)
    client = BridgeClient(socket_path=sock, label="the worker of x", timeout=5.0)
    try:
        yield client
    finally:
        await client.close()
        listening.close()


async def test_requests_share_one_kept_connection_with_their_query_and_body(tmp_path: Path) -> None:
    server = Server(lambda head, body: _json(201, {"seq": 7}))
    async with serving(tmp_path, server) as client:
        for text in ("one", "two é"):
            noted = await client.handle(RouteCall(BRIDGE["note"], NoteRequest(text=text), {"now": True}))
            assert noted.seq == 7
    assert server.connections == 1
    first, second = server.seen
    assert first[0].startswith("POST /notes?now=true HTTP/1.1\r\n")
    assert json.loads(second[1])["text"] == "two é"


async def test_a_connection_the_worker_let_go_is_replaced_and_a_chunked_answer_read_whole(
    tmp_path: Path,
) -> None:
    server = Server(lambda head, body: _json(200, {"seq": 3}, chunked=True), close_after_each=True)
    async with serving(tmp_path, server) as client:
        for _ in range(3):
            noted = await client.handle(RouteCall(BRIDGE["note"], NoteRequest(text="x")))
            assert noted.seq == 3
    assert server.connections == 3


async def test_a_refusal_is_its_error_and_a_worker_gone_says_so(tmp_path: Path) -> None:
    refusal = {"error": "not_found", "detail": "no such turn"}
    server = Server(lambda head, body: _json(404, refusal, close=True))
    async with serving(tmp_path, server) as client:
        with pytest.raises(NotFound, match="no such turn"):
            await client.handle(RouteCall(BRIDGE["note"], NoteRequest(text="x")))
    gone = BridgeClient(socket_path=str(tmp_path / "nobody.sock"), label="the worker of x")
    try:
        with pytest.raises(WorkerGone, match="the worker of x is not answering"):
            await gone.handle(RouteCall(BRIDGE["note"], NoteRequest(text="x")))
    finally:
        await gone.close()


def _text(seq: int, text: str) -> bytes:
    data = json.dumps(
        {"seq": seq, "at": "2026-01-01T00:00:00Z", "type": "text", "turn_id": "t-1", "text": text}
    )
    return b"id: %d\nevent: text\ndata: %s\n\n" % (seq, data.encode())


async def test_the_event_stream_is_read_off_the_socket_across_chunks_until_the_worker_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    heads: list[str] = []

    async def stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append((await reader.readuntil(b"\r\n\r\n")).decode())
        head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        writer.write(head.encode())
        one, two, three = _text(1, "a"), _text(2, "b"), _text(3, "c")
        # An event cut across two chunks, two events in one chunk, then a chunk cut short.
        for part in (one[:10], one[10:] + two, three):
            writer.write(b"%x\r\n%s\r\n" % (len(part), part))
        writer.write(b"ff\r\nid: 4")
        await writer.drain()
        writer.close()

    sock = str(tmp_path / "w.sock")
    listening = await asyncio.start_unix_server(stream, sock)
    client = BridgeClient(socket_path=sock, label="the worker of x", timeout=5.0)

    def not_httpx(*args: object, **kwargs: object) -> None:
        raise AssertionError("a local worker's event stream went through httpx")

    monkeypatch.setattr(client._http, "stream", not_httpx)
    got: list[object] = []
    try:
        with pytest.raises(WorkerGone, match="the worker of x is not answering"):
            async for item in client.events(0, client_id="script:x", announce_open=True):
                got.append(item)
    finally:
        await client.close()
        listening.close()
    assert heads[0].startswith("GET /events?cursor=0&client_id=script%3Ax HTTP/1.1\r\n")
    assert "accept: text/event-stream" in heads[0].lower()
    assert isinstance(got[0], Live)
    assert [(e.seq, e.text) for e in got[1:] if isinstance(e, TextChunk)] == [(1, "a"), (2, "b"), (3, "c")]
