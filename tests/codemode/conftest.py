"""Fixtures for Code Mode: a real sandboxed session in a working folder of the test's own."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tui.codemode import Limits, PythonSession

HAVE_BWRAP = shutil.which("bwrap") is not None or Path("/usr/bin/bwrap").exists()


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A fresh working folder for the program (the test skips where bubblewrap is missing)."""
    if not HAVE_BWRAP:
        pytest.skip("bubblewrap is not installed (apt install bubblewrap)")
    with tempfile.TemporaryDirectory(prefix="tui-cm-", dir="/tmp") as root:
        work = Path(root) / "work"
        work.mkdir()
        yield work


@pytest.fixture
async def session(workdir: Path) -> AsyncIterator[PythonSession]:
    """A started session that observes for 5 s, so short programs complete in one result."""
    async with PythonSession(workdir, Limits(observe_seconds=5.0)) as started:
        yield started


@pytest.fixture
async def quick(workdir: Path) -> AsyncIterator[PythonSession]:
    """A started session that observes for 0.2 s, for programs that outlive one observation."""
    async with PythonSession(workdir, Limits(observe_seconds=0.2)) as started:
        yield started
