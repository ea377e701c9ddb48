"""`PythonSession`: programs in a warm, sandboxed CPython process.

The parent keeps one sandboxed interpreter per session (`tui.codemode.interpreter`: the process
and its pipes) and talks to it with length-prefixed frames (``_child.py`` is the other end).
Output arrives as raw bytes and is decoded here, so the output limit is enforced by the parent,
which the program cannot tamper with; so are the wall-clock limit and the broker that runs tool
handlers.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from tui.codemode.broker import Broker
from tui.codemode.confine import Protected, protected_paths
from tui.codemode.errors import (
    CleanupError,
    NoActiveProgram,
    ProgramActive,
    SandboxError,
    SessionBusy,
)
from tui.codemode.interpreter import START_TIMEOUT, Interpreter
from tui.codemode.output import shorten
from tui.codemode.sandbox import (
    Mechanism,
    PidsCgroup,
    SandboxPlan,
    cpu_seconds_of,
    plan_sandbox,
    written_bytes,
)
from tui.codemode.types import Limits, ProgramError, ProgramResult, RunContext, Tool

__all__ = ["PythonSession"]

log = logging.getLogger("tui.codemode")

_STOP_GRACE = 1.0
_CPU_CHECK = 0.1
_CPU_GRACE = 0.3  # the runner notices first; the parent steps in when it cannot
_CANCEL_GRACE = 0.08
_LOST = "[the interpreter exited; its variables were lost]\n"
_RESTARTED = (
    "[the program did not stop within 1 s of being interrupted; "
    "the interpreter was restarted and its variables were lost]\n"
)


@dataclass(eq=False)
class _Program:
    """The parent's view of the active program."""

    number: int
    broker: Broker
    done: asyncio.Future[dict[str, Any]]
    chunks: list[str] = field(default_factory=list)
    output_bytes: int = 0
    decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace")
    )
    limit: tuple[str, str] | None = None
    stopping: bool = False
    wall_timer: asyncio.TimerHandle | None = None
    cpu_timer: asyncio.TimerHandle | None = None
    cpu_base: float = 0.0
    write_base: tuple[int, int, int] | None = None
    """What the interpreter had written (through write calls, to storage) and sent us when it began."""
    write_timer: asyncio.TimerHandle | None = None
    kill_timer: asyncio.TimerHandle | None = None
    note: str = ""

    def take_output(self) -> str:
        text = "".join(self.chunks)
        self.chunks.clear()
        return text


