"""The public names of Code Mode are pinned, and the contract's types behave as documented."""

from __future__ import annotations

import dataclasses

import pytest

import tui.codemode
from tui.codemode import Limits, ProgramError, ProgramResult, RunContext, shorten
from tui.errors import TuiError


def test_exported_members_are_pinned() -> None:
    assert set(tui.codemode.__all__) == {
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
    }
    for name in tui.codemode.__all__:
        assert getattr(tui.codemode, name) is not None


def test_errors_belong_to_the_one_tree() -> None:
    for name in (
        "SessionBusy",
        "NoActiveProgram",
        "ProgramActive",
        "CleanupError",
        "SandboxError",
        "ToolError",
    ):
        assert issubclass(getattr(tui.codemode, name), TuiError)


def test_program_result_defaults_and_is_frozen() -> None:
    result = ProgramResult()
    assert (result.output, result.value, result.status, result.error) == ("", None, "completed", None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.status = "error"  # type: ignore[misc]


def test_program_error_str_has_type_and_message() -> None:
    error = ProgramError("ValueError", "boom", "Traceback ...\nValueError: boom\n")
    assert str(error) == "ValueError: boom"
    assert error.limit is None
    assert ProgramError("LimitExceeded", "output: too much").limit == "output"


def test_limits_defaults_match_the_contract() -> None:
    limits = Limits()
    assert limits.observe_seconds == 0.5
    assert limits.wall_seconds is None and limits.cpu_seconds is None
    assert limits.memory_bytes == 2 * 1024**3
    assert limits.open_files == 256
    assert limits.file_size_bytes == 1024**3
    assert limits.max_output_bytes == 32 * 1024**2


def test_run_context_cancels_once_and_stays_cancelled() -> None:
    context = RunContext()
    assert not context.cancelled
    context.cancel()
    context.cancel()
    assert context.cancelled


def test_shorten_keeps_head_and_tail_with_one_marker_line() -> None:
    text = "".join(f"line {i}\n" for i in range(1000))
    short = shorten(text, 25)
    assert len(short) <= 100
    assert short.startswith("line 0\n")
    assert short.endswith("line 999\n")
    markers = [line for line in short.splitlines() if "characters left out" in line]
    assert len(markers) == 1
    left_out = int(markers[0].split()[1])
    kept = len(short) - len(markers[0]) - 2
    assert left_out == len(text) - kept


def test_shorten_leaves_short_output_alone() -> None:
    assert shorten("hello\n", 2) == "hello\n"
    assert shorten("x" * 50, None) == "x" * 50
