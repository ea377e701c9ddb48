"""UI test helpers: waiting on a condition, and snapshot pictures kept in `snapshots/`."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
import pytest_textual_snapshot
from helpers import TIMEOUT, app_until
from syrupy.location import PyTestLocation
from textual.pilot import Pilot

SNAPSHOTS = Path(__file__).resolve().parents[2] / "snapshots"


class _SnapshotsAtTop(pytest_textual_snapshot.SVGImageExtension):
    """Pictures live in `snapshots/` at the top of the repository, one folder per test module."""

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        return str(SNAPSHOTS / Path(test_location.filepath).stem)


pytest_textual_snapshot.SVGImageExtension = _SnapshotsAtTop  # type: ignore[misc]

Until = Callable[[Pilot[object], Callable[[], object]], Awaitable[None]]


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Times are shown in UTC (the local time of whoever runs the tests would change pictures)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def until() -> Until:
    """Wait (pausing the pilot) until `condition()` is true; the limit only guards against a hang."""

    async def wait(pilot: Pilot[object], condition: Callable[[], object], limit: float = TIMEOUT) -> None:
        await app_until(pilot, condition, timeout=limit)

    return wait
