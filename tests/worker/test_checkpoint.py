"""A worker starts from the checkpoint of its state and reads only the journal's tail; a checkpoint
that is missing, stale, unreadable or of another version is rebuilt from the whole journal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import TIMEOUT

from tui.protocol import Note, QueueChanged, QueueItem, TextChunk, TurnEnded, TurnStarted, WorkerStarted
from tui.protocol.state import SessionState
from tui.store import Journal, SessionPaths, StatePaths, TurnStore, create_session
from tui.store.checkpoint import read_checkpoint, write_checkpoint
from tui.worker.agents import make_agent
from tui.worker.core import SessionWorker
from tui.worker.process import agent_context


def _session(tmp_path: Path, turns: int) -> tuple[StatePaths, str]:
    """A stopped session of `turns` ended turns and a turn left running (3 events a turn)."""
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    state = StatePaths(tmp_path / "state")
    record = create_session(state, working_directory=workdir)
    paths = state.session(record.id)
    with Journal.open_for_append(paths.journal) as journal:
        journal.append(WorkerStarted(epoch=1, pid=1, version="0", agent="python"))
        for i in range(turns):
            turn_id = f"t-{i}"
            journal.append(TurnStarted(turn_id=turn_id, prompt=f"print({i})", request_id=f"r-{i}"))
            journal.append(TextChunk(turn_id=turn_id, text=f"{i}\n"))
            journal.append(TurnEnded(turn_id=turn_id, outcome="completed", reply=f"{i}\n"))
        journal.append(QueueChanged(items=[QueueItem(queue_id="q-1", prompt="later", request_id="r-q")]))
        journal.append(TurnStarted(turn_id="t-last", prompt="print('last')"))
        journal.append(TextChunk(turn_id="t-last", text="half a reply"))
    return state, record.id


def _worker(state: StatePaths, sid: str, *, resume: bool = True) -> SessionWorker:
    """A worker opened as the worker process opens one (checkpoint read first), loaded."""
    from tui.store import get_session

    record = get_session(state, sid)
    paths = state.session(sid)
    checkpoint = read_checkpoint(paths.checkpoint) if resume else None
    journal = Journal.open_for_append(paths.journal, resume=checkpoint.mark if checkpoint else None)
    worker = SessionWorker(paths, record, journal, make_agent(agent_context(paths, record)))
    worker.writer.load(checkpoint)
    return worker


def _checkpoint_at(paths: SessionPaths, seq: int) -> None:
    """A checkpoint current to `seq`, as a worker that stopped there would have written it."""
    state = SessionState()
    with Journal.open_for_reading(paths.journal) as journal:
        lines = journal.read_after(0, seq)
        for line in lines:
            state.apply(line.decode())
        position = seq - 1
        start = journal._offsets[position]
        end = journal._offsets[position + 1]
    data = paths.journal.read_bytes()[start:end]
    import hashlib

    from tui.store import JournalMark

    write_checkpoint(paths.checkpoint, JournalMark(seq, start, end, hashlib.sha256(data).hexdigest()), state)


def _rebuilt(state: StatePaths, sid: str) -> dict[str, object]:
    """The state a worker rebuilds from the whole journal (no checkpoint)."""
    paths = state.session(sid)
    aside = paths.checkpoint.with_name("aside")
    if paths.checkpoint.exists():
        paths.checkpoint.rename(aside)
    worker = _worker(state, sid, resume=False)
    try:
        assert worker.writer.replayed == worker.writer.journal.last_seq
        return worker.writer.state.model_dump()
    finally:
        worker.writer.journal.close()
        if aside.exists():
            aside.rename(paths.checkpoint)


def test_a_worker_reads_only_the_events_after_its_checkpoint(tmp_path: Path) -> None:
    state, sid = _session(tmp_path, 40)
    paths = state.session(sid)
    last = 1 + 40 * 3 + 3
    _checkpoint_at(paths, last - 5)

    worker = _worker(state, sid)
    assert worker.writer.journal.resumed is not None
    assert worker.writer.replayed == 5
    assert worker.writer.state.model_dump() == _rebuilt(state, sid)
    assert worker.writer.state.current is not None and worker.writer.state.current.reply == "half a reply"
    assert [i.prompt for i in worker.writer.state.queue] == ["later"]
    # What it did not index at start is read when a follower asks for it.
    assert [line.seq for line in worker.writer.journal.read_after(0, 10_000)] == list(range(1, last + 1))
    assert worker.writer.journal.last_seq == last


@pytest.mark.parametrize(
    "damage", ["stale", "garbage", "other_version", "other_reducer", "empty", "longer_than_journal"]
)
def test_a_checkpoint_that_does_not_fit_is_rebuilt_from_the_journal(tmp_path: Path, damage: str) -> None:
    state, sid = _session(tmp_path, 10)
    paths = state.session(sid)
    _checkpoint_at(paths, 20)
    if damage == "stale":
        # The journal was replaced by another of the same length: the line at the mark differs.
        data = paths.journal.read_bytes()
        assert b"print(6)" in paths.journal.read_bytes().splitlines()[19]
        paths.journal.write_bytes(data.replace(b"print(6)", b"print(7)"))
    elif damage == "garbage":
        paths.checkpoint.write_bytes(b"\x00not json\n{")
    elif damage == "other_version":
        head, state_json = paths.checkpoint.read_bytes().split(b"\n", 1)
        body = json.loads(state_json)
        body["schema_version"] = 999
        paths.checkpoint.write_bytes(head + b"\n" + json.dumps(body).encode())
    elif damage == "other_reducer":
        head, state_json = paths.checkpoint.read_bytes().split(b"\n", 1)
        fields = json.loads(head)
        fields["reducer"] = "0" * 20
        paths.checkpoint.write_bytes(json.dumps(fields).encode() + b"\n" + state_json)
    elif damage == "empty":
        paths.checkpoint.write_bytes(b"")
    else:
        data = paths.journal.read_bytes()
        paths.journal.write_bytes(data[: len(data) // 3].rsplit(b"\n", 1)[0] + b"\n")
        _checkpoint_at(paths, 5)
        paths.journal.write_bytes(data[:10])  # shorter than where the checkpoint stood

    expected = _rebuilt(state, sid)
    worker = _worker(state, sid)
    assert worker.writer.journal.resumed is None
    assert worker.writer.replayed == worker.writer.journal.last_seq
    assert worker.writer.state.model_dump() == expected


def test_a_worker_writes_a_checkpoint_as_the_journal_grows_and_when_it_leaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    import tui.worker.writer as core

    monkeypatch.setattr(core, "CHECKPOINT_EVERY", 50)
    state, sid = _session(tmp_path, 100)
    paths = state.session(sid)

    async def run() -> None:
        worker = _worker(state, sid)
        assert worker.writer.replayed == worker.writer.journal.last_seq  # none yet: rebuilt from all
        worker.begin()
        # The journal was long: the first event written made a checkpoint at once.
        checkpoint = read_checkpoint(paths.checkpoint)
        assert checkpoint is not None and checkpoint.mark.seq > 300
        await worker.leave("test")
        left = read_checkpoint(paths.checkpoint)
        assert left is not None and left.mark.seq == worker.writer.journal.last_seq
        assert left.state.model_dump() == worker.writer.state.model_dump()

    asyncio.run(run())
    again = _worker(state, sid)
    assert again.writer.replayed == 0
    assert again.writer.state.model_dump() == _rebuilt(state, sid)
    # The turn left running was ended by the new worker's start, and its record is kept.
    assert TurnStore(paths.turns).has("t-last")


_KILLED = """
import os, sys
from pathlib import Path
import tui.worker.writer as core
from tui.protocol import TextChunk, TurnStarted
from tui.store import StatePaths, get_session, Journal
from tui.store.checkpoint import read_checkpoint
from tui.worker.agents import make_agent
from tui.worker.core import SessionWorker
from tui.worker.process import agent_context

