"""The ``python`` agent: each turn's prompt is a Python program, run in the worker's one Code Mode
session (globals persist from turn to turn, as in a Jupyter kernel).

What the program prints streams as reply text; a final expression's ``repr`` follows on its own
line; an exception's traceback ends the turn ``failed``; a prompt that is not Python gets a short
reply saying so. ``ask(...)`` inside the program puts a question to the people attached.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Any, ClassVar, Literal

from tui.codemode import (
    Limits,
    ProgramActive,
    ProgramResult,
    PythonSession,
    RunContext,
    SandboxError,
    Tool,
    ToolError,
)
from tui.config import SandboxSettings, config_dir
from tui.errors import TuiError
from tui.protocol import Option
from tui.store.paths import socket_fallback_dirs
from tui.worker.agent import Agent, AgentContext, QuestionCancelled, QuestionDismissed, TurnIO, TurnOutcome
from tui.worker.agents import register

__all__ = ["PROSE_REPLY", "PythonAgent"]

log = logging.getLogger("tui.worker.python")

OBSERVE_SECONDS = 0.05
"""How often a running program's new output is collected and streamed."""

PROSE_REPLY = (
    "This session runs Python: each prompt is a program, and this one is not valid Python ({why}).\n"
    "Type a program, e.g. print('hello'). Model-backed sessions, where a model reads prose and writes "
    "the programs, are not available in this version yet.\n"
)

_ASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "minLength": 1},
        "options": {"type": ["array", "null"], "items": {"type": ["string", "object"]}},
        "multiple": {"type": "boolean"},
        "freeform": {"type": "boolean"},
    },
    "required": ["question"],
    "additionalProperties": False,
}


def _options(raw: list[Any] | None) -> list[Option]:
    options: list[Option] = []
    for item in raw or []:
        if isinstance(item, str):
            options.append(Option(label=item))
        elif isinstance(item, dict) and isinstance(item.get("label"), str):
            options.append(Option(label=item["label"], description=str(item.get("description", ""))))
        else:
            raise ToolError("each option is a label (a string) or {'label': ..., 'description': ...}")
    labels = [o.label for o in options]
    if len(set(labels)) != len(labels):
        raise ToolError("option labels must differ from each other")
    return options


