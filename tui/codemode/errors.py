"""The errors of Code Mode.

A program's own failures (an exception it raised, a tool error it did not catch, a limit it ran
into) are `ProgramResult`s with status ``error``, never exceptions. These are the failures of the
caller or of the host:

    TuiError
    ├── Conflict
    │   ├── Busy
    │   │   └── SessionBusy   a control operation is already in flight
    │   └── ProgramActive     execute while a program is still active
    ├── NotFound
    │   └── NoActiveProgram   wait or stop with no active program
    ├── SandboxError          the sandbox would not start, or the interpreter died
    ├── CleanupError          close could not make sure everything ended
    └── ToolError             raised by a tool handler; the program sees it as ToolError
"""

from __future__ import annotations

from tui.errors import Busy, Conflict, NotFound, TuiError

__all__ = [
    "CleanupError",
    "NoActiveProgram",
    "ProgramActive",
    "SandboxError",
    "SessionBusy",
    "ToolError",
]


class SessionBusy(Busy):
    """A second control operation (execute, wait, stop) started while one was in flight."""

    title = "Busy"


class ProgramActive(Conflict):
    """`execute` was called while a program is still active."""

    code = "program_active"
    title = "Program running"


class NoActiveProgram(NotFound):
    """`wait` or `stop` was called with no active program."""

    code = "no_active_program"
    title = "No program"


class SandboxError(TuiError):
    """The sandbox could not be started or its interpreter died: a failure of the host."""

    code = "sandbox"
    status = 500
    title = "Sandbox"


class CleanupError(TuiError):
    """`close` could not make sure the sandbox and all its processes ended."""

    code = "cleanup"
    status = 500
    title = "Cleanup"


class ToolError(TuiError):
    """Raised by a tool handler to fail the call; the program sees a ``ToolError`` with this message."""

    code = "tool_error"
    status = 400
    title = "Tool"
