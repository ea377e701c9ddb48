"""`tui send ID PROMPT --wait` on a session whose worker's disk is full: the worker refuses the
turn (507 disk_full) and the command prints that sentence at once and exits 1 (cli.md), never
waits. A real full disk: the state dir on a 4 MiB tmpfs (root only), filled by a file."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import stop_workers

from client.helpers import new_session, tui

pytestmark = pytest.mark.slow


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    with tempfile.TemporaryDirectory(prefix="tui-disk-", dir="/tmp") as d:
        made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", d], capture_output=True)
        if made.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
        state = Path(d) / "state"
        monkeypatch.setenv("TUI_STATE_DIR", str(state))
        try:
            yield state
        finally:
            stop_workers(state)
            subprocess.run(["umount", "-l", d], check=False)


def test_send_wait_says_the_disk_is_full_at_once(full_disk: Path) -> None:
    sid = new_session(full_disk)
    with contextlib.suppress(OSError), (full_disk.parent / "filler").open("wb") as f:
        while True:
            f.write(b"x" * 1024)
            f.flush()
    refused = ""
    # Notes fill what is left of the journal's last page, smaller and smaller, so that less is
    # left than a turn's first line takes (a refused line is cut back off, leaving its room).
    for size in (1000, 100, 1):
        for _ in range(40):
            said = tui("note", sid[:8], "n" * size)
            if said.returncode:
                refused = said.stderr
                break
    assert "disk full: could not append to the journal" in refused, refused
    out = tui("send", sid[:8], "print(1)", "--wait", timeout=20)  # the hang it was: 30 s
    assert out.returncode == 1, out.stderr
    assert out.stderr.startswith("tui: disk full: could not append to the journal "), out.stderr
    assert "free some space, then try again" in out.stderr and out.stdout == ""
