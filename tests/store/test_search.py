"""Finding text in a journal: what JSON escapes is found as typed, every block boundary holds, one
hit per turn and place, the running turn left to the worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.protocol import TextChunk, ToolEnded, ToolOutput, ToolStarted, TurnEnded, TurnStarted
from tui.store import Journal
from tui.store import search as search_module
from tui.store.search import Finder, snippet


def _journal(path: Path, turns: int = 30) -> Path:
    with Journal.open_for_append(path) as j:
        for i in range(turns):
            turn_id = f"t{i}"
            j.append(TurnStarted(turn_id=turn_id, prompt=f'print("turn {i}")\n# Quote "me" \\ here'))
            j.append(ToolStarted(turn_id=turn_id, call_id=f"c{i}", name="shell", args={"cmd": f"ls\t-l {i}"}))
            j.append(ToolOutput(turn_id=turn_id, call_id=f"c{i}", text=f"file {i}\nOTTER {i}\n"))
            j.append(ToolEnded(turn_id=turn_id, call_id=f"c{i}", status="error", error=f"exit {i}"))
            j.append(TextChunk(turn_id=turn_id, text=f"reply {i}"))
            j.append(TurnEnded(turn_id=turn_id, outcome="completed", reply=f"reply {i}\nthe otter swims"))
    return path


def _find(path: Path, text: str, **kw: object) -> Finder:
    finder = Finder(text, int(kw.pop("limit", 200)))  # type: ignore[call-overload]
    finder.journal(path, **kw)  # type: ignore[arg-type]
    return finder


@pytest.mark.parametrize("block", [64, 1000, 4 << 20])
def test_every_place_is_found_once_per_turn_in_order_at_any_block_size(
    tmp_path: Path, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_module, "BLOCK", block)
    path = _journal(tmp_path / "journal.jsonl")
    otter = _find(path, "otter")
    assert [(h.turn_id, h.where) for h in otter.hits[:2]] == [("t0", "tool"), ("t0", "reply")]
    assert otter.total == 60 and not otter.more
    assert otter.hits[0].snippet == "OTTER 0"
    assert [h.turn_id for h in _find(path, "exit 7").hits] == ["t7"]
    assert _find(path, "exit 7").hits[0].where == "error"


def test_what_json_escapes_is_found_as_typed(tmp_path: Path) -> None:
    path = _journal(tmp_path / "journal.jsonl", 3)
    assert _find(path, 'quote "ME" \\ here').total == 3
    assert [h.where for h in _find(path, "ls\t-l 1").hits] == ["tool"]
    assert _find(path, '("turn 1")\n# quote').total == 1
    assert _find(path, "nowhere").total == 0


def test_a_limit_keeps_the_oldest_and_counts_all(tmp_path: Path) -> None:
    path = _journal(tmp_path / "journal.jsonl")
    found = _find(path, "reply", limit=5)
    assert [h.turn_id for h in found.hits] == ["t0", "t1", "t2", "t3", "t4"]
    assert found.total == 30 and found.more


def test_the_running_turn_is_left_out_and_a_size_bounds_the_read(tmp_path: Path) -> None:
    path = _journal(tmp_path / "journal.jsonl", 3)
    assert [h.turn_id for h in _find(path, "otter", skip="t1").hits] == ["t0", "t0", "t2", "t2"]
    size = path.stat().st_size
    with path.open("a") as f:
        f.write(
            '{"seq":99,"at":"2026-01-01T00:00:00Z","type":"turn_started","turn_id":"late","prompt":"otter"}\n'
        )
    assert "late" not in {h.turn_id for h in _find(path, "otter", upto=size).hits}
    assert "late" in {h.turn_id for h in _find(path, "otter").hits}


def test_a_snippet_is_the_line_around_the_match() -> None:
    assert snippet("first\nthe Otter swims\nlast", "otter") == "the Otter swims"
    long = "x" * 300 + " otter " + "y" * 300
    cut = snippet(long, "otter")
    assert cut.startswith("…") and cut.endswith("…") and "otter" in cut and len(cut) <= 102
    assert snippet("nothing", "otter") == ""
