"""The state dir: records, id resolution, the journal, the owner lock, the sidecar, turn records."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tui.errors import AmbiguousId, Conflict, NotFound
from tui.protocol import TextChunk, TurnRecord, TurnStarted, WorkerStarted
from tui.store import (
    Journal,
    OwnerLock,
    StatePaths,
    TurnStore,
    WorkerSidecar,
    archive_session,
    create_session,
    delete_session,
    get_session,
    is_live,
    list_sessions,
    read_sidecar,
    read_span,
    resolve_id,
    save_session,
    socket_path_for,
    write_sidecar,
)


@pytest.fixture
def state(state_dir: Path) -> StatePaths:
    return StatePaths.resolve()


def test_a_new_session_is_listed_and_read_back(state: StatePaths, tmp_path: Path) -> None:
    record = create_session(state, working_directory=tmp_path, title="first")
    assert len(record.id) == 16 and all(c in "0123456789abcdef" for c in record.id)
    again = get_session(state, record.id)
    assert again == record
    assert again.working_directory == str(tmp_path)
    assert [r.id for r in list_sessions(state)] == [record.id]
    folder = state.session(record.id).root
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_archived_sessions_are_hidden_unless_asked(state: StatePaths, tmp_path: Path) -> None:
    a = create_session(state, working_directory=tmp_path)
    b = create_session(state, working_directory=tmp_path)
    archive_session(state, a.id)
    assert [r.id for r in list_sessions(state)] == [b.id]
    assert {r.id for r in list_sessions(state, include_archived=True)} == {a.id, b.id}
    assert get_session(state, a.id).status == "archived"


def test_prefixes_resolve_and_ambiguity_lists_the_matches(state: StatePaths, tmp_path: Path) -> None:
    template = create_session(state, working_directory=tmp_path)
    delete_session(state, template.id)
    for sid in ("abc1000000000000", "abc2000000000000", "def0000000000000"):
        state.session(sid).root.mkdir(parents=True)
        save_session(state, template.model_copy(update={"id": sid}))
    assert resolve_id(state, "def") == "def0000000000000"
    assert resolve_id(state, "abc1000000000000") == "abc1000000000000"
    with pytest.raises(AmbiguousId) as amb:
        resolve_id(state, "abc")
    assert amb.value.fields["matches"] == ["abc1000000000000", "abc2000000000000"]
    assert "abc10000" in str(amb.value) and "abc20000" in str(amb.value)
    with pytest.raises(NotFound, match="tui sessions"):
        resolve_id(state, "ffff")
    with pytest.raises(NotFound):
        get_session(state, "../../etc")


def test_delete_refuses_a_live_worker_then_removes_the_folder(state: StatePaths, tmp_path: Path) -> None:
    record = create_session(state, working_directory=tmp_path)
    paths = state.session(record.id)
    with OwnerLock(paths.lock):
        assert is_live(paths.lock)
        with pytest.raises(Conflict) as refused:
            delete_session(state, record.id)
        assert refused.value.code == "worker_running"
    assert not is_live(paths.lock)
    delete_session(state, record.id)
    assert not paths.root.exists()
    with pytest.raises(NotFound):
        delete_session(state, record.id)


def test_a_second_owner_is_refused_at_once_even_from_another_process(
    state: StatePaths, tmp_path: Path
) -> None:
    record = create_session(state, working_directory=tmp_path)
    lock = state.session(record.id).lock
    with OwnerLock(lock):
        with pytest.raises(Conflict) as second:
            OwnerLock(lock).acquire()
        assert second.value.code == "locked"
        code = f"from tui.store import is_live; from pathlib import Path; print(is_live(Path({str(lock)!r})))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == "True"
    assert lock.exists(), "the lock file is never unlinked"


def test_socket_path_moves_out_of_a_deep_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sid = "0123456789abcdef"
    short = Path("/tmp/s") / sid
    assert socket_path_for(short, sid) == short / "bridge.sock"
    deep = tmp_path / ("d" * 90) / sid
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    moved = socket_path_for(deep, sid)
    assert moved == Path(f"/tmp/tui-{os.getuid()}") / f"{sid}.sock"
    assert stat.S_IMODE(moved.parent.stat().st_mode) == 0o700
    runtime = tmp_path / "run"
    runtime.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert socket_path_for(deep, sid) == runtime / "tui" / f"{sid}.sock"


def test_sidecar_round_trips_and_a_broken_one_reads_as_none(tmp_path: Path) -> None:
    path = tmp_path / "worker.json"
    assert read_sidecar(path) is None
    car = WorkerSidecar(pid=1, epoch=2, socket="/s", started_at=datetime.now(UTC), version="0.1.0")
    write_sidecar(path, car)
    assert read_sidecar(path) == car
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.write_text("{not json")
    assert read_sidecar(path) is None


def _started(epoch: int = 1) -> WorkerStarted:
    return WorkerStarted(epoch=epoch, pid=1, version="0", agent="python")


def test_journal_seq_continues_across_opens_and_reads_from_a_cursor(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal.open_for_append(path) as j:
        first = j.append(_started())
        for i in range(9):
            j.append(TextChunk(turn_id="t", text=f"chunk {i}"))
    assert first.seq == 1
    with Journal.open_for_append(path) as j:
        assert j.last_seq == 10
        assert j.append(_started(2)).seq == 11
        lines = j.read_after(8)
        assert [line.seq for line in lines] == [9, 10, 11]
        assert lines[-1].type == "worker_started"
        assert lines[0].decode() == TextChunk(seq=9, at=lines[0].decode().at, turn_id="t", text="chunk 7")
        assert [line.seq for line in j.read_after(0, limit=3)] == [1, 2, 3]
        one = len(j.read_after(1, 1)[0].raw) + 1
        assert [line.seq for line in j.read_after(1, max_bytes=2 * one + 1)] == [2, 3]
        assert [line.seq for line in j.read_after(1, max_bytes=1)] == [2], "never less than one event"
        assert j.read_after(11) == []


def test_a_reader_sees_what_the_writer_appends_later(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    reader = Journal.open_for_reading(path)
    assert reader.read_after(0) == []
    with Journal.open_for_append(path) as j:
        j.append(_started())
        assert [line.seq for line in reader.read_after(0)] == [1]
        j.append(TurnStarted(turn_id="t1", prompt="print(1)"))
        assert [line.type for line in reader.read_after(1)] == ["turn_started"]
    reader.close()


def test_a_torn_last_line_is_cut_and_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal.open_for_append(path) as j:
        j.append(_started())
        j.append(TextChunk(turn_id="t", text="whole"))
    whole = path.read_bytes()
    with path.open("ab") as f:
        f.write(b'{"seq":3,"at":"2026-01-01T00:00:00Z","type":"text","turn_id":"t","te')
    reader = Journal.open_for_reading(path)
    assert reader.last_seq == 2, "a reader never shows a torn line"
    with caplog.at_level("WARNING", logger="tui.store.journal"), Journal.open_for_append(path) as j:
        assert path.read_bytes() == whole
        assert j.append(TextChunk(turn_id="t", text="next")).seq == 3
    assert "torn" in caplog.text
    assert [line.seq for line in Journal.open_for_reading(path).read_after(0)] == [1, 2, 3]


def test_a_span_read_straight_through_holds_the_lines_a_journal_reads(tmp_path: Path) -> None:
    """`read_span` (a load's replay) gives, of the lines between two seqs, the ones of the types
    asked for, as `Journal.read_after` reads them; a line written in another layout is read by its
    JSON; one still being written ends it; a missing journal is empty."""
    path = tmp_path / "journal.jsonl"
    assert list(read_span(path, 0, 10)) == []
    with Journal.open_for_append(path) as j:
        j.append(_started())
        for i in range(6):
            j.append(TextChunk(turn_id="t", text=f"chunk {i}"))
    with path.open("ab") as f:  # an older layout (type first), then a torn line
        f.write(b'{"type":"text","seq":8,"at":"2026-01-01T00:00:00Z","turn_id":"t","text":"old"}\n')
        f.write(b'{"seq":9,"at":"2026-01-01T00:00:00Z","type":"text","turn_id":"t","te')
    whole = {line.seq: line for line in Journal.open_for_reading(path).read_after(0)}
    assert sorted(whole) == [1, 2, 3, 4, 5, 6, 7, 8]
    spans = list(read_span(path, 2, 7, {"text"}))
    assert spans[-1][0] == 7, "the last seq read comes with each batch"
    assert [line for _, lines in spans for line in lines] == [whole[s] for s in (3, 4, 5, 6, 7)]
    assert [line.seq for _, lines in read_span(path, 0, 99) for line in lines] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert [line.decode().text for _, lines in read_span(path, 7, 99) for line in lines] == ["old"]
    assert [lines for _, lines in read_span(path, 0, 99, {"turn_started"})] == [[]]


def test_turn_records_page_backwards(tmp_path: Path) -> None:
    store = TurnStore(tmp_path / "turns")
    for n in range(1, 8):
        store.save(TurnRecord(turn_id=f"t{n}", prompt=f"p{n}", started_seq=n * 10, outcome="completed"))
    last, more = store.page(3)
    assert [r.turn_id for r in last] == ["t5", "t6", "t7"] and more
    older, more = store.page(3, before="t5")
    assert [r.turn_id for r in older] == ["t2", "t3", "t4"] and more
    oldest, more = store.page(3, before="t2")
    assert [r.turn_id for r in oldest] == ["t1"] and not more
    assert [r.turn_id for r in TurnStore(tmp_path / "turns").page(2)[0]] == ["t6", "t7"]
    with pytest.raises(KeyError):
        store.page(3, before="nope")
