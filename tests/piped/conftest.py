"""Every worker a test started ends with the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import stop_workers


@pytest.fixture
def state_dir(state_dir: Path) -> Iterator[Path]:
    """The suite's state dir, whose workers are ended after the test."""
    yield state_dir
    stop_workers(state_dir)
