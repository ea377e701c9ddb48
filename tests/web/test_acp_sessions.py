"""Sessions of a configured ACP agent through `tui web`: made and run remotely, or refused."""

from __future__ import annotations

import os
from pathlib import Path

from acp_agent import agent_pids, configure
from helpers import TIMEOUT, stop_workers, wait_until

from .conftest import Web


def test_an_acp_session_is_made_and_runs_through_the_web_bridge(web: Web, tmp_path: Path) -> None:
    configure(Path(os.environ["TUI_CONFIG_DIR"]), tmp_path / "agent-state")
    with web.client() as c:
        made = c.post("/api/sessions", json={"agent": "tester", "prompt": "hello", "wait": TIMEOUT})
        assert made.status_code == 201, made.text
        sid = made.json()["id"]
        assert made.json()["turn"]["turn_id"]
        assert c.get(f"/api/sessions/{sid}/info").json()["agent"] == "tester"
    stop_workers(web.state, sid)
    wait_until(lambda: not agent_pids(sid), "the agent to end")


def test_a_missing_command_is_400_and_makes_no_session(web: Web) -> None:
    (Path(os.environ["TUI_CONFIG_DIR"]) / "config.toml").write_text(
        '[agents.ghost]\ncommand = ["no-such-acp"]\n'
    )
    with web.client() as c:
        refused = c.post("/api/sessions", json={"agent": "ghost"})
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"] == "invalid_request" and "'no-such-acp'" in refused.json()["detail"]
        assert c.get("/api/sessions").json() == []
