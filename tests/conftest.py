"""Fixtures every part of the suite may use."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anthropic  # noqa: F401 - imported here, at a shallow stack: see below
import hypothesis  # noqa: F401 - the same: see below
import pytest

# Python 3.11's `ast` can fail with "AST constructor recursion depth mismatch" when pytest
# rewrites a module first imported deep inside a running coroutine; anthropic imports anyio's
# lazily loaded modules on its own import, which a model test's worker did at that depth.
# Once that happened, every later rewrite fails the same way: hypothesis's plugin imports
# hypothesis in the closing summary, which crashed a run of one module that uses no hypothesis
# (tests/web/test_remote.py alone) after all its tests had passed.


@pytest.fixture
def state_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh state dir of this test's own, short enough for Unix socket paths, as TUI_STATE_DIR."""
    with tempfile.TemporaryDirectory(prefix="tui-", dir="/tmp") as d:
        path = Path(d)
        monkeypatch.setenv("TUI_STATE_DIR", str(path))
        yield path


@pytest.fixture(autouse=True)
def _no_user_state(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test reads or writes the user's real state dir."""
    if "TUI_STATE_DIR" not in os.environ:
        monkeypatch.setenv("TUI_STATE_DIR", str(tmp_path_factory.mktemp("state")))


@pytest.fixture(autouse=True)
def _no_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers keep no checkpoints of their folders (many tests' folder is this checkout, whose
    first checkpoint reads every file); the tests of checkpoints turn them on
    (``TUI_CHECKPOINTS=on``)."""
    monkeypatch.setenv("TUI_CHECKPOINTS", "off")


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test reads the user's real ``config.toml``: each has an empty config dir of its own."""
    monkeypatch.setenv("TUI_CONFIG_DIR", str(tmp_path_factory.mktemp("config")))


@pytest.fixture(autouse=True)
def _no_user_tmux(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reaches the tmux the suite may run in (a copy inside tmux is handed to it)."""
    monkeypatch.delenv("TMUX", raising=False)