def is_python(prompt: str) -> str | None:
    """None when `prompt` compiles as Python, else why not (one short phrase)."""
    try:
        compile(prompt, "<turn>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}" if exc.lineno else str(exc.msg)
    except ValueError as exc:
        return str(exc)
    return None


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
        settings = settings or SandboxSettings()
        self.workdir = workdir
        if settings.write_limit is None:
            self.limits = Limits(observe_seconds=observe_seconds)
        else:
            self.limits = Limits(observe_seconds=observe_seconds, write_bytes=settings.write_limit)
        folders = tui_folders if tui_folders is not None else [config_dir(), *socket_fallback_dirs()]
        self._hidden = [*folders, *settings.hidden]
        self._read_only = list(settings.read_only)
        self._tui_paths_writable = settings.tui_paths_writable
        if settings.tui_paths_writable:
            self.notes = (
                "tui's own installation is writable by this session's programs ([sandbox] "
                "tui_paths_writable in config.toml): a program can change the tui you run. Turn it "
                "off unless you are developing tui.",
            )
        self._session: PythonSession | None = None
        self._opening: asyncio.Task[PythonSession] | None = None
        self._context: RunContext | None = None
        self._observed = asyncio.Event()
        """Set (and replaced) after each observation's output went out as reply text."""

    @classmethod
    def from_context(cls, context: AgentContext) -> PythonAgent:
        state_dir = context.session_folder.parent.parent
        return cls(
            context.working_directory,
            tui_folders=[state_dir, config_dir(), *socket_fallback_dirs()],
            settings=context.config.sandbox,
        )

    async def _open(self) -> PythonSession:
        session = PythonSession(
            workdir=self.workdir,
            limits=self.limits,
            hidden=self._hidden,
            read_only=self._read_only,
            tui_paths_writable=self._tui_paths_writable,
        )
        await session.__aenter__()
        log.info("code mode ready: %s", getattr(session, "sandbox", "sandboxed"))
        return session

    async def _ready(self) -> PythonSession:
        if self._session is not None:
            return self._session
        if self._opening is None:
            self._opening = asyncio.create_task(self._open())
        try:
            self._session = await asyncio.shield(self._opening)
        except Exception:
            self._opening = None
            raise
        return self._session

    async def start(self) -> None:
        try:
            await self._ready()
        except Exception as exc:
            log.warning("code mode did not start yet (the first turn tries again): %s", exc)

    def interrupt(self) -> None:
        if self._context is not None:
            self._context.cancel()

    async def run_turn(self, turn: TurnIO) -> TurnOutcome:
        why = is_python(turn.prompt)
        if why is not None:
            turn.text(PROSE_REPLY.format(why=why))
            return TurnOutcome("completed")
        try:
            session = await self._ready()
        except (SandboxError, OSError) as exc:
            message = f"the Python sandbox could not start: {exc}"
            turn.text(message + "\n")
            return TurnOutcome("failed", message)
        context = RunContext()
        self._context = context
        if turn.interrupted:
            context.cancel()
        printed = _Printed(turn)
        try:
            try:
                result = await session.execute(source=turn.prompt, catalog=[self._ask(turn)], context=context)
            except ProgramActive:
                await session.stop()
                result = await session.execute(source=turn.prompt, catalog=[self._ask(turn)], context=context)
            while True:
                printed.add(result.output)
                self._observed.set()
                self._observed = asyncio.Event()
                if result.status != "still_working":
                    break
                result = await session.wait(context=context)
        except SandboxError as exc:
            # keep the session: its next execute starts a fresh interpreter, and close() still
            # releases its sandbox (dropping it here leaked the sandbox's cgroup and folder)
            printed.line(f"the Python sandbox failed: {exc}")
            return TurnOutcome("failed", f"the Python sandbox failed: {exc}")
        finally:
            self._context = None
        return self._outcome(result, printed, turn)

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
            trace = result.error.traceback or str(result.error)
            printed.line(trace.rstrip("\n"))
            return TurnOutcome("failed", trace.rstrip("\n"))
        if turn.interrupted:
            return TurnOutcome("interrupted")
        return TurnOutcome("failed", "the program was terminated")

    def _ask(self, turn: TurnIO) -> Tool:
        async def ask(
            question: str, options: list[Any] | None = None, multiple: bool = False, freeform: bool = True
        ) -> Any:
            offered = _options(options)
            if not offered and not freeform:
                raise ToolError("a question without options must allow a freeform answer")
            args = {"question": question, "options": options, "multiple": multiple, "freeform": freeform}
            # What the program printed before asking is collected at the next observation (at most
            # one interval away): let it go out first, so the question follows its lead-in.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._observed.wait(), 4 * self.limits.observe_seconds)
            call_id = turn.tool_started("ask", args)
            try:
                answer = await turn.ask(question, offered, multiple=multiple, freeform=freeform)
            except QuestionDismissed:
                turn.tool_ended(call_id, "error", error="dismissed")
                raise ToolError("dismissed") from None
            except QuestionCancelled:
                turn.tool_ended(call_id, "terminated", error="cancelled")
                raise ToolError("cancelled: the turn is ending") from None
            except asyncio.CancelledError:
                turn.tool_ended(call_id, "terminated", error="cancelled")
                raise
            except TuiError as exc:  # e.g. another question is pending (asked from two threads)
                turn.tool_ended(call_id, "error", error=exc.detail)
                raise ToolError(exc.detail) from None
            if answer.selected:
                value: Any = list(answer.selected) if multiple else answer.selected[0]
            else:
                value = answer.freeform or ""
            turn.tool_ended(call_id, "completed", value=value)
            return value

        return Tool(
            name="ask",
            description=(
                "Ask the people attached to this session a question and wait for the first answer. "
                "Returns the chosen option's label, a list of labels when multiple=True, or the "
                "freeform text; raises ToolError('dismissed') when the question is dismissed."
            ),
            parameters=_ASK_SCHEMA,
            handler=ask,
        )

    async def close(self) -> None:
        if self._opening is not None and self._session is None:
            self._opening.cancel()
        session, self._session = self._session, None
        if session is not None:
            with contextlib.suppress(Exception):
                await session.close()


class _Printed:
    """The reply as printed so far, to put a value or a traceback on a line of its own."""

    def __init__(self, turn: TurnIO) -> None:
        self.turn = turn
        self.at_line_start = True

    def add(self, text: str) -> None:
        if text:
            self.turn.text(text)
            self.at_line_start = text.endswith("\n")

    def line(self, text: str) -> None:
        self.add(("" if self.at_line_start else "\n") + text + "\n")
