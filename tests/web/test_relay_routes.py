"""`tui relay`, the app behind an SSH remote, started as ssh starts it: it serves the session
routes as the owner, but refuses the participants routes (shares are made on the machine itself,
through its `tui web`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
from helpers import TIMEOUT

from tui.store import StatePaths, create_session


def test_tui_relay_refuses_the_participants_routes_in_one_sentence(state_dir: Path) -> None:
    sid = create_session(StatePaths(state_dir), working_directory=str(state_dir)).id
    relay = subprocess.Popen(
        [sys.executable, "-m", "tui", "relay"],
        env={**os.environ, "TUI_STATE_DIR": str(state_dir)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert relay.stdin is not None and relay.stdout is not None
    try:
        banner = relay.stdout.readline().split()
        assert banner[0] == "tui-relay", banner
        transport = httpx.HTTPTransport(uds=banner[-1])
        with httpx.Client(transport=transport, base_url="http://tui-relay", timeout=TIMEOUT) as c:
            assert c.get(f"/api/sessions/{sid}").status_code == 200  # the owner's, no token
            base = f"/api/sessions/{sid}/participants"
            for refused in (
                c.post(base, json={"name": "ana", "kind": "collaborator"}),
                c.get(base),
                c.delete(base),
            ):
                assert refused.status_code == 403, refused.text
                detail = refused.json()["detail"]
                assert "an SSH remote does not share its sessions" in detail and "tui share" in detail
        assert not (state_dir / "web" / "participants.json").exists()  # nothing was shared
    finally:
        relay.stdin.close()  # the connection ended: the relay stops
        assert relay.wait(TIMEOUT) == 0
        relay.stdout.close()
        assert relay.stderr is not None
        relay.stderr.close()
