"""The python agent on a real sandbox: a program that kills its interpreter fails only its turn."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tui.codemode.sandbox import landlock_abi
from tui.worker.agents.python import PythonAgent


class Turn:
    """A turn as the agent sees it, recording the reply text."""

    def __init__(self, prompt: str) -> None:
        self.prompt = prompt
        self.turn_id = "t1"
        self.number = 1
        self.interrupted = False
        self.reply = ""

    def text(self, text: str) -> None:
        self.reply += text

    def tool_started(self, name: str, args: dict[str, Any]) -> str:
        return "c1"

    def tool_ended(self, call_id: str, status: str, value: Any = None, error: str | None = None) -> None:
        pass

    async def ask(self, text: str, options: list[Any], *, multiple: bool, freeform: bool) -> Any:
        raise AssertionError("no question is expected")


@pytest.fixture
def workdir() -> Iterator[Path]:
    if shutil.which("bwrap") is None and landlock_abi() < 1:
        pytest.skip("neither bubblewrap nor Landlock is available (apt install bubblewrap)")
    with tempfile.TemporaryDirectory(prefix="tui-pa-", dir="/tmp") as root:
        yield Path(root)


async def test_after_the_interpreter_dies_the_next_turn_runs_in_a_fresh_one(workdir: Path) -> None:
    agent = PythonAgent(workdir, observe_seconds=5.0)
    try:
        dying = Turn("import os, signal\nkept = 1\nos.kill(os.getpid(), signal.SIGKILL)")
        outcome = await agent.run_turn(dying)  # type: ignore[arg-type]
        assert outcome.outcome == "failed"
        assert "the Python sandbox failed" in dying.reply
        again = Turn("'kept' in globals(), 6 * 7")
        assert (await agent.run_turn(again)).outcome == "completed"  # type: ignore[arg-type]
        assert "(False, 42)" in again.reply
    finally:
        await agent.close()


async def test_a_programs_traceback_is_named_after_its_turns_number(workdir: Path) -> None:
    agent = PythonAgent(workdir, observe_seconds=5.0)
    try:
        first = Turn("x = 1")
        assert (await agent.run_turn(first)).outcome == "completed"  # type: ignore[arg-type]
        failing = Turn("1 / 0")
        failing.number = 14
        outcome = await agent.run_turn(failing)  # type: ignore[arg-type]
        assert outcome.outcome == "failed"
        assert 'File "<program 14>", line 1' in (outcome.error or "")
    finally:
        await agent.close()


async def test_a_prompt_that_is_not_python_gets_pythons_own_report_with_its_caret(workdir: Path) -> None:
    agent = PythonAgent(workdir, observe_seconds=5.0)
    try:
        turn = Turn("print(1 +)")
        assert (await agent.run_turn(turn)).outcome == "completed"  # type: ignore[arg-type]
        lines = turn.reply.splitlines()
        assert lines[0] == '  File "<program 1>", line 1'
        assert lines[1] == "    print(1 +)" and lines[2].strip() == "^"
        assert lines[3] == "SyntaxError: invalid syntax"
        assert "This session runs Python" in turn.reply
    finally:
        await agent.close()
