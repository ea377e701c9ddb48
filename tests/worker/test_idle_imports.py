"""What an idle worker holds in memory: the modules it imports to serve a python session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import TIMEOUT

from tui.link import launch
from tui.link.launch import start_worker
from tui.store import StatePaths
from worker.conftest import Worker

NOT_UNTIL_USED = {
    "websockets": "uvicorn's websocket protocol (the bridge has no websocket route)",
    "html": "Starlette's error page (imported with starlette.applications)",
    "starlette.applications": "Starlette's application around the router",
    "tui.access": "the access layer, needed only to follow a child session",
    "tui.link": "the client side, needed only to follow a child session",
    "uvicorn.main": "uvicorn's command line (click and its reloaders)",
    "click": "uvicorn's command line",
    "multiprocessing": "uvicorn's reloaders",
}


async def test_a_python_session_s_worker_imports_nothing_it_does_not_use(
    state_dir: Path, new_session: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker (isolated: no PYTHON* variable reaches it) writes every import it makes to its log.
    command = launch.worker_command
    monkeypatch.setattr(
        launch,
        "worker_command",
        lambda root, sid: [*command(root, sid)[:2], "-X", "importtime", *command(root, sid)[2:]],
    )
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


def test_an_idle_worker_trims_its_heap_once_per_idle_spell(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace
    from typing import Any, cast

    from tui.worker import process

    process._trim_heap()  # the real call: glibc's malloc_trim, or nothing where there is none
    trims: list[float] = []
    worker = SimpleNamespace(writer=SimpleNamespace(last_activity=100.0))
    monkeypatch.setattr(process, "_trim_heap", lambda: trims.append(worker.writer.last_activity))
    look = cast(Any, process._trim_when_idle)
    trimmed = look(worker, 1.0, 0.0)  # busy a moment ago: not yet
    assert trims == []
    trimmed = look(worker, process.TRIM_AFTER, trimmed)
    trimmed = look(worker, process.TRIM_AFTER + 30, trimmed)  # the same spell: once
    assert trims == [100.0]
    worker.writer.last_activity = 250.0  # a turn ran since
    trimmed = look(worker, 2.0, trimmed)
    assert trims == [100.0]
    look(worker, process.TRIM_AFTER, trimmed)
    assert trims == [100.0, 250.0]
