"""What an idle worker holds in memory: the modules it imports to serve a python session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import TIMEOUT

from tui.link.launch import start_worker
from tui.store import StatePaths
from worker.conftest import Worker

NOT_UNTIL_USED = {
    "websockets": "uvicorn's websocket protocol (the bridge has no websocket route)",
    "html": "Starlette's error page (imported with starlette.applications)",
    "starlette.applications": "Starlette's application around the router",
    "tui.access": "the access layer, needed only to follow a child session",
    "tui.link": "the client side, needed only to follow a child session",
}


async def test_a_python_session_s_worker_imports_nothing_it_does_not_use(
    state_dir: Path, new_session: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker inherits the variable and writes every import it makes to its log.
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")
    state = StatePaths(state_dir)
    sid = new_session()
    worker = Worker(state, sid, start_worker(state, sid, timeout=TIMEOUT))
    try:
        ended = await worker.turn("print(1)")
        assert ended["outcome"] == "completed" and ended["reply"] == "1\n"
        missing = await worker.client().get("/no-such-route")
        assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    finally:
        await worker.close()
    imported = {
        line.split("|")[-1].strip()
        for line in worker.paths.log.read_text().splitlines()
        if line.startswith("import time:")
    }
    assert "tui.codemode" in imported, "the log holds no import times: the test sees nothing"
    loaded = {name: why for name, why in NOT_UNTIL_USED.items() if name in imported}
    assert not loaded, f"an idle python session's worker imports {loaded}"
