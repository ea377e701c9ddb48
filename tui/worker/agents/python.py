"""The ``python`` agent: each turn's prompt is a Python program, run in the worker's one Code Mode
session (globals persist from turn to turn, as in a Jupyter kernel).

What the program prints streams as reply text; a final expression's ``repr`` follows on its own
line; an exception's traceback ends the turn ``failed``; a prompt that is not Python gets a short
reply saying so. ``ask(...)`` inside the program puts a question to the people attached.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar, Literal

from tui.codemode import ProgramResult, SandboxError
from tui.config import SandboxSettings
from tui.protocol.python import syntax_error, syntax_report
from tui.worker.agent import Agent, AgentContext, TurnIO, TurnOutcome
from tui.worker.agents import register
from tui.worker.agents._sandbox import OBSERVE_SECONDS, Sandbox, tui_folders_of

__all__ = ["DISMISSED", "PROSE_REPLY", "PythonAgent"]

DISMISSED = "dismissed; the program did not catch ToolError('dismissed')"
"""Why a turn failed whose program let the dismissal of its question end it."""

PROSE_REPLY = (
    "This session runs Python: each prompt is a program, and this one is not valid Python ({why}).\n"
    "Type a program, e.g. print('hello'). For a session where a model reads prose and writes the "
    "programs, start one with `tui --model NAME` (`tui models` lists the configured ones).\n"
)


@register("python")
class PythonAgent(Agent):
    """Runs each prompt as a program in one warm, sandboxed interpreter."""

    name: ClassVar[str] = "python"
    reply_format: ClassVar[Literal["verbatim", "markdown"]] = "verbatim"
    prompt_syntax: ClassVar[Literal["python", "text"]] = "python"
    model = None

    def __init__(
        self,
        workdir: Path,
        *,
        observe_seconds: float = OBSERVE_SECONDS,
        tui_folders: list[Path] | None = None,
        settings: SandboxSettings | None = None,
    ) -> None:
        """Prepare the agent; the sandbox starts with `start` or the first turn.

        Args:
            workdir: the session's working folder.
            observe_seconds: how often a running program's output is collected.
            tui_folders: tui's own folders programs must not see (state dir, config dir, socket
                folders); by default the config dir and the socket folders.
            settings: the ``[sandbox]`` table of config.toml.
        """
        self.workdir = workdir
        self.sandbox = Sandbox(
            workdir, observe_seconds=observe_seconds, tui_folders=tui_folders, settings=settings
        )
        self.notes = self.sandbox.notes

    @classmethod
    def from_context(cls, context: AgentContext) -> PythonAgent:
        return cls(
            context.working_directory,
            tui_folders=tui_folders_of(context),
            settings=context.config.sandbox,
        )

    async def start(self) -> None:
        await self.sandbox.start()

    def interrupt(self) -> None:
        self.sandbox.interrupt()

    def rewound(self, to_turn: int, turns: Sequence[int]) -> str:
        return "the programs' variables were not rewound (the interpreter keeps them)"

    async def run_turn(self, turn: TurnIO) -> TurnOutcome:
        why = syntax_error(turn.prompt)
        if why is not None:
            # As Python shows it (with the caret under where it broke), then what to do about it.
            report = syntax_report(turn.prompt, f"<program {turn.number}>") or ""
            turn.text(report + PROSE_REPLY.format(why=why))
            return TurnOutcome("completed")
        return await run_program(self.sandbox, turn, turn.prompt)

    @staticmethod
    def _outcome(result: ProgramResult, printed: _Printed, turn: TurnIO) -> TurnOutcome:
        if turn.interrupted and result.status != "completed":
            return TurnOutcome("interrupted")
        if result.status == "completed":
            shown = getattr(result, "value_repr", None)
            if shown is None and result.value is not None:
                shown = repr(result.value)
            if shown is not None:
                printed.line(shown)
            return TurnOutcome("completed")
        if result.status == "error" and result.error is not None:
            if (result.error.type, result.error.message) == ("ToolError", "dismissed"):
                # A dismissed question the program did not catch: the transcript already says who
                # dismissed it, so one line says what that did, not a traceback of the ask.
                return TurnOutcome("failed", DISMISSED)
            trace = result.error.traceback or str(result.error)
            printed.line(trace.rstrip("\n"))
            return TurnOutcome("failed", trace.rstrip("\n"))
        if turn.interrupted:
            return TurnOutcome("interrupted")
        return TurnOutcome("failed", "the program was terminated")

    async def close(self) -> None:
        await self.sandbox.close()


async def run_program(
    sandbox: Sandbox, turn: TurnIO, source: str, *, write: Callable[[str], None] | None = None
) -> TurnOutcome:
    """Run `source` as a python session's turn: its output is the reply, as a REPL prints it.

    Used for a python session's prompts and a model session's ``!`` lines alike: the program is
    the turn's own, so its tracebacks carry the turn's number (``<program N>`` of turn #N).

    Args:
        sandbox: the session's sandbox.
        turn: the running turn.
        source: the program.
        write: where the reply goes (`turn.text` by default).
    """
    printed = _Printed(write or turn.text)
    try:
        result = await sandbox.run(source, turn, printed.add, number=turn.number or None)
    except (SandboxError, OSError) as exc:
        # keep the session: its next execute starts a fresh interpreter, and close() still
        # releases its sandbox (dropping it here leaked the sandbox's cgroup and folder)
        message = f"the Python sandbox failed: {exc}"
        printed.line(message)
        return TurnOutcome("failed", message)
    return PythonAgent._outcome(result, printed, turn)


class _Printed:
    """The reply as printed so far, to put a value or a traceback on a line of its own."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write
        self.at_line_start = True

    def add(self, text: str) -> None:
        if text:
            self.write(text)
            self.at_line_start = text.endswith("\n")

    def line(self, text: str) -> None:
        self.add(("" if self.at_line_start else "\n") + text + "\n")
