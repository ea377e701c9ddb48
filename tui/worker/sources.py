"""Context sources: named values the agent is given at each turn (docs/protocol.md).

A source is a shell command run every N seconds, a file read every N seconds (both inside the
session's sandbox, by the rule its programs follow), or a value pushed from outside. Each is a
`context_source` event and each new value a `context_value` event, so the journal has them and a
new worker goes on where the last one stopped. A command runs again only `every` seconds after its
last run ended: never more often than asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
from collections.abc import Callable, Sequence

from tui.errors import DiskFull, InvalidRequest, NotFound
from tui.protocol import (
    MAX_CONTEXT_VALUE,
    By,
    ContextAddRequest,
    ContextEntry,
    ContextSourceSet,
    ContextValue,
)
from tui.worker.writer import EventWriter

__all__ = ["MIN_EVERY", "OUTPUT_LIMIT", "ContextSources"]

log = logging.getLogger("tui.worker.sources")

MIN_EVERY = 1.0
"""The shortest interval a command or a file source may ask for, in seconds."""
DEFAULT_FILE_EVERY = 10.0
"""How often a file source is read when no interval was given."""
RUN_LIMIT = 60.0
"""The longest one run of a command may take: after it, it is killed and the value says so."""

OUTPUT_LIMIT = 1024 * 1024
"""The most of one run's output that is read, in bytes: past it the command is stopped (a file
source swapped for ``/dev/zero``, a command printing forever) and its value says it was cut."""
_KEPT_BYTES = 4 * MAX_CONTEXT_VALUE
"""The last bytes of a run kept while it is read: enough for `MAX_CONTEXT_VALUE` characters."""
_CHUNK = 64 * 1024

Confine = Callable[[Sequence[str]], list[str]]
"""A command line made to run inside the session's sandbox."""


def bounded(text: str) -> tuple[str, int]:
    """`text` cut to its last `MAX_CONTEXT_VALUE` characters, and its length before."""
    return text[-MAX_CONTEXT_VALUE:], len(text)


