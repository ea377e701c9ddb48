"""The values Code Mode exchanges with its caller: results, errors, limits, tools, cancellation."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Limits", "ProgramError", "ProgramResult", "ProgramStatus", "RunContext", "Tool"]

ProgramStatus = Literal["completed", "still_working", "terminated", "error"]


@dataclass(frozen=True)
class ProgramError:
    """Why a program failed.

    ``type`` is the exception's class name (``ValueError``, ``ToolError``, ``LimitExceeded``);
    for ``LimitExceeded`` the message starts with the name of the limit (``output``, ``wall``,
    ``cpu``, ``memory``, ``file_size``). ``traceback`` is formatted as Python prints it, with only
    the program's own frames.
    """

    type: str
    """The exception's class name."""
    message: str
    """``str()`` of the exception."""
    traceback: str = ""
    """The traceback as Python prints it, trimmed to the program's frames; ends with ``type: message``."""

    def __str__(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type

    @property
    def limit(self) -> str | None:
        """The name of the limit the program ran into, or None for any other error."""
        if self.type != "LimitExceeded":
            return None
        return self.message.split(":", 1)[0]


@dataclass(frozen=True)
class ProgramResult:
    """One observation of a program.

    ``output`` is only what the program printed (stdout and stderr, in order) since the previous
    observation: collecting every result's output gives the whole output once. The value of a
    final expression is **not** printed into ``output``: it is in ``value`` (JSON-compatible, or
    its ``repr`` when it is not) and, exactly as a REPL would print it, in ``value_repr``. A caller
    that wants REPL-like text prints ``value_repr`` on its own line after the output.
    """

    output: str = ""
    """What the program printed since the previous observation (possibly shortened, see
    ``max_output_tokens``)."""
    value: Any = None
    """For ``completed``: the value of the last line when it is an expression, made
    JSON-compatible (anything else becomes its ``repr``); else None."""
    status: ProgramStatus = "completed"
    """``completed``, ``still_working``, ``terminated`` or ``error``."""
    error: ProgramError | None = None
    """For ``error``: what went wrong."""
    value_repr: str | None = None
    """For ``completed``: the ``repr`` of the final expression's value, as a REPL prints it; None
    when there is no final expression or its value is None (a REPL prints nothing then)."""


@dataclass(frozen=True)
class Limits:
    """What one program may use. All limits apply to each program on its own."""

    observe_seconds: float = 0.5
    """How long `execute` and `wait` watch the program before answering ``still_working``."""
    wall_seconds: float | None = None
    """Elapsed time after which the program ends with ``LimitExceeded("wall")``; None: no limit."""
    cpu_seconds: float | None = None
    """CPU time (counted from the program's start) after which it ends with ``LimitExceeded("cpu")``."""
    memory_bytes: int = 2 * 1024**3
    """Address space of the interpreter (RLIMIT_AS); past it allocations fail with
    ``LimitExceeded("memory")``."""
    open_files: int = 256
    """Open file descriptors (RLIMIT_NOFILE)."""
    file_size_bytes: int = 1024**3
    """Largest file the program may write (RLIMIT_FSIZE)."""
    write_bytes: int | None = 4 * 1024**3
    """What the program and its processes may write in total (files, pipes; printed output
    aside), as the kernel counts it; past it the program ends with ``LimitExceeded("write")``.
    None: no limit."""
    max_output_bytes: int = 32 * 1024**2
    """Output past this many bytes ends the program with ``LimitExceeded("output")``."""
    processes: int = 64
    """Processes and threads the sandbox may hold at once, where the host can enforce it."""


@dataclass(frozen=True)
class Tool:
    """A tool the program can call as a plain function of that name.

    The handler runs in the parent process and is awaited as ``handler(**arguments)`` once the
    arguments validate against ``parameters``; it returns a JSON-compatible value or raises
    `tui.codemode.ToolError`, which the program sees as ``ToolError`` with the same message.
    Positional arguments bind to ``parameters["properties"]`` in their order.
    """

    name: str
    """A Python identifier: the function's name inside the program."""
    description: str
    """What the tool does; the function's docstring inside the program."""
    parameters: dict[str, Any]
    """A JSON schema of an object (``type``, ``properties``, ``required``, ``enum``, ``items``,
    ``additionalProperties`` are checked)."""
    handler: Callable[..., Awaitable[Any]]
    """The async function that answers a call."""


@dataclass(eq=False)
class RunContext:
    """Carries cancellation from the caller to the operation in flight.

    `cancel` may be called from any thread; the operation in flight then returns ``terminated``
    within 100 ms.
    """

    _cancelled: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = field(
        default_factory=list, repr=False
    )

    @property
    def cancelled(self) -> bool:
        """Whether `cancel` was called."""
        return self._cancelled

    def cancel(self) -> None:
        """Ask the operation in flight (and every later one with this context) to terminate."""
        with self._lock:
            self._cancelled = True
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            loop.call_soon_threadsafe(_settle, future)

    def _future(self) -> asyncio.Future[None]:
        """A future of the running loop, done once the context is cancelled."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._cancelled:
                future.set_result(None)
            else:
                self._waiters.append((loop, future))
        return future

    def _forget(self, future: asyncio.Future[None]) -> None:
        with self._lock:
            self._waiters = [(lp, f) for lp, f in self._waiters if f is not future]


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
