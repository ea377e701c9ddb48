"""Code Mode: run a program for the agent in a warm, sandboxed Python interpreter.

`PythonSession` keeps one sandboxed CPython process per session; `execute`, `wait` and `stop`
return `ProgramResult`s; tools in a catalog are plain functions inside the program, answered
by their async handlers in this process. See docs/codemode.md for the design.
"""

from tui.codemode.broker import Broker
from tui.codemode.errors import (
    CleanupError,
    NoActiveProgram,
    ProgramActive,
    SandboxError,
    SessionBusy,
    ToolError,
)
from tui.codemode.output import shorten
from tui.codemode.schema import schema_complaint
from tui.codemode.session import PythonSession
from tui.codemode.types import Limits, ProgramError, ProgramResult, ProgramStatus, RunContext, Tool

__all__ = [
    "Broker",
    "CleanupError",
    "Limits",
    "NoActiveProgram",
    "ProgramActive",
    "ProgramError",
    "ProgramResult",
    "ProgramStatus",
    "PythonSession",
    "RunContext",
    "SandboxError",
    "SessionBusy",
    "Tool",
    "ToolError",
    "schema_complaint",
    "shorten",
]
