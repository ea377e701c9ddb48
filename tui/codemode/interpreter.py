"""One sandboxed interpreter process, as `PythonSession` drives it: started from a sandbox plan
(`tui.codemode.sandbox.plan_sandbox`), spoken to over its pipes with length-prefixed frames
(``_child.py`` is the other end), and killed with everything it started.

What the frames say (output, tool calls, a program's end) is handed to the session's callbacks;
this module only moves bytes and keeps the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from collections.abc import Callable
from typing import Any

from tui.codemode.errors import SandboxError
from tui.codemode.framing import KIND_OUTPUT, FrameReader, decode_message, encode_message
from tui.codemode.sandbox import PidsCgroup, SandboxPlan, interpreter_pid, open_io
from tui.codemode.types import Limits

__all__ = ["START_TIMEOUT", "Interpreter"]

log = logging.getLogger("tui.codemode")

_READ_SIZE = 65536  # larger reads allocate (and free) that much each time, slowing every round trip
START_TIMEOUT = 15.0
"""Seconds a new interpreter gets to say it is ready."""


class Interpreter:
    """One sandboxed interpreter process and its pipes: to it, its replies to tool calls, from it."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        to_child: int,
        replies: int,
        from_child: int,
        *,
        on_output: Callable[[bytes], None],
        on_message: Callable[[Interpreter, dict[str, Any]], None],
        on_gone: Callable[[Interpreter], None],
    ) -> None:
        self.process = process
        self.to_child = to_child
        self.replies = replies
        self.from_child = from_child
        self.frames = FrameReader()
        self.host_pid: int | None = None
        self.io_fd: int | None = None
        """``/proc/PID/io`` of the interpreter, kept open: one read per check."""
        self.received = 0
        """Bytes read from the child's pipe: its own writes that are not the program's."""
        self.printed = 0
        """Of those, output bytes, which may also have been written once to fd 1 or 2 before."""
        self.alive = True
        self.ready: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        """Its ``ready`` message, once the runner set itself up."""
        self._on_output = on_output
        self._on_message = on_message
        self._on_gone = on_gone

    @classmethod
    async def spawn(
        cls,
        plan: SandboxPlan,
        limits: Limits,
        *,
        on_output: Callable[[bytes], None],
        on_message: Callable[[Interpreter, dict[str, Any]], None],
        on_gone: Callable[[Interpreter], None],
        cgroup: PidsCgroup | None = None,
    ) -> Interpreter:
        """Start the interpreter the plan describes and wait until its runner is ready.

        Raises:
            SandboxError: it could not be started, or did not get ready (its stderr says why).
        """
        loop = asyncio.get_running_loop()
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        replies_r, replies_w = os.pipe()
        config = {
            **plan.config,
            "in_fd": to_child_r,
            "reply_fd": replies_r,
            "out_fd": from_child_w,
            "limits": {
                "memory_bytes": limits.memory_bytes,
                "open_files": limits.open_files,
                "file_size_bytes": limits.file_size_bytes,
                "processes": limits.processes + 8,
                "cpu_seconds": limits.cpu_seconds,
            },
        }
        try:
            process = await asyncio.create_subprocess_exec(
                *plan.argv,
                json.dumps(config),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=(to_child_r, from_child_w, replies_r),
                start_new_session=True,
                env=plan.env,
                cwd=plan.cwd,
            )
        except OSError as exc:
            for fd in (to_child_r, to_child_w, from_child_r, from_child_w, replies_r, replies_w):
                os.close(fd)
            raise SandboxError(f"the sandbox could not be started: {exc}") from exc
        for fd in (to_child_r, from_child_w, replies_r):
            os.close(fd)
        os.set_blocking(from_child_r, False)
        interp = cls(
            process,
            to_child_w,
            replies_w,
            from_child_r,
            on_output=on_output,
            on_message=on_message,
            on_gone=on_gone,
        )
        loop.add_reader(from_child_r, interp._on_readable)
        try:
            await asyncio.wait_for(asyncio.shield(interp.ready), START_TIMEOUT)
            if limits.cpu_seconds is not None or limits.write_bytes is not None:
                interp.host_pid = await asyncio.to_thread(interpreter_pid, process.pid, plan.argv[-1])
                if interp.host_pid is not None and limits.write_bytes is not None:
                    interp.io_fd = open_io(interp.host_pid)
        except (TimeoutError, SandboxError) as exc:
            detail = await interp.stderr_text()
            await interp.kill(cgroup)
            raise SandboxError(
                f"the sandboxed interpreter did not start: {detail or exc or 'no reason given'}"
            ) from exc
        return interp

    async def stderr_text(self) -> str:
        """What the interpreter wrote to its stderr (why it did not start), if anything."""
        if self.process.stderr is None:
            return ""
        try:
            data = await asyncio.wait_for(self.process.stderr.read(8192), 1.0)
        except (TimeoutError, OSError):
            return ""
        return data.decode(errors="replace").strip()

    async def kill(self, cgroup: PidsCgroup | None = None) -> bool:
        """Kill the interpreter and everything it started (`cgroup`'s processes too); return
        whether they all ended."""
        if self.alive:
            self.detach()
        # the process group (the interpreter leads it): without bubblewrap, what the program
        # started is in it. Signal with os.kill, never Popen.kill: that polls first, and a poll
        # that reaps the dead interpreter steals its exit from asyncio's child watcher, which
        # then logs "Unknown child process pid" and reports 255.
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except PermissionError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        emptied = True
        if cgroup is not None:
            emptied = await asyncio.to_thread(cgroup.kill_all)
        try:
            await asyncio.wait_for(self.process.wait(), 3.0)
        except TimeoutError:
            return False
        finally:
            for fd in (self.to_child, self.replies, self.io_fd):
                if fd is None:
                    continue
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.io_fd = None
        return emptied

    def detach(self) -> None:
        """Stop reading its pipe (it is gone, or being killed)."""
        if not self.alive:
            return
        self.alive = False
        loop = asyncio.get_running_loop()
        loop.remove_reader(self.from_child)
        with contextlib.suppress(OSError):
            os.close(self.from_child)

    def _on_readable(self) -> None:
        try:
            data = os.read(self.from_child, _READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._gone()
            return
        self.received += len(data)
        try:
            for kind, payload in self.frames.feed(data):
                if kind == KIND_OUTPUT:
                    self.printed += len(payload)
                    self._on_output(payload)
                else:
                    message = decode_message(payload)
                    if message.get("t") == "ready":
                        if not self.ready.done():
                            self.ready.set_result(message)
                    else:
                        self._on_message(self, message)
        except ValueError as exc:
            # the program wrote into the runner's pipe: the stream cannot be trusted any more
            log.warning("the sandboxed interpreter broke its protocol (%s); replacing it", exc)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGKILL)
            self._gone()

    def _gone(self) -> None:
        self.detach()
        if not self.ready.done():
            self.ready.set_exception(SandboxError("the interpreter exited during start"))
        self._on_gone(self)

    def reply(self, reply: dict[str, Any]) -> None:
        """Answer a tool call of the program (on the replies pipe)."""
        if self.alive:
            self.send(reply, self.replies)

    def send(self, message: dict[str, Any], fd: int | None = None) -> None:
        """Send one message to the runner."""
        data = encode_message(message)
        try:
            while data:
                written = os.write(self.to_child if fd is None else fd, data)
                data = data[written:]
        except OSError:
            # the child is gone; the reader notices EOF and ends the program
            pass
