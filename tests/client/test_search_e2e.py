"""``tui search`` end to end: real workers write the index as their turns end, and a `tui search`
process finds what a program printed in a stopped, archived session."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from helpers import wait_until

from client.helpers import new_session, tui
from tui.store.index import INDEX_FILE

# The word is printed in two pieces a moment apart, and spelt nowhere in the prompt.
PRINTS = "import time; print('mar' + 'mot', end='', flush=True); time.sleep(0.3); print('ade_jar ok')"


def _indexed(state_dir: Path, word: str) -> int:
    try:
        with sqlite3.connect(state_dir / INDEX_FILE) as db:
            return int(
                db.execute("SELECT count(*) FROM words WHERE words MATCH ?", (f'"{word}"',)).fetchone()[0]
            )
    except sqlite3.OperationalError:  # not made yet
        return 0


def test_a_word_a_program_printed_in_a_stopped_archived_session_is_found(state_dir: Path) -> None:
    sid = new_session(state_dir, PRINTS)
    short = sid[:8]
    # The worker indexed the turn when it ended: no search was needed for it.
    wait_until(lambda: _indexed(state_dir, "marmotade_jar") == 1, "the worker to index the turn")
    assert tui("stop", short).returncode == 0
    assert tui("archive", short).returncode == 0

    found = tui("search", "MARMOTADE_jar")
    assert found.returncode == 0, found.stderr
    head, snippet = found.stdout.splitlines()[:2]
    assert head.startswith(f"{short}  turn 1  ") and "  reply  " in head and "(archived)" in head
    assert snippet.strip() == "«marmotade_jar» ok"
    assert f"tui attach {short} --turn 1" in found.stderr

    as_json = tui("search", "marmot*", "--json", "--in", "reply")
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    (hit,) = data["hits"]
    assert hit["session_id"] == sid and hit["turn"] == 1 and hit["where"] == "reply"
    assert hit["archived"] is True and hit["folder"] and hit["agent"] == "python"
    assert hit["snippet"][hit["match"][0] : hit["match"][1]] == "marmotade"
    assert data["more"] is False and data["machines"] == [{"where": "here", "answered": True, "hits": 1}]

    skipped = tui("search", "marmotade_jar", "--active")  # archived sessions left out: none holds it
    assert skipped.returncode == 1 and "no session holds 'marmotade_jar'" in skipped.stderr
    bad = tui("search", "marmot", "--in", "elsewhere")
    assert bad.returncode == 2 and "--in elsewhere" in bad.stderr

    # The journal is the truth: without the index, the next search builds it again.
    for suffix in ("", "-wal", "-shm"):
        Path(str(state_dir / INDEX_FILE) + suffix).unlink(missing_ok=True)
    again = tui("search", "marmotade_jar", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["hits"][0]["turn"] == 1
