"""The epoch fence: a worker that finds a newer worker of its session (``sessions/ID/epoch``, as a
successor on another machine writes it) writes nothing more and ends; the session goes on with
a new worker, its journal whole."""

from __future__ import annotations

import json
import os
from pathlib import Path

from helpers import wait_until

from client.helpers import journal_seqs, tui, worker_pid
from tui.store import StatePaths


def _runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_a_worker_with_an_older_epoch_writes_nothing_more(state_dir: Path) -> None:
    out = tui("send", "--new", "x = 1", "--wait")
    assert out.returncode == 0, out.stderr
    sid = out.stderr.strip().splitlines()[0]
    paths = StatePaths(state_dir).session(sid)
    assert paths.epoch.read_text() == "1\n"
    old = worker_pid(state_dir, sid)
    written = len(paths.journal.read_text().splitlines())
    # A successor on another machine took the session (its storage did not keep the old one out).
    paths.epoch.write_text("2\n")
    sent = tui("send", sid, "print(6*7)", "--wait")
    wait_until(lambda: not _runs(old), "the fenced worker to end")
    # The old worker wrote nothing after the fence: the next line is its successor's start.
    after = [json.loads(line) for line in paths.journal.read_text().splitlines()[written:]]
    assert after[0]["type"] == "worker_started"
    assert after[0]["pid"] != old and after[0]["epoch"] == 2
    assert "epoch 2" in paths.log.read_text()
    # The prompt ran on the new worker; the journal lost and repeated nothing.
    assert sent.returncode == 0 and sent.stdout == "42\n", sent.stderr
    assert journal_seqs(state_dir, sid) == list(range(1, len(journal_seqs(state_dir, sid)) + 1))
