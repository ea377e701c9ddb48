"""A full disk (protocol.md, "Rules"): a failed write is cut back to the last whole line, answered
507 ``disk_full`` naming the path, never a hang; once space returns the session goes on with no
event lost, repeated or torn."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from helpers import worker_here

from tui.errors import DiskFull
from tui.protocol import TurnRequest
from tui.store import Journal, StatePaths, create_session
from tui.store import turns as turns_module
from tui.worker.agent import Agent, AgentContext, TurnIO, TurnOutcome
from tui.worker.agents import make_agent, register
from tui.worker.bridge import build_app
from tui.worker.core import SessionWorker
from tui.worker.process import agent_context

TIMEOUT = 20.0


@register("chatty")
class ChattyAgent(Agent):
    """Says `chunks` pieces of text, waiting on `gate` before each one past the first."""

    name: ClassVar[str] = "chatty"
    chunks: ClassVar[int] = 3
    gate: ClassVar[asyncio.Event | None] = None

    def __init__(self, context: AgentContext) -> None:
        self.model = "m"
        self.stop = False

    @classmethod
    def from_context(cls, context: AgentContext) -> ChattyAgent:
        return cls(context)

    async def run_turn(self, turn: TurnIO) -> TurnOutcome:
        for i in range(type(self).chunks):
            if i and type(self).gate is not None:
                await type(self).gate.wait()
            turn.text(f"part {i} ")
        return TurnOutcome("completed")

    def interrupt(self) -> None:
        self.stop = True


class Disk:
    """Makes writes to one journal fail with ENOSPC (after writing part of the line)."""

    def __init__(self, journal: Journal, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full = False
        real = os.write

        def write(fd: int, data: Any) -> int:
            if self.full and fd == journal._write_fd:
                if len(data) > 8:
                    return real(fd, bytes(data)[: len(data) // 2])  # a torn half line, then no space
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(fd, data)

        monkeypatch.setattr(os, "write", write)


def lines(worker: SessionWorker) -> list[dict[str, Any]]:
    """Every journal line, each of which must be whole JSON."""
    return [json.loads(line) for line in worker.writer.paths.journal.read_bytes().splitlines()]


def assert_whole(worker: SessionWorker) -> None:
    data = worker.writer.paths.journal.read_bytes()
    assert data.endswith(b"\n")
    seqs = [e["seq"] for e in lines(worker)]
    assert seqs == list(range(1, len(seqs) + 1)), "a seq was lost or repeated"


@pytest.fixture
async def session(state_dir: Path, tmp_path: Path) -> AsyncIterator[SessionWorker]:
    ChattyAgent.chunks, ChattyAgent.gate = 3, None
    worker = worker_here(state_dir, tmp_path, "chatty")
    yield worker
    with contextlib.suppress(DiskFull):
        await worker.leave("test over")


async def _turn_end(worker: SessionWorker) -> None:
    turn = worker.control.turn
    if turn is not None and turn.task is not None:
        await asyncio.wait_for(asyncio.shield(turn.task), TIMEOUT)


def test_a_failed_append_is_cut_back_and_the_next_one_is_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tui.protocol import Note

    journal = Journal.open_for_append(tmp_path / "journal.jsonl")
    journal.append(Note(text="one"))
    size = journal.path.stat().st_size
    disk = Disk(journal, monkeypatch)
    disk.full = True
    with pytest.raises(DiskFull) as full:
        journal.append(Note(text="two " * 50))
    assert str(journal.path) in str(full.value) and full.value.status == 507
    assert journal.path.stat().st_size == size, "the torn half line stayed"
    disk.full = False
    journal.append(Note(text="three"))
    reread = Journal.open_for_reading(journal.path)
    assert [(line.seq, line.decode().text) for line in reread.iter_after(0)] == [(1, "one"), (2, "three")]  # type: ignore[attr-defined]


async def test_a_full_disk_mid_turn_refuses_507_and_resumes_with_nothing_lost(
    session: SessionWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    ChattyAgent.gate = asyncio.Event()
    disk = Disk(session.writer.journal, monkeypatch)
    first = session.control.submit(TurnRequest(prompt="one", request_id="r1"))
    disk.full = True
    ChattyAgent.gate.set()
    await _turn_end(session)
    assert not session.control.running, "the turn never ended: every later send would hang"
    assert session.writer.disk_full is not None
    app = httpx.AsyncClient(transport=httpx.ASGITransport(app=build_app(session)), base_url="http://w")
    async with app:
        refused = await app.post("/turn", json={"prompt": "two", "request_id": "r2"})
        assert refused.status_code == 507
        body = refused.json()
        assert body["error"] == "disk_full" and body["path"] == str(session.writer.paths.journal)
        assert "disk full" in body["detail"]
        assert_whole(session)
        disk.full = False
        accepted = await app.post("/turn", json={"prompt": "two", "request_id": "r2"})
        assert accepted.status_code == 202, accepted.text
    await _turn_end(session)
    assert_whole(session)
    events = lines(session)
    ended = [e for e in events if e["type"] == "turn_ended"]
    assert [e["turn_id"] for e in ended] == [first.turn_id, accepted.json()["turn_id"]]
    assert ended[0]["reply"] == "part 0 part 1 part 2 " and ended[0]["outcome"] == "interrupted"
    texts = [e["text"] for e in events if e["type"] == "text" and e["turn_id"] == first.turn_id]
    assert "".join(texts) == ended[0]["reply"], "held text was lost"
    assert session.writer.turn_store.has(first.turn_id)


async def test_a_turn_record_that_cannot_be_written_is_no_hang(
    session: SessionWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = turns_module._write_new
    full = True

    def write_new(path: Path, data: bytes) -> None:
        if full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(path, data)

    monkeypatch.setattr(turns_module, "_write_new", write_new)
    first = session.control.submit(TurnRequest(prompt="one"))
    await _turn_end(session)
    assert not session.control.running
    with pytest.raises(DiskFull) as refused:
        session.control.submit(TurnRequest(prompt="two"))
    assert first.turn_id in str(refused.value)
    full = False
    second = session.control.submit(TurnRequest(prompt="two"))
    await _turn_end(session)
    assert session.writer.turn_store.has(first.turn_id) and session.writer.turn_store.has(
        second.turn_id or ""
    )
    assert session.writer.disk_full is None
    assert_whole(session)


@pytest.fixture
def small_disk() -> Iterator[Path]:
    """A 2 MiB tmpfs (root only): a real full disk."""
    with _tmpfs("2m") as d:
        yield d


@pytest.fixture
def disk_8m() -> Iterator[Path]:
    """An 8 MiB tmpfs (root only): room for what a full disk held back once space is back."""
    with _tmpfs("8m") as d:
        yield d


@contextlib.contextmanager
def _tmpfs(size: str) -> Iterator[Path]:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    with tempfile.TemporaryDirectory(prefix="tui-disk-", dir="/tmp") as d:
        made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", d], capture_output=True)
        if made.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
        try:
            yield Path(d)
        finally:
            subprocess.run(["umount", "-l", d], check=False)


async def test_a_real_full_disk_cycle(
    small_disk: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TUI_STATE_DIR", str(small_disk))
    ChattyAgent.chunks, ChattyAgent.gate = 40, None
    state = StatePaths(small_disk)
    record = create_session(state, working_directory=tmp_path, agent="chatty")
    paths = state.session(record.id)
    worker = SessionWorker(
        paths, record, Journal.open_for_append(paths.journal), make_agent(agent_context(paths, record))
    )
    worker.writer.load()
    worker.begin()
    filler = small_disk / "filler"
    with contextlib.suppress(OSError), filler.open("wb") as f:
        while True:
            f.write(b"x" * 4096)
            f.flush()
    app = httpx.AsyncClient(transport=httpx.ASGITransport(app=build_app(worker)), base_url="http://w")
    async with app:
        for _ in range(5):
            refused = await app.post("/turn", json={"prompt": "p" * 20000, "request_id": "r1"})
            if refused.status_code == 507:
                break
        assert refused.status_code == 507 and refused.json()["error"] == "disk_full"
        assert_whole(worker)
        filler.unlink()
        accepted = await app.post("/turn", json={"prompt": "p" * 20000, "request_id": "r1"})
        assert accepted.status_code == 202, accepted.text
        await _turn_end(worker)
    assert_whole(worker)
    assert any(e["type"] == "turn_ended" for e in lines(worker))
    await worker.leave("test over")
    worker.writer.journal.close()


@register("loud")
class LoudAgent(Agent):
    """Says `pieces` pieces of `size` characters, one per loop turn, until interrupted."""

    name: ClassVar[str] = "loud"
    pieces: ClassVar[int] = 200
    size: ClassVar[int] = 100_000

    def __init__(self, context: AgentContext) -> None:
        self.model = "m"
        self.stop = False

    @classmethod
    def from_context(cls, context: AgentContext) -> LoudAgent:
        return cls(context)

    async def run_turn(self, turn: TurnIO) -> TurnOutcome:
        for i in range(type(self).pieces):
            turn.text(str(i % 10) * type(self).size)
            await asyncio.sleep(0)
        return TurnOutcome("completed")

    def interrupt(self) -> None:
        self.stop = True


def _retry_timers(worker: SessionWorker) -> int:
    loop = asyncio.get_running_loop()
    scheduled = loop._scheduled  # type: ignore[attr-defined]
    return sum(1 for h in scheduled if not h.cancelled() and h._callback == worker.writer._try_resume)


async def test_a_full_disk_keeps_one_retry_and_bounded_output_and_says_what_it_dropped(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tui.worker import writer as core

    worker = worker_here(state_dir, tmp_path, "loud")
    disk = Disk(worker.writer.journal, monkeypatch)
    started = worker.control.submit(TurnRequest(prompt="one"))
    disk.full = True
    await _turn_end(worker)
    assert worker.writer.disk_full is not None
    for _ in range(5):
        # Each try that fails leaves one timer for the next, not one more each time.
        worker.writer._try_resume()
        assert _retry_timers(worker) == 1
    assert worker.writer._held_chars <= core.HELD_OUTPUT
    held = sum(len(getattr(e, "text", "")) for e in worker.writer._held)
    assert held <= core.HELD_OUTPUT + 1000, "output held past the bound"
    disk.full = False
    worker.writer._try_resume()
    assert not worker.writer._held and worker.writer.disk_full is None
    assert_whole(worker)
    events = lines(worker)
    dropped = [e for e in events if e["type"] == "note" and "were not kept" in e["text"]]
    assert len(dropped) == 1, [e["type"] for e in events]
    ended = [e for e in events if e["type"] == "turn_ended" and e["turn_id"] == started.turn_id]
    assert len(ended) == 1
    kept = "".join(e["text"] for e in events if e["type"] == "text" and e["turn_id"] == started.turn_id)
    assert ended[0]["reply"] == kept, "the reply and its text pieces disagree"
    await worker.leave("test over")


LOUD_PROGRAM = "import time\nfor i in range(100000):\n    print(str(i % 10) * 100000)\n    time.sleep(0.01)\n"


def _fill(disk: Path, leave: int) -> Path:
    """Fill `disk` until `leave` bytes are free; the filler file, to delete when space is to come back."""
    filler = disk / "filler"
    free = shutil.disk_usage(disk).free - leave
    with filler.open("wb") as f:
        while free > 0:
            free -= f.write(b"\0" * min(free, 1 << 20))
    return filler


async def test_send_wait_on_a_disk_that_fills_mid_turn_ends_with_disk_full_and_the_worker_answers(
    disk_8m: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    small_disk = disk_8m
    from client.helpers import tui
    from helpers import stop_workers, wait_until

    from tui.store import read_sidecar

    monkeypatch.setenv("TUI_STATE_DIR", str(small_disk))
    made = await asyncio.to_thread(tui, "send", "--new", "--wait", "print(1)", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    sid = made.stderr.strip().splitlines()[0]
    paths = StatePaths(small_disk).session(sid)
    try:
        filler = _fill(small_disk, 300 * 1024)
        out = await asyncio.to_thread(tui, "send", "--wait", sid[:8], LOUD_PROGRAM)
        assert out.returncode == 1, out.stderr[-2000:]
        assert "Traceback" not in out.stderr
        line = out.stderr.strip().splitlines()[-1]
        assert "disk full" in line and str(paths.journal) in line, line
        car = read_sidecar(paths.sidecar)
        assert car is not None
        async with httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(uds=car.socket), base_url="http://w", timeout=TIMEOUT
        ) as client:
            # The state where no write is needed, a refusal where one is: answered, not hung.
            assert (await client.get("/info")).status_code == 200
            assert (await client.get("/transcript", params={"limit": 5})).status_code == 200
            refused = await client.post("/turn", json={"prompt": "print(2)"})
            assert refused.status_code == 507 and refused.json()["error"] == "disk_full"
            assert (await client.post("/interrupt", json={})).status_code == 200
            filler.unlink()

            def ended() -> bool:
                data = paths.journal.read_bytes()
                return b'"type":"turn_ended"' in data.rsplit(b'"type":"turn_started"', 1)[-1]

            await asyncio.to_thread(wait_until, ended, "the held turn to be written once space is back")
        data = paths.journal.read_bytes()
        assert data.endswith(b"\n")
        seqs = [json.loads(raw)["seq"] for raw in data.splitlines()]
        assert seqs == list(range(1, len(seqs) + 1)), "a seq was lost, repeated or torn"
        again = await asyncio.to_thread(tui, "send", "--wait", sid[:8], "print(7)")
        assert again.returncode == 0 and again.stdout.strip() == "7", again.stderr[-2000:]
    finally:
        stop_workers(small_disk, sid)