class PythonSession:
    """Runs Python programs in a warm, sandboxed interpreter.

    Module globals persist from one program to the next while the interpreter lives, as in a
    Jupyter kernel. Use it as an async context manager, or call `start` and `close`.

    Attributes:
        workdir: the folder programs run in and may write.
        limits: what each program may use.
        sandbox: in words, how the program is confined (empty until started).
    """

    def __init__(
        self,
        workdir: str | os.PathLike[str],
        limits: Limits | None = None,
        *,
        bwrap: str | None = None,
        mechanism: Mechanism = "auto",
        hidden: Sequence[str | os.PathLike[str]] = (),
        read_only: Sequence[str | os.PathLike[str]] = (),
        tui_paths_writable: bool = False,
        tui_folders: Sequence[str | os.PathLike[str]] = (),
    ) -> None:
        """Prepare a session; nothing starts until `start` (or ``async with``).

        Args:
            workdir: the folder programs run in; the only one they may write, with a private /tmp.
            limits: what each program may use; defaults to `Limits()`.
            bwrap: the bubblewrap executable; None looks for it on PATH.
            mechanism: ``auto`` uses bubblewrap when installed, else Landlock with seccomp and
                namespaces; ``bubblewrap`` or ``landlock`` insists on one.
            hidden: paths programs must not see: tui's token files and the user's own (see
                `tui.codemode.confine.protected_paths`).
            read_only: folders programs must not change, besides tui's installation and the
                working folder's whole ``.git``, which always are.
            tui_paths_writable: leave tui's installation writable (to develop tui inside a session).
            tui_folders: tui's state dir, config dir and socket folders: made when missing, hidden.
        """
        self.workdir = Path(workdir).resolve()
        self.limits = limits or Limits()
        self.sandbox = ""
        self._bwrap = bwrap
        self._mechanism: Mechanism = mechanism
        self._hidden = list(hidden)
        self._read_only = list(read_only)
        self._tui_paths_writable = tui_paths_writable
        self._tui_folders = list(tui_folders)
        self.protected = Protected()
        """What programs cannot see or change, computed when the session starts."""
        self._plan: SandboxPlan | None = None
        self._cgroup: PidsCgroup | None = None
        self._interp: Interpreter | None = None
        self._active: _Program | None = None
        # the program the interpreter runs: the active one, or one terminated by a cancelled
        # context that has not yet reported its end
        self._running: _Program | None = None
        self._busy = False
        self._closed = False
        self._started = False
        self._numbers = 0
        self._stray: list[str] = []
        self._stray_bytes = 0
        self._note = ""
        self._restart: asyncio.Task[None] | None = None

    # lifecycle -------------------------------------------------------------------------------

    async def __aenter__(self) -> PythonSession:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def processes_limited(self) -> bool:
        """Whether a fork bomb in a program is contained (a pids cgroup or RLIMIT_NPROC)."""
        return self._cgroup is not None or bool(self._plan and self._plan.config.get("nproc"))

    async def start(self) -> None:
        """Start the sandboxed interpreter (once; later calls do nothing).

        Raises:
            SandboxError: the workdir is missing, or the sandbox would not start or reach the
                required level.
        """
        if self._closed:
            raise SandboxError("this Code Mode session was closed; start a new one")
        if self._started:
            return
        if not self.workdir.is_dir():
            raise SandboxError(f"the working folder {self.workdir} does not exist; create it first")
        # the interpreter is bounded by RLIMIT_AS; the sandbox as a whole (children included) by twice that
        self._cgroup = await asyncio.to_thread(
            PidsCgroup.create, self.limits.processes, 2 * self.limits.memory_bytes
        )
        try:
            self.protected = protected_paths(
                self.workdir,
                hidden=self._hidden,
                read_only=self._read_only,
                tui_paths_writable=self._tui_paths_writable,
                tui_folders=self._tui_folders,
            )
            self._plan = plan_sandbox(
                self.workdir,
                bwrap=self._bwrap,
                cgroup=self._cgroup,
                protected=self.protected,
                mechanism=self._mechanism,
            )
            await self._spawn()
        except BaseException:
            await self._release_cgroup()
            raise
        self.sandbox = self._plan.description
        self._started = True

    async def _spawn(self) -> None:
        assert self._plan is not None
        self._interp = await Interpreter.spawn(
            self._plan,
            self.limits,
            on_output=self._on_output,
            on_message=self._on_message,
            on_gone=self._on_child_gone,
            cgroup=self._cgroup,
        )

    async def close(self) -> None:
        """End any program and release the sandbox; a second call does nothing.

        Raises:
            CleanupError: the interpreter or one of its processes did not end within a few seconds.
        """
        if self._closed:
            return
        self._closed = True
        program, self._active = self._active, None
        if program is not None:
            self._cancel_calls(program)
            self._cancel_timers(program)
            if not program.done.done():
                program.done.set_exception(SandboxError("the Code Mode session was closed"))
                program.done.exception()
        if self._restart is not None:
            with contextlib.suppress(BaseException):
                await self._restart
        interp, self._interp = self._interp, None
        ended = True
        if interp is not None:
            ended = await interp.kill(self._cgroup)
        emptied = await self._release_cgroup()
        if not (ended and emptied):
            raise CleanupError(
                "the sandboxed interpreter or a process it started did not end within 3 s; "
                "check for leftover processes (ps -ef) and end them"
            )

    async def _release_cgroup(self) -> bool:
        plan = self._plan
        if plan is not None and plan.tmpdir is not None:
            await asyncio.to_thread(shutil.rmtree, plan.tmpdir, True)
        cgroup, self._cgroup = self._cgroup, None
        if cgroup is None:
            return True
        emptied = await asyncio.to_thread(cgroup.kill_all)
        removed = await asyncio.to_thread(cgroup.remove)
        return emptied and removed

    # what the interpreter says -----------------------------------------------------------------

    def _on_output(self, payload: bytes) -> None:
        program = self._running
        if program is None:
            # a process the program left behind still writes: keep it for the next result
            # bounded: a process printing for hours between programs must not fill our memory
            if self._stray_bytes < self.limits.max_output_bytes:
                self._stray.append(payload.decode("utf-8", "replace"))
                self._stray_bytes += len(payload)
            return
        if program.limit is not None or program is not self._active:
            return
        allowed = self.limits.max_output_bytes - program.output_bytes
        if len(payload) > allowed:
            program.chunks.append(program.decoder.decode(payload[: max(allowed, 0)], final=True))
            program.output_bytes = self.limits.max_output_bytes
            self._hit_limit(
                program,
                "output",
                f"the program printed more than {self.limits.max_output_bytes} bytes; print less, "
                "or write large results to a file in the working folder",
            )
            return
        program.output_bytes += len(payload)
        program.chunks.append(program.decoder.decode(payload))

    def _on_message(self, interp: Interpreter, message: dict[str, Any]) -> None:
        kind = message.get("t")
        if kind == "call":
            program = self._active
            if program is not None and program is self._running and not program.stopping:
                program.broker.call(message.get("id"), message.get("tool", ""), message.get("args"))
        elif kind == "done":
            program = self._running
            if program is not None and program.number == message.get("id"):
                self._running = None
                self._check_writes(program, interp, again=False)
                if not program.done.done():
                    program.done.set_result(message)

    def _on_child_gone(self, interp: Interpreter) -> None:
        program = self._running
        if program is not None and self._interp is interp:
            self._running = None
            if program.stopping or program.limit is not None:
                program.note = _LOST
            if not program.done.done():
                program.done.set_result({"t": "gone"})

    # control operations ----------------------------------------------------------------------

    async def execute(
        self,
        source: str,
        catalog: list[Tool] | None = None,
        frame: Any = None,
        max_output_tokens: int | None = None,
        context: RunContext | None = None,
        number: int | None = None,
    ) -> ProgramResult:
        """Start a fresh program and return its first result.

        Args:
            source: the Python program. When its last line is an expression, its value is the
                result's ``value``.
            catalog: the tools the program can call, each as a function of its name.
            frame: JSON-compatible data from a trusted caller, visible to the program as ``FRAME``.
            max_output_tokens: bounds this result's output (a token is 4 characters).
            context: cancels the program when cancelled.
            number: what its tracebacks call it (``<program N>``); by default this session's count
                of programs (a caller numbering its turns passes the turn's number).

        Returns:
            ``completed``, ``error``, ``terminated``, or ``still_working`` after ``observe_seconds``.

        Raises:
            SessionBusy: another control operation is in flight.
            ProgramActive: a program is still active; `wait` it out or `stop` it first.
            SandboxError: the sandbox would not start or the interpreter died.
        """
        with self._control():
            if self._active is not None:
                raise ProgramActive(
                    "a program is still running; wait for it (wait) or stop it (stop) before starting another"
                )
            await self.start()
            if self._restart is not None:
                await self._restart
            interp = self._interp
            if interp is None or not interp.alive:
                await self._replace_interpreter()
                interp = self._interp
                assert interp is not None
            tools = list(catalog or [])
            try:
                json.dumps(frame, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise TypeError(f"frame must be JSON-compatible: {exc}") from exc
            loop = asyncio.get_running_loop()
            self._numbers += 1
            program = _Program(
                number=self._numbers,
                broker=Broker(tools, interp.reply),
                done=loop.create_future(),
            )
            if self._note or self._stray:
                program.chunks.append(self._note)
                program.chunks.extend(self._stray)
                self._note = ""
                self._stray.clear()
                self._stray_bytes = 0
            if context is not None and context.cancelled:
                return ProgramResult(
                    output=shorten(program.take_output(), max_output_tokens), status="terminated"
                )
            self._active = self._running = program
            if self.limits.wall_seconds is not None:
                program.wall_timer = loop.call_later(
                    self.limits.wall_seconds,
                    self._hit_limit,
                    program,
                    "wall",
                    f"the program ran longer than {self.limits.wall_seconds} s",
                )
            if self.limits.cpu_seconds is not None and interp.host_pid is not None:
                program.cpu_base = cpu_seconds_of(interp.host_pid) or 0.0
                program.cpu_timer = loop.call_later(_CPU_CHECK, self._check_cpu, program, interp.host_pid)
            if self.limits.write_bytes is not None and interp.io_fd is not None:
                written = written_bytes(interp.io_fd)
                if written is not None:
                    program.write_base = (*written, interp.received + interp.printed)
                    program.write_timer = loop.call_later(_CPU_CHECK, self._check_writes, program, interp)
            interp.send(
                {
                    "t": "run",
                    "id": program.number,
                    "name": f"<program {number or program.number}>",
                    "source": source,
                    "frame": frame,
                    "tools": program.broker.describe(),
                },
            )
            return await self._observe(program, max_output_tokens, context)

    async def wait(
        self, max_output_tokens: int | None = None, context: RunContext | None = None
    ) -> ProgramResult:
        """Observe the active program for up to ``observe_seconds`` without disturbing it.

        Args:
            max_output_tokens: bounds this result's output (a token is 4 characters).
            context: cancels the program when cancelled.

        Returns:
            The next result; its output is what was printed since the previous one.

        Raises:
            SessionBusy: another control operation is in flight.
            NoActiveProgram: no program is active.
            SandboxError: the interpreter died.
        """
        with self._control():
            program = self._require_active()
            return await self._observe(program, max_output_tokens, context)

    async def stop(
        self, max_output_tokens: int | None = None, context: RunContext | None = None
    ) -> ProgramResult:
        """Terminate the active program and return ``terminated`` with its last output.

        The program is interrupted first (its variables survive); if it has not stopped within
        one second the interpreter is replaced and the output says that variables were lost.
        A tool call in flight is cancelled, not waited for.

        Args:
            max_output_tokens: bounds this result's output (a token is 4 characters).
            context: accepted for symmetry; stopping is already bounded.

        Raises:
            SessionBusy: another control operation is in flight.
            NoActiveProgram: no program is active.
            SandboxError: a fresh interpreter could not be started.
        """
        with self._control():
            program = self._require_active()
            return await self._terminate(program, max_output_tokens, _STOP_GRACE)

    @contextlib.contextmanager
    def _control(self) -> Any:
        if self._busy:
            raise SessionBusy("another operation on this Code Mode session is in flight; await it first")
        if self._closed:
            raise SandboxError("this Code Mode session was closed; start a new one")
        self._busy = True
        try:
            yield
        finally:
            self._busy = False

    def _require_active(self) -> _Program:
        if self._active is None:
            raise NoActiveProgram("no program is running; start one with execute")
        return self._active

    async def _observe(
        self, program: _Program, max_output_tokens: int | None, context: RunContext | None
    ) -> ProgramResult:
        cancelled = context._future() if context is not None else None
        try:
            waiting: set[asyncio.Future[Any]] = {program.done}
            if cancelled is not None:
                waiting.add(cancelled)
            if not program.done.done():
                await asyncio.wait(
                    waiting, timeout=self.limits.observe_seconds, return_when=asyncio.FIRST_COMPLETED
                )
        finally:
            if cancelled is not None and context is not None:
                context._forget(cancelled)
        if program.done.done():
            return self._finish(program, max_output_tokens)
        if cancelled is not None and cancelled.done():
            return await self._terminate(program, max_output_tokens, _CANCEL_GRACE)
        return ProgramResult(output=shorten(program.take_output(), max_output_tokens), status="still_working")

    def _finish(self, program: _Program, max_output_tokens: int | None) -> ProgramResult:
        """The result of a program that ended; it is no longer active afterwards."""
        self._active = None
        self._cancel_timers(program)
        self._cancel_calls(program)
        message = program.done.result()
        output = program.take_output() + program.decoder.decode(b"", final=True) + program.note
        status = "gone" if message.get("t") == "gone" else message.get("status")
        if program.limit is not None:
            name, detail = program.limit
            text = f"{name}: {detail}"
            error = ProgramError("LimitExceeded", text, f"LimitExceeded: {text}\n")
            return ProgramResult(output=shorten(output, max_output_tokens), status="error", error=error)
        if program.stopping:
            return ProgramResult(output=shorten(output, max_output_tokens), status="terminated")
        if status == "gone":
            self._note = ""
            raise SandboxError(
                "the sandboxed interpreter exited while running the program; its variables were lost "
                "and the next execute starts a fresh one"
                + (f". Output so far: {output[-2000:]}" if output else "")
            )
        if status == "error":
            err = message["error"]
            return ProgramResult(
                output=shorten(output, max_output_tokens),
                status="error",
                error=ProgramError(err["type"], err["message"], err.get("traceback", "")),
            )
        if status == "interrupted":
            return ProgramResult(output=shorten(output, max_output_tokens), status="terminated")
        return ProgramResult(
            output=shorten(output, max_output_tokens),
            value=message.get("value"),
            value_repr=message.get("repr"),
            status="completed",
        )

    def _check_cpu(self, program: _Program, pid: int) -> None:
        """Backstop of the runner's own CPU check, for code that holds the GIL and starves it."""
        used = cpu_seconds_of(pid)
        limit = self.limits.cpu_seconds
        if used is None or limit is None or program.done.done():
            return
        if used - program.cpu_base > limit + _CPU_GRACE:
            self._hit_limit(program, "cpu", f"the program used more than {limit} s of CPU time")
            return
        program.cpu_timer = asyncio.get_running_loop().call_later(_CPU_CHECK, self._check_cpu, program, pid)

    def _check_writes(self, program: _Program, interp: Interpreter, again: bool = True) -> None:
        """End the program once it (with its processes) wrote more than ``write_bytes`` in total.

        The kernel's counts include what the runner sent us, and output a subprocess wrote to
        fd 1 or 2 before the runner forwarded it: both are taken off.
        """
        limit = self.limits.write_bytes
        base = program.write_base
        if limit is None or base is None or interp.io_fd is None or program.limit is not None:
            return
        now = written_bytes(interp.io_fd)
        if now is None:
            return
        sent = interp.received + interp.printed - base[2]
        written = max(now[0] - base[0] - sent, now[1] - base[1])
        if written > limit:
            detail = (
                f"the program wrote more than {limit} bytes in total; write less, or raise "
                "[sandbox] write_limit in config.toml"
            )
            if program.done.done() or not again:
                program.limit = ("write", detail)
            else:
                self._hit_limit(program, "write", detail)
            return
        if again and not program.done.done():
            loop = asyncio.get_running_loop()
            program.write_timer = loop.call_later(_CPU_CHECK, self._check_writes, program, interp)

    def _hit_limit(self, program: _Program, name: str, detail: str) -> None:
        if program.limit is not None or program.stopping or program.done.done():
            return
        program.limit = (name, detail)
        self._cancel_calls(program)
        self._interrupt(program)

    def _interrupt(self, program: _Program) -> None:
        """Interrupt the program; replace the interpreter if it has not ended within a second."""
        interp = self._interp
        if interp is None:
            return
        interp.send({"t": "interrupt"})
        if program.kill_timer is None:
            loop = asyncio.get_running_loop()
            program.kill_timer = loop.call_later(_STOP_GRACE, self._kill_unresponsive, program)

    def _kill_unresponsive(self, program: _Program) -> None:
        if program.done.done() or self._restart is not None:
            return
        program.note = _RESTARTED
        self._restart = asyncio.get_running_loop().create_task(self._replace_after(program))

    async def _replace_after(self, program: _Program) -> None:
        try:
            await self._replace_interpreter()
        finally:
            self._restart = None
            if not program.done.done():
                program.done.set_result({"status": "interrupted"})

    async def _replace_interpreter(self) -> None:
        self._running = None
        interp, self._interp = self._interp, None
        if interp is not None:
            await interp.kill(self._cgroup)
        await self._spawn()

    async def _terminate(
        self, program: _Program, max_output_tokens: int | None, grace: float
    ) -> ProgramResult:
        if not program.done.done():
            if program.limit is None:
                program.stopping = True
            self._cancel_calls(program)
            self._interrupt(program)
            await asyncio.wait({program.done}, timeout=grace)
            if not program.done.done() and grace >= _STOP_GRACE:
                self._kill_unresponsive(program)
            if not program.done.done() and self._restart is not None and grace >= _STOP_GRACE:
                await asyncio.wait({program.done}, timeout=START_TIMEOUT)
        else:
            program.stopping = program.limit is None
        if program.done.done():
            return self._finish(program, max_output_tokens)
        # cancelled: answer now; the program is interrupted or replaced in the background and
        # the next result says so if its variables were lost
        self._active = None
        output = program.take_output()
        loop = asyncio.get_running_loop()
        self._restart = self._restart or loop.create_task(self._settle_later(program))
        return ProgramResult(output=shorten(output, max_output_tokens), status="terminated")

    async def _settle_later(self, program: _Program) -> None:
        try:
            await asyncio.wait({program.done}, timeout=_STOP_GRACE)
            if not program.done.done():
                self._note = _RESTARTED
                self._cancel_timers(program)
                await self._replace_interpreter()
        finally:
            self._cancel_timers(program)
            self._restart = None

    @staticmethod
    def _cancel_calls(program: _Program) -> None:
        program.broker.cancel_all()

    @staticmethod
    def _cancel_timers(program: _Program) -> None:
        for timer in (program.wall_timer, program.kill_timer, program.cpu_timer, program.write_timer):
            if timer is not None:
                timer.cancel()
        program.wall_timer = program.kill_timer = program.cpu_timer = program.write_timer = None
