"""Runs one attack on tui's confinement, as the user running it, and prints what came back (JSON).

Started by tests/worker/test_confinement.py as root or, through ``setpriv``, as a plain user, with
the interpreter of the setup's own ``.venv`` (so that venv is the installation running tui):

    PYTHONPATH=tests python tests/confine_driver.py SPEC_JSON

SPEC: ``{"mode": "worker" | "session", "state": DIR, "workdir": DIR, "agent": NAME,
"mechanism": "landlock" | "bubblewrap", "prompt": TEXT}``. ``worker``: a real session with a live
worker, one turn of `prompt` (``{worker_pid}`` in it replaced by the worker's pid); ``session``: a
`PythonSession` opened as the worker opens it (`mechanism` forced), `prompt` run as a program.
Prints ``{"reply": …, "notes": […], "outcome": …}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from helpers import TIMEOUT, stop_workers
from worker.conftest import Worker

from tui.codemode import Limits, PythonSession
from tui.config import config_dir
from tui.link.launch import start_worker
from tui.store import StatePaths, create_session
from tui.store.paths import socket_fallback_dirs


async def in_worker(spec: dict[str, Any]) -> dict[str, Any]:
    state = StatePaths(Path(spec["state"]))
    sid = create_session(state, working_directory=spec["workdir"], agent=spec["agent"]).id
    worker = Worker(state, sid, start_worker(state, sid, timeout=TIMEOUT))
    try:
        ended = await worker.turn(spec["prompt"].replace("{worker_pid}", str(worker.sidecar.pid)))
        lines = worker.paths.journal.read_text().splitlines()
        notes = [json.loads(line)["text"] for line in lines if '"type":"note"' in line]
        return {"reply": ended["reply"], "outcome": ended["outcome"], "error": ended["error"], "notes": notes}
    finally:
        await worker.close()
        stop_workers(state.root, sid)
        # a state dir an attack moved away is not where stop_workers looks
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(worker.sidecar.pid, signal.SIGKILL)


async def in_session(spec: dict[str, Any]) -> dict[str, Any]:
    state = Path(spec["state"])
    folders = [state, config_dir(), *socket_fallback_dirs()]
    try:
        from tui.worker.agents._sandbox import tui_token_files

        protect: dict[str, Any] = {"tui_folders": folders, "hidden": tui_token_files(folders)}
    except ImportError:  # the code before tui's folders were made and token files known
        protect = {"hidden": folders}
    session = PythonSession(
        spec["workdir"], Limits(observe_seconds=20.0), mechanism=spec["mechanism"], **protect
    )
    async with session:
        result = await session.execute(source=spec["prompt"])
    error = result.error.message if result.error else None
    return {"reply": result.output, "outcome": result.status, "error": error, "notes": [session.sandbox]}


def main() -> None:
    spec = json.loads(sys.argv[1])
    run = in_worker if spec["mode"] == "worker" else in_session
    print(json.dumps(asyncio.run(run(spec))))


if __name__ == "__main__":
    main()
