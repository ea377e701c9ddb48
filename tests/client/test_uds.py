"""A client over a Unix socket that stops reading while the other end writes prints nothing on
stderr: the loop lets go of a reader waking a read already cancelled, and reports the rest."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from tui.link.uds import UnixTransport, tolerate_late_wakeups

Reports = list[dict[str, Any]]


def _recording(loop: asyncio.AbstractEventLoop) -> Reports:
    seen: Reports = []
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    return seen


async def _late_wakeup(loop: asyncio.AbstractEventLoop) -> None:
    """What the loop runs when a socket turns readable in the turn its reader was cancelled: the
    reader's ``set_result`` on the cancelled future (anyio's wait for a readable socket)."""
    future = loop.create_future()
    future.cancel()
    loop.call_soon(future.set_result, None)
    await asyncio.sleep(0)  # one turn of the loop: the call above runs


async def _failing_callback(loop: asyncio.AbstractEventLoop) -> None:
    def fails() -> None:
        raise ValueError("a real fault")

    loop.call_soon(fails)
    await asyncio.sleep(0)


async def test_a_late_wakeup_is_let_go_and_any_other_fault_still_reported() -> None:
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    try:
        seen = _recording(loop)
        await _late_wakeup(loop)
        assert [type(c["exception"]) for c in seen] == [asyncio.InvalidStateError]  # what users saw
        seen.clear()
        tolerate_late_wakeups(loop)
        tolerate_late_wakeups(loop)  # once is enough; again changes nothing
        await _late_wakeup(loop)
        assert seen == []
        await _failing_callback(loop)
        assert [str(c["exception"]) for c in seen] == ["a real fault"]
    finally:
        loop.set_exception_handler(previous)


async def test_a_client_over_a_unix_socket_makes_its_loop_let_late_wakeups_go(tmp_path: Path) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: text/plain\r\n\r\nok")
        await writer.drain()
        writer.close()

    path = tmp_path / "s"
    server = await asyncio.start_unix_server(answer, path=str(path))
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    try:
        seen = _recording(loop)
        async with httpx.AsyncClient(transport=UnixTransport(str(path)), base_url="http://worker") as c:
            assert (await c.get("/info")).text == "ok"
        await _late_wakeup(loop)
        await _failing_callback(loop)
        assert [str(c["exception"]) for c in seen] == ["a real fault"]
    finally:
        loop.set_exception_handler(previous)
        server.close()
        await server.wait_closed()
