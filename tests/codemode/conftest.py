"""Fixtures for Code Mode: a real sandboxed session in a working folder of the test's own."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tui.codemode import Limits, PythonSession
from tui.codemode.sandbox import landlock_abi

HAVE_BWRAP = shutil.which("bwrap") is not None or Path("/usr/bin/bwrap").exists()
HAVE_LANDLOCK = landlock_abi() >= 1
MECHANISMS = {"bubblewrap": HAVE_BWRAP, "landlock": HAVE_LANDLOCK}


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A fresh working folder for the program (the test skips where no sandbox can be made)."""
    if not (HAVE_BWRAP or HAVE_LANDLOCK):
        pytest.skip("neither bubblewrap nor Landlock is available (apt install bubblewrap)")
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


@pytest.fixture(params=sorted(MECHANISMS))
def mechanism(request: pytest.FixtureRequest) -> str:
    """Each way of confining the program that this host offers."""
    name: str = request.param
    if not MECHANISMS[name]:
        pytest.skip(f"{name} is not available here")
    return name
