"""`tui acp`: an editor's ACP client (the `acp` package's own client side) on tui sessions."""

from __future__ import annotations

from pathlib import Path

import pytest
from editor import editor

from client.helpers import sessions, tui


async def test_a_turn_in_a_new_python_session(state_dir: Path, tmp_path: Path) -> None:
    async with editor() as ed:
        sid = await ed.new(tmp_path)
        answer = await ed.prompt(sid, "print(6 * 7)")
        assert answer.stop_reason == "end_turn"
        assert "42" in ed.said(sid)
    [row] = sessions()
    assert row["id"] == sid and row["folder"] == str(tmp_path)
    assert row["live"], "closing the editor leaves the session running"
    shown = tui("transcript", sid)
    assert "print(6 * 7)" in shown.stdout and "42" in shown.stdout
