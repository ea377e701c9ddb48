"""Followers the fan-out writes to in one pass (`tui.web.wire`) through a real `tui web`: the
owner's and a viewer's, HTTP/1.1 clients (chunked) and HTTP/1.0 ones (the body as it is), one
that goes away mid-turn and one whose client stops reading while megabytes go by. Each gets
exactly its events, in order, once: the viewer never a share's; the slow one all of them when it
reads again (from the ring or the journal, as far behind as it fell)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from urllib.parse import urlencode

import httpx
from helpers import TIMEOUT, eventually, read_sse

from .conftest import Web, wake

MARK = "every follower heard the turn"
PROGRAM = (
    "import sys, time\n"
    "for i in range(16):\n"
    "    sys.stdout.write(('x' * 1023 + '\\n') * 128)\n"
    "    sys.stdout.flush()\n"
    "    time.sleep(0.06)\n"
)
"""Two MiB of output in some 16 events, and as much again in the call's end: more than a client
that does not read, the kernel's buffers between and the transport's high-water mark hold, so
its transport is paused on the way."""

Seen = list[tuple[int, str]]


def _frames(body: bytes) -> tuple[list[tuple[int, str, str]], bytes]:
    """The events (seq, type, data) of the whole SSE messages in `body`, and the rest."""
    parts = body.split(b"\n\n")
    rest = parts.pop()
    out = []
    for part in parts:
        fields = dict(line.split(": ", 1) for line in part.decode().split("\n") if not line.startswith(":"))
        if "id" in fields:
            out.append((int(fields["id"]), fields.get("event", ""), fields.get("data", "")))
    return out, rest


async def _raw(web: Web, token: str, path: str, query: str, *, small: bool = False) -> socket.socket:
    """An HTTP/1.0 follower's connection, its answer's head read (a small receive buffer with
    `small`: its client holds back little)."""
    host, port = web.host.rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if small:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, (host, int(port)))
    head = f"GET {path}?{query} HTTP/1.0\r\nHost: {web.host}\r\nAuthorization: Bearer {token}\r\n\r\n"
    await loop.sock_sendall(sock, head.encode())
    got = b""
    while b"\r\n\r\n" not in got:
        got += await loop.sock_recv(sock, 1)
    assert got.startswith(b"HTTP/1.1 200 "), got
    return sock


async def _read_raw(sock: socket.socket, *, quit_at_text: bool = False) -> Seen:
    """What an HTTP/1.0 follower reads up to the note `MARK` (or its first text, then it goes)."""
    loop = asyncio.get_running_loop()
    seen: Seen = []
    rest = b""
    try:
        while chunk := await loop.sock_recv(sock, 1 << 16):
            events, rest = _frames(rest + chunk)
            for seq, kind, data in events:
                seen.append((seq, kind))
                if quit_at_text and kind == "text":
                    return seen
                if kind == "note" and MARK in data:
                    return seen
    finally:
        sock.close()
    raise AssertionError(f"the stream ended before the note: {seen[-5:]}")


async def _read(response: httpx.Response, turn_over: asyncio.Event | None = None) -> Seen:
    seen: Seen = []
    async for event in read_sse(response):
        seen.append((event.seq, event.type))
        if event.type == "turn_ended" and turn_over is not None:
            turn_over.set()
        if event.type == "note" and event.data.get("text") == MARK:
            return seen
    raise AssertionError(f"the stream ended before the note: {seen[-5:]}")


async def test_followers_written_in_one_pass_each_get_exactly_their_events(web: Web) -> None:
    sid = web.session()
    wake(web, sid)
    viewer = web.share(sid, "viewer", name="vic")
    base = f"/api/sessions/{sid}"
    path = f"{base}/events"

    def client(token: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=web.url, headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT
        )

    async with contextlib.AsyncExitStack() as stack:
        owner = await stack.enter_async_context(client(web.token))
        guest = await stack.enter_async_context(client(viewer))
        cursor = (await owner.get(f"{base}/transcript", params={"limit": 0})).json()["cursor"]

        def query(i: int) -> dict[str, str]:
            return {"cursor": str(cursor), "client_id": f"script:test:{i}"}

        async def opened(c: httpx.AsyncClient, i: int) -> httpx.Response:
            response = await stack.enter_async_context(c.stream("GET", path, params=query(i)))
            assert response.status_code == 200
            return response

        streams = [await opened(owner, 0), await opened(owner, 1), await opened(guest, 2)]
        raws = [
            await _raw(web, web.token, path, urlencode(query(3))),
            await _raw(web, viewer, path, urlencode(query(4))),
            await _raw(web, web.token, path, urlencode(query(5))),  # goes away at its first text
        ]
        # Reads nothing until the end.
        slow = await _raw(web, web.token, path, urlencode(query(6)), small=True)

        async def all_attached() -> bool:
            stats = (await owner.get(f"{base}/stats")).json()
            return len(stats["attached"]) == 7 and stats["streams"] == 1

        await eventually(all_attached, "every follower attached")
        turn_over = asyncio.Event()
        reading = [
            asyncio.ensure_future(_read(streams[0], turn_over)),
            *(asyncio.ensure_future(_read(s)) for s in streams[1:]),
            asyncio.ensure_future(_read_raw(raws[0])),
            asyncio.ensure_future(_read_raw(raws[1])),
        ]
        quitter = asyncio.ensure_future(_read_raw(raws[2], quit_at_text=True))

        turn = await owner.post(f"{base}/turn", json={"prompt": PROGRAM})
        assert turn.status_code == 202, turn.text
        # A share made and revoked while the turn's output goes by: said to the owner alone.
        made = await owner.post(f"{base}/participants", json={"name": "ana", "kind": "viewer"})
        assert made.status_code == 201, made.text
        gone = await owner.delete(f"{base}/participants", params={"participant": "ana"})
        assert gone.status_code == 200, gone.text
        async with asyncio.timeout(TIMEOUT):
            assert (await quitter)[-1][1] == "text"
            await turn_over.wait()
        assert (await owner.post(f"{base}/notes", json={"text": MARK})).status_code == 200
        async with asyncio.timeout(TIMEOUT):
            owner1, owner2, vic, owner_raw, vic_raw = await asyncio.gather(*reading)
            # It reads again, as fast as it can.
            slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            behind = await _read_raw(slow)

        kinds = [kind for _, kind in owner1]
        assert [seq for seq, _ in owner1] == list(range(cursor + 1, owner1[-1][0] + 1))
        assert kinds.count("share_changed") == 2 and kinds.count("turn_ended") == 1, kinds
        assert sum(kind == "text" for kind in kinds) > 1
        assert owner2 == owner1 and owner_raw == owner1
        assert behind == owner1
        theirs = [(seq, kind) for seq, kind in owner1 if kind != "share_changed"]
        assert vic == theirs and vic_raw == theirs
        # Nothing written past the end: each owner's own stream still answers after the mark.
        assert (await owner.get(f"{base}/stats")).status_code == 200