core.CHECKPOINT_EVERY = 7
state = StatePaths(Path(sys.argv[1]))
record = get_session(state, sys.argv[2])
paths = state.session(record.id)
checkpoint = read_checkpoint(paths.checkpoint)
journal = Journal.open_for_append(paths.journal, resume=checkpoint.mark if checkpoint else None)
worker = SessionWorker(paths, record, journal, make_agent(agent_context(paths, record)))
worker.writer.load(checkpoint)
worker.writer.quiet = True
for i in range(int(sys.argv[3])):
    worker.writer.emit(TurnStarted(turn_id=f"k-{i}", prompt="x"))
    worker.writer.emit(TextChunk(turn_id=f"k-{i}", text="y"))
os.write(journal._write_fd, b'{"seq":99999,"at":"2026-')  # a torn line, as a kill mid-write leaves
os.kill(os.getpid(), 9)
"""


def test_killed_mid_way_the_next_worker_starts_right(tmp_path: Path) -> None:
    state, sid = _session(tmp_path, 10)
    paths = state.session(sid)
    for turns in (5, 8):
        proc = subprocess.run(
            [sys.executable, "-c", _KILLED, str(state.root), sid, str(turns)],
            timeout=TIMEOUT * 3,
            env={**os.environ, "TUI_STATE_DIR": str(state.root)},
        )
        assert proc.returncode == -9
        checkpoint = read_checkpoint(paths.checkpoint)
        assert checkpoint is not None
        worker = _worker(state, sid)
        assert worker.writer.journal.resumed == checkpoint.mark
        assert 0 < worker.writer.replayed < 7  # only the tail after the last checkpoint
        assert worker.writer.state.model_dump() == _rebuilt(state, sid)
        worker.writer.journal.close()


def test_a_worker_started_on_a_journal_keeps_the_notes_it_holds(tmp_path: Path) -> None:
    """Every type of event the reducer applies is read back at start: a note said during the turn
    left running is in the state a new worker rebuilds, as in one that saw every event."""
    state, sid = _session(tmp_path, 2)
    paths = state.session(sid)
    with Journal.open_for_append(paths.journal) as journal:
        journal.append(Note(text="the agent's process restarted", source="python"))
    expected = SessionState()
    with Journal.open_for_reading(paths.journal) as journal:
        for line in journal.read_after(0, journal.last_seq):
            expected.apply(line.decode())
    worker = _worker(state, sid, resume=False)
    try:
        assert worker.writer.state.model_dump() == expected.model_dump()
    finally:
        worker.writer.journal.close()