class ContextSources:
    """The session's context sources: adding, removing, pushing, and the runs of each command.

    Args:
        writer: the session's event writer (its state holds the sources).
        workdir: the session's folder (where commands run and files are found).
        by: who a request comes from when nobody else is named.
    """

    def __init__(self, writer: EventWriter, workdir: str, by: By) -> None:
        self.writer = writer
        self.workdir = workdir
        self.by = by
        self.confine: Confine | None = None
        """How a command is confined (set by the worker process); None: commands are not run."""
        self.unconfined_reason = "no sandbox was set up for this worker"
        self._runs: dict[str, asyncio.Task[None]] = {}

    @property
    def entries(self) -> list[ContextEntry]:
        return list(self.writer.state.sources.values())

    def start(self) -> None:
        """Start running the command and file sources the journal has (a new worker goes on)."""
        for entry in self.entries:
            if entry.kind != "push":
                self._run(entry)

    def add(self, request: ContextAddRequest, by: By | None = None) -> ContextEntry:
        """Add a source (replacing one of the same name) and start running it.

        Raises:
            InvalidRequest: not exactly one of cmd, path and push; an interval too short.
        """
        given = [
            kind for kind, on in (("cmd", request.cmd), ("file", request.path), ("push", request.push)) if on
        ]
        if len(given) != 1:
            raise InvalidRequest(
                "a context source is one of --cmd CMD --every S, --file PATH or --push", field="cmd"
            )
        kind = given[0]
        every = request.every
        if kind == "cmd" and every < MIN_EVERY:
            raise InvalidRequest(
                f"--every: a command source runs at most once a second; give --every {MIN_EVERY:g} or more",
                field="every",
            )
        if kind == "file":
            every = every or DEFAULT_FILE_EVERY
            if every < MIN_EVERY:
                raise InvalidRequest(f"--every: {MIN_EVERY:g} seconds or more", field="every")
        if kind == "push":
            every = 0.0
        self._stop(request.name)
        self.writer.emit(
            ContextSourceSet(
                name=request.name,
                kind=kind,  # type: ignore[arg-type]
                cmd=request.cmd,
                path=request.path,
                every=every,
                why=request.why,
                by=by or self.by,
            )
        )
        entry = self.writer.state.sources[request.name]
        if kind != "push":
            self._run(entry)
        return entry

    def remove(self, name: str, by: By | None = None) -> None:
        """Remove a source (its runs stop).

        Raises:
            NotFound: no source of that name.
        """
        self._known(name)
        self._stop(name)
        self.writer.emit(ContextSourceSet(name=name, removed=True, by=by or self.by))

    def push(self, name: str, value: str) -> int:
        """A pushed source's new value; the seq of its event.

        Raises:
            NotFound: no source of that name.
            InvalidRequest: the source is a command's or a file's.
        """
        entry = self._known(name)
        if entry.kind != "push":
            raise InvalidRequest(
                f"context source {name!r} is a {'command' if entry.kind == 'cmd' else 'file'}; "
                "only a source added with --push takes pushed values",
                field="name",
            )
        kept, size = bounded(value)
        return self.writer.emit(ContextValue(name=name, value=kept, size=size)).seq

    def _known(self, name: str) -> ContextEntry:
        entry = self.writer.state.sources.get(name)
        if entry is None:
            named = ", ".join(self.writer.state.sources) or "none"
            raise NotFound(f"no context source {name!r} in this session (its sources: {named})", field="name")
        return entry

    # --- runs ----------------------------------------------------------------------------------
    def _run(self, entry: ContextEntry) -> None:
        self._stop(entry.name)
        self._runs[entry.name] = asyncio.get_running_loop().create_task(
            self._loop(entry), name=f"context source {entry.name}"
        )

    def _stop(self, name: str) -> None:
        task = self._runs.pop(name, None)
        if task is not None:
            task.cancel()

    async def close(self) -> None:
        """Stop every run."""
        tasks = list(self._runs.values())
        self._runs.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _loop(self, entry: ContextEntry) -> None:
        command = entry.cmd if entry.kind == "cmd" else f"cat -- {shlex.quote(entry.path)}"
        while not self.writer.leaving:
            value, error, read = await self._once(command)
            kept, size = bounded(value)
            size = max(size, read)
            now = self.writer.state.sources.get(entry.name)
            if now is None:
                return
            if (now.value, now.error, now.at is not None) != (kept, error, True):
                with contextlib.suppress(DiskFull):
                    self.writer.emit(ContextValue(name=entry.name, value=kept, error=error, size=size))
            await asyncio.sleep(entry.every)

    async def _once(self, command: str) -> tuple[str, bool, int]:
        """One run of `command` in the sandbox: its output (its last `_KEPT_BYTES`), whether it
        failed, and how many bytes it wrote. The output is read as it comes; past `OUTPUT_LIMIT`
        the command is stopped and the value says it was cut."""
        if self.confine is None:
            return f"not run: {self.unconfined_reason}", True, 0
        argv = self.confine(["/bin/sh", "-c", command])
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,
            )
        except OSError as exc:
            return f"could not run {command!r}: {exc}", True, 0
        assert proc.stdout is not None
        try:
            tail, read, cut = await asyncio.wait_for(_read_bounded(proc.stdout), RUN_LIMIT)
            if cut:
                await _stop(proc)
            else:
                await asyncio.wait_for(proc.wait(), RUN_LIMIT)
        except TimeoutError:
            await _stop(proc)
            return f"{command!r} ran past {RUN_LIMIT:g} seconds and was stopped", True, 0
        except asyncio.CancelledError:
            _kill(proc.pid)
            raise
        text = tail.decode(errors="replace")
        ending = "" if text.endswith("\n") or not text else "\n"
        if cut:
            mark = f"(cut: its output went past {OUTPUT_LIMIT // 1024:,} KiB, so it was stopped)"
            return f"{text}{ending}{mark}", True, read
        if proc.returncode != 0:
            return f"{text}{ending}(exit status {proc.returncode})", True, read
        return text, False, read


async def _read_bounded(stream: asyncio.StreamReader) -> tuple[bytes, int, bool]:
    """Read `stream` as it comes, keeping its last `_KEPT_BYTES`, until its end or `OUTPUT_LIMIT`.

    Returns:
        The bytes kept, how many were read, and whether the limit cut it.
    """
    tail = bytearray()
    read = 0
    while chunk := await stream.read(_CHUNK):
        read += len(chunk)
        tail += chunk
        if len(tail) > _KEPT_BYTES:
            del tail[: len(tail) - _KEPT_BYTES]
        if read >= OUTPUT_LIMIT:
            return bytes(tail), read, True
    return bytes(tail), read, False


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """Kill a run and wait for it: what is left in its pipe is read and dropped, since asyncio
    waits for the pipe's end before it says the process ended (its sandbox's processes die
    with it, so the end comes at once)."""
    _kill(proc.pid)
    assert proc.stdout is not None
    stdout = proc.stdout

    async def drained() -> None:
        while await stdout.read(_CHUNK):
            pass
        await proc.wait()

    try:
        await asyncio.wait_for(drained(), RUN_LIMIT)
    except TimeoutError:
        log.warning("a context source's run (pid %d) still writes after it was killed", proc.pid)


def _kill(pid: int) -> None:
    """Stop a run's whole process group (its shell and what it started)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, 9)
