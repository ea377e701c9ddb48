"""Slow and malformed requests to `tui web`: each gets a JSON refusal in bounded time, never an
open connection held for ever or a plain-text answer."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from helpers import TIMEOUT

from tui.serve import BODY_IDLE, DRAIN_WAIT
from tui.web.limits import HEAD_TIMEOUT

from .conftest import Web


async def _exchange(web: Web, data: bytes) -> tuple[int, dict[str, object]]:
    """Send `data` on a fresh connection; the status and JSON body of the answer."""
    host, port = web.host.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(data)
        await writer.drain()
        async with asyncio.timeout(max(HEAD_TIMEOUT, BODY_IDLE, DRAIN_WAIT) + TIMEOUT):  # a hang guard
            head = await reader.readuntil(b"\r\n\r\n")
            headers = dict(
                ln.split(": ", 1) for ln in head.decode("latin-1").lower().split("\r\n")[1:] if ": " in ln
            )
            body = await reader.readexactly(int(headers["content-length"]))
    finally:
        writer.close()
    assert headers.get("content-type") == "application/json", head
    return int(head.split()[1]), json.loads(body)


async def test_slow_heads_and_bodies_are_answered_in_bounded_time(web: Web) -> None:
    auth = f"Authorization: Bearer {web.token}\r\nHost: {web.host}\r\n"
    half_head = f"GET /api/sessions HTTP/1.1\r\nHost: {web.host}\r\n".encode()
    huge = f"POST /api/sessions HTTP/1.1\r\n{auth}Content-Type: application/json\r\n"
    huge += f"Content-Length: {50 * 1024 * 1024}\r\n\r\n"
    stalled = f"POST /api/sessions HTTP/1.1\r\n{auth}Content-Type: application/json\r\n"
    stalled += "Content-Length: 100\r\n\r\n{"
    (h_status, h_body), (b_status, b_body), (s_status, s_body) = await asyncio.gather(
        _exchange(web, half_head), _exchange(web, huge.encode()), _exchange(web, stalled.encode())
    )
    # each answered by the server's own bound (the exchange's timeout only guards against a hang)
    assert (h_status, h_body["error"]) == (408, "request_timeout")
    assert (b_status, b_body["error"]) == (413, "too_large")
    assert (s_status, s_body["error"]) == (408, "request_timeout")


async def test_a_request_h11_cannot_parse_gets_a_json_400(web: Web) -> None:
    url = "/api/sessions?" + "x" * 200_000
    status, body = await _exchange(web, f"GET {url} HTTP/1.1\r\nHost: {web.host}\r\n\r\n".encode())
    assert (status, body["error"]) == (400, "invalid_request")
    assert web.proc.poll() is None


def test_a_chunked_body_past_the_limit_is_cut_at_the_limit(web: Web) -> None:
    import select
    import socket

    from tui.serve import MAX_BODY

    host, port = web.host.rsplit(":", 1)
    head = f"POST /api/sessions HTTP/1.1\r\nHost: {web.host}\r\nAuthorization: Bearer {web.token}\r\n"
    head += "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    piece = b"x" * (64 * 1024)
    frame = b"%x\r\n%s\r\n" % (len(piece), piece)
    sent = 0
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(head.encode())
        while sent < 50 * 1024 * 1024:
            readable, writable, _ = select.select([sock], [sock], [], 60)
            if readable:
                break  # the answer came
            if writable:
                try:
                    sock.sendall(frame)
                except OSError:
                    break  # cut: the answer waits to be read
                sent += len(piece)
        answer = sock.recv(4096)
    assert answer.split()[1] == b"413", answer[:300]
    # Cut at the limit: not read on to the end of a 50 MiB body (nor for seconds after the limit).
    assert sent < MAX_BODY + 8 * 1024 * 1024, f"{sent} bytes were taken before the 413"


def test_idle_connections_of_one_client_do_not_lock_the_owner_out(state_dir: Path) -> None:
    import resource
    import socket

    from .conftest import start_web

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))  # `tui web` keeps 85 connections
    try:
        web = start_web(state_dir)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    host, port = web.host.rsplit(":", 1)
    idle: list[socket.socket] = []
    try:
        for _ in range(150):  # more than the bound, from the owner's own address, never a byte sent
            idle.append(socket.create_connection((host, int(port)), timeout=20))
        owner = web.client()
        answers = [owner.get("/api/sessions").status_code for _ in range(5)]
        assert answers == [200] * 5, answers
        # Past the bound, the oldest idle connections were closed (with a JSON 503) for new ones.
        closed = 0
        for sock in idle:
            sock.settimeout(0.0)
            try:
                got = sock.recv(4096)
            except BlockingIOError:
                continue
            closed += 1
            assert not got or b"server_busy" in got
        assert closed >= 150 - 85
    finally:
        for sock in idle:
            sock.close()
        web.stop()
