"""Docs that state a fact of the code say what the code does."""

from __future__ import annotations

from pathlib import Path

from tui.store import StatePaths
from tui.store.remotes import _path as remotes_path
from tui.ui.widgets.transcript import WINDOW

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _row(doc: str, starts: str) -> str:
    return next(line for line in (DOCS / doc).read_text().splitlines() if line.startswith(starts))


def test_architecture_says_how_many_ended_turns_the_app_mounts() -> None:
    text = " ".join((DOCS / "architecture.md").read_text().split())
    assert f"at most {WINDOW} ended turns are kept" in text


def test_codemode_puts_remotes_toml_where_the_code_keeps_it(tmp_path: Path) -> None:
    assert remotes_path(StatePaths(tmp_path)).parent == tmp_path, "remotes.toml is in the state dir"
    assert "remotes.toml" in _row("codemode.md", "| tui's state dir")
    assert "remotes.toml" not in _row("codemode.md", "| tui's config dir")
