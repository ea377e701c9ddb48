"""Worker starts, deaths and restarts: one owner at a time, the journal repaired and continued."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import TIMEOUT, eventually

from tui.errors import NotFound, WorkerUnavailable
from tui.link.launch import is_live, live_sidecar, start_worker
from tui.store import StatePaths, read_sidecar
from worker.conftest import Worker


def _journal(worker: Worker) -> list[dict[str, object]]:
    return [json.loads(line) for line in worker.paths.journal.read_text().splitlines()]


async def test_a_second_worker_is_refused_at_once(worker: Worker) -> None:
    out = subprocess.run(  # noqa: ASYNC221 - the refusal is what is tested
        [
            sys.executable,
            "-m",
            "tui.commands.worker",
            "--state-dir",
            str(worker.state.root),
            worker.session_id,
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert out.returncode == 3
    assert "another worker holds this session" in out.stderr
    assert (await worker.client().get("/info")).status_code == 200


async def test_starting_a_live_session_returns_its_worker(worker: Worker) -> None:
    again = start_worker(worker.state, worker.session_id, timeout=TIMEOUT)
    assert again.pid == worker.sidecar.pid
    assert is_live(worker.state, worker.session_id)
    assert live_sidecar(worker.state, worker.session_id) == worker.sidecar


async def test_killed_mid_turn_the_next_worker_fails_that_turn_first(worker: Worker) -> None:
    client = worker.client()
    follower = worker.follow()
    await client.post("/turn", json={"prompt": "print('partial', flush=True)\nask('never answered')"})
    await follower.until(lambda e: e.type == "question_asked")
    await follower.until(lambda e: e.type == "text")
    worker.kill()
    worker.restart()
    events = _journal(worker)
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1))
    started = next(i for i, e in enumerate(events) if e["type"] == "worker_started" and e["epoch"] == 2)
    after = [e["type"] for e in events[started:]]
    assert after[:4] == ["worker_started", "question_resolved", "turn_ended", "status"]
    ended = events[started + 2]
    assert ended["outcome"] == "failed" and ended["reply"] == "partial\n"
    assert "stopped before it ended" in str(ended["error"])
    assert events[started + 1]["how"] == "cancelled"
    t = (await worker.client().get("/transcript")).json()
    assert t["state"] == "idle" and t["question"] is None and t["current"] is None
    assert t["turns"][-1]["outcome"] == "failed"
    assert (await worker.turn("print('alive')"))["reply"] == "alive\n"


async def test_a_torn_journal_line_is_cut_when_the_next_worker_starts(worker: Worker) -> None:
    await worker.turn("print(1)")
    worker.kill()
    whole = worker.paths.journal.read_bytes()
    with worker.paths.journal.open("ab") as f:
        f.write(b'{"seq":999,"at":"2026-01-01T00:00:00Z","type":"te')
    worker.restart()
    data = worker.paths.journal.read_bytes()
    assert data.startswith(whole) and b'"seq":999' not in data
    events = _journal(worker)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert "torn" in worker.paths.log.read_text()


async def test_a_launcher_waits_out_a_leaving_worker(worker: Worker) -> None:
    client = worker.client()
    follower = worker.follow()
    # A program that shrugs off interrupts keeps its worker leaving for about a second.
    stubborn = (
        "import time\nprint('go', flush=True)\n"
        "while True:\n    try:\n        time.sleep(5)\n    except KeyboardInterrupt:\n        pass"
    )
    await client.post("/turn", json={"prompt": stubborn})
    await follower.until(lambda e: e.type == "text")
    leave = asyncio.create_task(client.post("/leave", json={"wait": 5}))
    await eventually(lambda: (read_sidecar(worker.paths.sidecar) or worker.sidecar).leaving or leave.done())
    lines: list[str] = []
    second = await asyncio.to_thread(
        start_worker, worker.state, worker.session_id, timeout=TIMEOUT, on_wait=lines.append
    )
    assert (await leave).json() == {"released": True}
    assert second.pid != worker.sidecar.pid and second.epoch == 2
    assert lines and "waiting for the previous worker" in lines[0]
    assert read_sidecar(worker.paths.sidecar) == second


async def test_stale_sidecar_of_a_dead_worker_is_not_live(worker: Worker) -> None:
    worker.kill()
    assert read_sidecar(worker.paths.sidecar) is not None
    assert not is_live(worker.state, worker.session_id)
    assert live_sidecar(worker.state, worker.session_id) is None
    fresh = worker.restart()
    assert fresh.epoch == 2


async def test_sigterm_makes_the_worker_leave_properly(worker: Worker) -> None:
    follower = worker.follow()
    await follower.until(lambda e: e.type == "status")
    os.kill(worker.sidecar.pid, signal.SIGTERM)
    leaving = await follower.until(lambda e: e.type == "worker_leaving")
    assert "SIGTERM" in leaving.data["reason"]
    await eventually(lambda: not is_live(worker.state, worker.session_id))
    assert read_sidecar(worker.paths.sidecar) is None


async def test_a_worker_that_cannot_start_points_to_its_log(
    state_dir: Path, new_session: Callable[[], str]
) -> None:
    state = StatePaths(state_dir)
    sid = new_session()
    record = state.session(sid).record
    record.write_text(record.read_text().replace('"python"', '"no-such-agent"'))
    with pytest.raises(WorkerUnavailable) as failed:
        start_worker(state, sid, timeout=TIMEOUT)
    log = state.session(sid).log
    assert str(log) in str(failed.value), "the error names the log"
    assert "no-such-agent" not in str(failed.value), "the log stays in the log"
    assert "no-such-agent" in log.read_text()
    with pytest.raises(NotFound):
        start_worker(state, "0" * 16, timeout=TIMEOUT)


async def test_an_idle_timeout_is_off_unless_asked_for(
    state_dir: Path, new_session: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state = StatePaths(state_dir)
    sid = new_session()
    monkeypatch.setenv("TUI_IDLE_TIMEOUT", "0.4")
    start_worker(state, sid, timeout=TIMEOUT)
    await eventually(lambda: not is_live(state, sid))
    last = json.loads(state.session(sid).journal.read_text().splitlines()[-1])
    assert last["type"] == "worker_leaving" and "idle" in last["reason"]
