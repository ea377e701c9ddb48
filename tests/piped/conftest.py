"""Every worker a test started ends with the test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from client.helpers import stop_workers


@pytest.fixture(autouse=True)
def _stop_workers(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "state_dir" in request.fixturenames:
        stop_workers(request.getfixturevalue("state_dir"))
