"""What every part of the suite shares: waiting for a state, reading an event stream, ending workers.

Import it as ``helpers`` (the ``tests`` folder is on the path, as for ``client.helpers``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from tui.store import StatePaths, is_live, read_sidecar

if TYPE_CHECKING:
    from textual.pilot import Pilot

    from tui.worker.core import SessionWorker

TIMEOUT = 20.0
"""The bound on waiting for anything a test expects (generous: the suite runs on 2 busy cores)."""

RUNS_UNTIL_STOPPED = "import threading\nprint('started', flush=True)\nthreading.Event().wait()"
"""A program that says it started, then runs until it is interrupted or stopped (it waits on an
event nothing sets): a turn a test needs running, with no clock in it."""


def worker_here(state_dir: Path, workdir: Path, kind: str) -> SessionWorker:
    """A `SessionWorker` in this process on a new session of agent `kind`, its journal replayed and
    its `worker_started` written (the caller leaves it)."""
    from tui.store import Journal, create_session
    from tui.worker.agents import make_agent
    from tui.worker.core import SessionWorker
    from tui.worker.process import agent_context

    state = StatePaths(state_dir)
    record = create_session(state, working_directory=workdir, agent=kind)
    paths = state.session(record.id)
    worker = SessionWorker(
        paths, record, Journal.open_for_append(paths.journal), make_agent(agent_context(paths, record))
    )
    worker.writer.load()
    worker.begin()
    return worker


def folder_files(root: Path) -> dict[str, tuple[str, bytes, int]]:
    """Every file and link under `root` (its own ``.git`` left out): its kind, its bytes (a link:
    its target) and its executable bits, to compare a folder byte for byte."""
    out: dict[str, tuple[str, bytes, int]] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.split("/")[0] == ".git":
            continue
        if path.is_symlink():
            out[rel] = ("link", os.readlink(path).encode(), 0)
        elif path.is_file():
            out[rel] = ("file", path.read_bytes(), path.stat().st_mode & 0o111)
    return out


def _delays(first: float = 0.002, cap: float = 0.05) -> Any:
    delay = first
    while True:
        yield delay
        delay = min(cap, delay * 1.5)


def wait_until(predicate: Callable[[], object], what: str = "a state", timeout: float = TIMEOUT) -> None:
    """Block until `predicate()` holds, for states no event announces (a lock let go, a process gone).

    Raises:
        AssertionError: it did not hold within `timeout` seconds.
    """
    deadline = time.monotonic() + timeout
    for delay in _delays():
        if predicate():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(delay)


async def eventually(
    predicate: Callable[[], object | Awaitable[object]],
    what: str = "a state",
    timeout: float = TIMEOUT,  # noqa: ASYNC109
    pause: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> None:
    """`wait_until` without blocking the event loop; `predicate` may be a coroutine function.

    Args:
        predicate: the state waited for.
        what: what it is, for the failure message.
        timeout: seconds before the test fails.
        pause: how to wait between two looks (a Textual test passes its pilot's ``pause``, so the
            app runs meanwhile).

    Raises:
        AssertionError: it did not hold within `timeout` seconds.
    """

    async def poll() -> None:
        for delay in _delays():
            held = predicate()
            if inspect.isawaitable(held):
                held = await held
            if held:
                return
            await pause(delay)

    try:
        # A task of its own, as the suite always had: the loop turns once more after the state
        # holds, and some UI tests read the next state right after.
        await asyncio.wait_for(poll(), timeout)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def app_until(
    pilot: Pilot[Any],
    condition: Callable[[], object],
    what: str = "the app's state",
    timeout: float = TIMEOUT,  # noqa: ASYNC109
) -> None:
    """`eventually` in a Textual test: the pilot pauses between two looks, so the app runs meanwhile."""
    await eventually(condition, what, timeout, pause=lambda _: pilot.pause(0.01))


async def app_until_done(
    pilot: Pilot[Any],
    condition: Callable[[], object],
    progress: Callable[[], object],
    what: str = "the app's work",
    stall: float = TIMEOUT,
) -> None:
    """Wait for `condition` while the app works on it, however long the work takes on a busy machine:
    fail only when `progress()` (a measure of the work done, such as events applied) stays the same
    for `stall` seconds, a guard against a hang rather than a bound on speed.

    Raises:
        AssertionError: no progress within `stall` seconds while `condition` did not hold.
    """
    seen = progress()
    since = time.monotonic()
    for delay in _delays():
        if condition():
            return
        now = progress()
        if now != seen:
            seen, since = now, time.monotonic()
        elif time.monotonic() - since > stall:
            raise AssertionError(f"no progress for {stall:.0f} s waiting for {what} (stuck at {now!r})")
        # not `pilot.pause`: it gives up when the screen is busy for 30 s, which a long batch may be
        await asyncio.sleep(delay)


# --- event streams --------------------------------------------------------------------------------


@dataclass
class Sse:
    """One journal event of an ``/events`` stream."""

    seq: int
    type: str
    data: dict[str, Any]


async def read_sse(response: httpx.Response) -> AsyncIterator[Sse]:
    """The journal events of an open ``/events`` response (comments skipped; every event has an id)."""
    ident: str | None = None
    kind = ""
    data: list[str] = []
    async for line in response.aiter_lines():
        if line == "":
            if data:
                assert ident is not None, "every event carries an id"
                yield Sse(int(ident), kind, json.loads("\n".join(data)))
            ident, kind, data = None, "", []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "id":
                ident = value
            elif name == "event":
                kind = value
            elif name == "data":
                data.append(value)


# --- workers --------------------------------------------------------------------------------------


def stop_workers(state_dir: Path, *session_ids: str) -> None:
    """End the workers of the state dir (or only those of `session_ids`) with their sandboxes
    (their process groups), and wait until their locks are free: workers are detached, so a test
    must not leave them behind."""
    state = StatePaths(state_dir)
    ids = session_ids or tuple(folder.name for folder in state.sessions.glob("*/"))
    live = []
    for sid in ids:
        paths = state.session(sid)
        if is_live(paths.lock):
            live.append(paths.lock)  # a worker stopped on request may still be writing its last
        car = read_sidecar(paths.sidecar)
        if car is None:
            continue
        try:
            os.killpg(car.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError):
                os.kill(car.pid, signal.SIGKILL)
    wait_until(lambda: not any(is_live(lock) for lock in live), "the workers to end")
