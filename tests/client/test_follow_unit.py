"""The bridge client and the follower against a small real SSE server on a Unix socket.

A unit test of these two pieces only: the server is a scripted Starlette app, not a worker.
The end-to-end proof runs against real workers in the other test files.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tui.errors import Conflict, InvalidRequest, NotFound, WorkerUnavailable
from tui.link.base import AttachLink, Backoff, Gone, Live, Located, Reconnecting, RouteCall
from tui.link.client import BridgeClient
from tui.link.follow import Follower, backoff_delay
from tui.protocol import Event, ModelRequest, TurnRequest
from tui.protocol.routes import BRIDGE


def _event(seq: int, typ: str = "note", **fields: Any) -> str:
    import json

    body = {"seq": seq, "at": "2026-01-01T00:00:00Z", "type": typ, **fields}
    if typ == "note":
        body.setdefault("text", f"n{seq}")
    return json.dumps(body)


class Script:
    """What each successive /events connection sends: a list of (seq, json) then end of body."""

    def __init__(self, streams: list[list[str]]) -> None:
        self.streams = streams
        self.cursors: list[int] = []


def _app(script: Script) -> Starlette:
    async def events(request: Request) -> Response:
        cursor = int(request.query_params.get("cursor", "0"))
        script.cursors.append(cursor)
        if not script.streams:
            return JSONResponse({"error": "worker_gone", "detail": "no more"}, status_code=503)
        lines = script.streams.pop(0)

        async def body() -> AsyncIterator[bytes]:
            yield b": ping\n\n"
            for raw in lines:
                import json

                try:
                    seq = json.loads(raw)["seq"]
                except ValueError:  # a torn line
                    seq = 0
                yield f"id: {seq}\nevent: x\ndata: {raw}\n\n".encode()

        return StreamingResponse(body(), media_type="text/event-stream")

    async def turn(request: Request) -> Response:
        return JSONResponse({"error": "busy", "detail": "a turn is running"}, status_code=409)

    async def model(request: Request) -> Response:
        return JSONResponse({"error": "invalid_model", "detail": "no such model"}, status_code=400)

    async def info(request: Request) -> Response:
        return JSONResponse({"version": "1", "session_id": "a" * 16, "epoch": 2, "agent": "python"})

    return Starlette(
        routes=[
            Route("/events", events),
            Route("/turn", turn, methods=["POST"]),
            Route("/model", model, methods=["POST"]),
            Route("/info", info),
        ]
    )


@pytest.fixture
def served() -> Iterator[tuple[Path, Script]]:
    script = Script([])
    with tempfile.TemporaryDirectory(prefix="tui-", dir="/tmp") as d:
        sock = Path(d) / "b.sock"
        server = uvicorn.Server(uvicorn.Config(_app(script), uds=str(sock), log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        for _ in range(500):
            if server.started:
                break
            threading.Event().wait(0.01)
        yield sock, script
        server.should_exit = True
        thread.join(5)


class SocketLink(AttachLink):
    """The smallest link over one socket; `plan` scripts what `locate` answers."""

    backoff = Backoff(first=0.01, cap=0.05)

    def __init__(self, sock: Path, plan: list[Located] | None = None) -> None:
        self.session_id = "a" * 16
        self.client_id = "test"
        self.client = BridgeClient(socket_path=sock)
        self.plan = plan or []

    async def locate(self) -> Located:
        return self.plan.pop(0) if self.plan else Located("live")

    def open_stream(self, cursor: int) -> AsyncIterator[Event | Live]:
        return self.client.events(cursor, announce_open=True)

    async def handle(self, call: RouteCall) -> Any:
        return await self.client.handle(call)


async def _collect(follower: Follower) -> list[Event | object]:
    got: list[Event | object] = []
    async with asyncio.timeout(10):
        async for item in follower:
            got.append(item)
            if isinstance(item, Gone):
                break
    return got


async def test_refusals_map_to_the_error_tree(served: tuple[Path, Script]) -> None:
    sock, _ = served
    async with BridgeClient(socket_path=sock) as client:
        assert (await client.call(BRIDGE["info"])).epoch == 2
        with pytest.raises(Conflict) as busy:
            await client.call(BRIDGE["turn"], TurnRequest(prompt="x"))
        assert busy.value.code == "busy" and "a turn is running" in str(busy.value)
        with pytest.raises(InvalidRequest):
            await client.call(BRIDGE["model"], ModelRequest(model="nope"))
        with pytest.raises(NotFound):
            await client.call(BRIDGE["stats"])


async def test_a_missing_socket_is_an_unavailable_worker() -> None:
    async with BridgeClient(socket_path="/tmp/tui-no-such-dir/x.sock", label="the worker of x") as client:
        with pytest.raises(WorkerUnavailable) as exc:
            await client.call(BRIDGE["info"])
    assert "the worker of x is not answering" in str(exc.value)
    assert exc.value.__cause__ is not None


async def test_follower_reconnects_with_its_cursor_and_applies_each_event_once(
    served: tuple[Path, Script],
) -> None:
    sock, script = served
    script.streams = [
        [_event(1), _event(2), _event(3)],
        # The server repeats 3 after the drop: the follower must skip it.
        [_event(3), _event(4), _event(5, "worker_leaving", reason="stopped")],
    ]
    follower = Follower(SocketLink(sock))
    got = await _collect(follower)
    seqs = [e.seq for e in got if not isinstance(e, (Live, Gone, Reconnecting))]  # type: ignore[union-attr]
    assert seqs == [1, 2, 3, 4, 5]
    assert script.cursors == [0, 3]
    assert isinstance(got[-1], Gone) and "stopped" in got[-1].reason
    assert follower.cursor == 5


async def test_a_replayed_worker_leaving_is_history(served: tuple[Path, Script]) -> None:
    sock, script = served
    script.streams = [
        [
            _event(1, "worker_leaving", reason="old"),
            _event(2, "worker_started", epoch=2, pid=1, version="1", agent="python"),
            _event(3),
        ],
        [_event(4, "worker_leaving", reason="bye")],
    ]
    got = await _collect(Follower(SocketLink(sock)))
    assert isinstance(got[-1], Gone) and "bye" in got[-1].reason


async def test_starting_backs_off_then_follows(served: tuple[Path, Script]) -> None:
    sock, script = served
    script.streams = [[_event(1, "worker_leaving")]]
    waits: list[float] = []

    async def sleep(s: float) -> None:
        waits.append(s)

    link = SocketLink(sock, [Located("starting", "restarting"), Located("starting", "restarting")])
    got = await _collect(Follower(link, sleep=sleep))
    states = [g for g in got if isinstance(g, Reconnecting)]
    assert [s.attempt for s in states] == [1, 2]
    assert states[0].reason == "restarting"
    assert waits == [s.delay for s in states]
    assert isinstance(got[-1], Gone)


async def test_gone_is_said_once_and_stops(served: tuple[Path, Script]) -> None:
    sock, _ = served
    got = await _collect(Follower(SocketLink(sock, [Located("gone", "deleted", 4)])))
    assert got == [Gone("deleted", 4)]


def test_backoff_grows_by_its_factor_within_jitter_and_cap() -> None:
    b = Backoff()
    for attempt, base in ((1, 0.1), (2, 0.16), (3, 0.256)):
        d = backoff_delay(b, attempt)
        assert base * 0.8 - 1e-9 <= d <= base * 1.2 + 1e-9
    assert backoff_delay(b, 100) <= 30.0


async def test_an_unreadable_event_ends_the_follower_instead_of_looping(served: tuple[Path, Script]) -> None:
    sock, script = served
    # A line this version cannot read (a torn write of an older version): every reconnect meets it.
    torn = '{"seq": 2, "at": "2026-01-01T00:00:00Z", "type": "text_chunk", "turn_id": "t-1", "te'
    script.streams = [[_event(1), torn]] + [[torn] for _ in range(40)]
    got = await _collect(Follower(SocketLink(sock)))
    assert isinstance(got[-1], Gone) and "cannot read" in got[-1].reason
    assert len(script.cursors) == 1
