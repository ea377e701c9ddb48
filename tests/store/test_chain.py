"""The journal's chain (`tui.store.chain`): a line changed, removed or reordered is named; a
journal an older tui began, and a worker that continues a journal, keep chaining."""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import stop_workers

from tui.commands.audit import _costs_line
from tui.protocol import TextChunk
from tui.store import Journal, StatePaths, create_session
from tui.store.chain import chain_path, verify


def _write(path: Path, n: int, start: int = 0) -> None:
    with Journal.open_for_append(path) as j:
        for i in range(start, start + n):
            j.append(TextChunk(turn_id="t-1", text=f"line {i}\n"))


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def test_an_untouched_journal_verifies_across_workers_and_a_kept_head_is_found(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    _write(path, 3)
    first = verify(path)
    _write(path, 2, 3)  # a new worker continues the journal, and the chain
    verdict = verify(path)
    assert verdict.intact and verdict.lines == 5 and verdict.head_seq == 5 and verdict.since == 1
    assert first.head in verdict.heads and verdict.heads[first.head] == 3


def test_a_changed_removed_or_reordered_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    _write(path, 6)
    good = _lines(path)
    cases = {
        "line 3 (seq 3) was changed": [*good[:2], good[2].replace(b"line 2", b"line X"), *good[3:]],
        "the line of seq 4 was removed (line 4 holds seq 5)": [*good[:3], *good[4:]],
        "line 2 (seq 3) is out of order: seq 2 was expected there": [good[0], good[2], good[1], *good[3:]],
        "the line of seq 6 was removed (the journal ends at line 5)": good[:5],
        "line 7 (seq 9) has no link in the chain: it was added afterwards": [
            *good,
            good[5].replace(b":6,", b":9,"),
        ],
    }
    for said, lines in cases.items():
        path.write_bytes(b"".join(lines))
        verdict = verify(path)
        assert not verdict.intact and verdict.problem == said, (said, verdict.problem)


def test_an_older_journal_reads_says_it_has_no_chain_and_is_chained_from_the_next_event(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.jsonl"
    _write(path, 2)
    chain_path(path).unlink()  # as an older tui left it
    assert not verify(path).chained and "no chain" in verify(path).says()
    _write(path, 2, 2)
    verdict = verify(path)
    assert verdict.intact and verdict.since == 3 and "chained from seq 3" in verdict.says()
    path.write_bytes(path.read_bytes().replace(b"line 0", b"line Z"))
    assert verify(path).problem == "the lines before seq 3 (one block, from an older tui) were changed"


def test_a_worker_killed_between_the_two_writes_has_its_links_added_by_the_next(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    _write(path, 4)
    chain = chain_path(path)
    rows = chain.read_bytes().splitlines(keepends=True)
    chain.write_bytes(b"".join(rows[:-2]) + rows[-2][:10])  # one link lost, one torn
    _write(path, 1, 4)
    assert verify(path).intact and verify(path).lines == 5


def test_tui_verify_names_an_edited_line_and_tui_audit_json_has_the_chain_head(state_dir: Path) -> None:
    sid = create_session(StatePaths(state_dir), working_directory=str(state_dir)).id
    journal = StatePaths(state_dir).session(sid).journal
    _write(journal, 4)
    env = {**os.environ, "TUI_STATE_DIR": str(state_dir)}

    def tui(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tui", *args], env=env, capture_output=True, text=True, timeout=60
        )

    audit = tui("audit", sid, "--json")
    assert audit.returncode == 0, audit.stderr
    report = json.loads(audit.stdout)
    assert set(report) == {"session_id", "chain", "entries", "costs", "shares"}
    assert report["chain"]["intact"] and report["chain"]["head"].startswith("4:")
    said = tui("audit", sid)
    assert said.stdout.splitlines()[-1] == "costs: none reported"  # not "unknown; tokens {}"
    ok = tui("verify", sid, "--head", report["chain"]["head"])
    assert ok.returncode == 0 and "intact: 4 lines" in ok.stdout and "kept elsewhere is in it" in ok.stdout
    journal.write_bytes(journal.read_bytes().replace(b"line 1", b"line 9"))
    bad = tui("verify", sid)
    assert bad.returncode == 1 and bad.stderr.strip() == f"session {sid[:8]}: line 2 (seq 2) was changed"


def test_shares_made_and_revoked_are_in_the_chain_listed_by_audit_and_covered_by_verify(
    state_dir: Path,
) -> None:
    sid = create_session(StatePaths(state_dir), working_directory=str(state_dir)).id
    journal = StatePaths(state_dir).session(sid).journal
    env = {**os.environ, "TUI_STATE_DIR": str(state_dir)}

    def tui(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tui", *args], env=env, capture_output=True, text=True, timeout=60
        )

    try:
        assert tui("share", sid, "--name", "gus", "--kind", "viewer").returncode == 0
        assert tui("share", "revoke", sid, "--participant", "gus").returncode == 0
    finally:
        stop_workers(state_dir)
    report = json.loads(tui("audit", sid, "--json").stdout)
    said = [(e["what"], e["by"], e["name"]) for e in report["entries"] if e["what"].startswith("share")]
    assert said == [("share_made", f"owner:{getpass.getuser()}", "gus"), ("share_revoked", said[0][1], "gus")]
    [share] = report["shares"]
    assert share["in_chain"] and share["state"] == "revoked" and share["revoked_at"], share
    # The share's line is covered by the chain: a name changed there is named.
    lines = journal.read_bytes().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if b'"share_changed"' in line)
    lines[at] = lines[at].replace(b'"gus"', b'"eve"')
    journal.write_bytes(b"".join(lines))
    bad = tui("verify", sid)
    assert bad.returncode == 1 and f"line {at + 1} " in bad.stderr and "was changed" in bad.stderr, bad.stderr


def test_the_costs_line_names_what_was_reported_in_words() -> None:
    assert _costs_line("$0.12", {"input_tokens": 1200, "output_tokens": 300}) == (
        "costs: $0.12; tokens: 1,200 input, 300 output\n"
    )
    assert _costs_line(None, {"input_tokens": 50}) == "costs: not reported; tokens: 50 input\n"
