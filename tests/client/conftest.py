"""Every worker a test started ends with the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from acp_agent import agent_pids, configure
from helpers import stop_workers, wait_until

from client.helpers import sessions


@pytest.fixture
def state_dir(state_dir: Path) -> Iterator[Path]:
    """The suite's state dir, whose workers are ended after the test."""
    yield state_dir
    stop_workers(state_dir)


@pytest.fixture
def acp_tester(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, state_dir: Path) -> Iterator[Path]:
    """The test agent configured as ``[agents.tester]``; the working directory is `tmp_path`/work.
    Its agents' processes are waited for after the test."""
    config = tmp_path / "config"
    config.mkdir()
    configure(config, tmp_path / "agent-state")
    monkeypatch.setenv("TUI_CONFIG_DIR", str(config))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    yield work
    live = [s["id"] for s in sessions()]
    stop_workers(state_dir)
    wait_until(lambda: not any(agent_pids(sid) for sid in live), "the agents to end")
