"""The session's one Code Mode sandbox, as the agents that run Python share it.

`Sandbox` opens the worker's `PythonSession` on first use, runs a program while observing it every
`OBSERVE_SECONDS` (each observation's new output handed to a callback as it comes), cancels it on
interrupt, and makes the catalog tool ``ask`` that puts a program's question to the people
attached. The ``python`` agent runs each prompt through it; the ``model`` agent runs its
``run_python`` tool calls and ``!`` lines through the same one, so a person and a model share one
namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tui.codemode import (
    Limits,
    ProgramActive,
    ProgramResult,
    PythonSession,
    RunContext,
    Tool,
    ToolError,
)
from tui.config import SandboxSettings, config_dir, parse_duration, token_files
from tui.errors import InvalidRequest, TuiError
from tui.protocol import Budget, Option
from tui.store.paths import socket_fallback_dirs
from tui.worker.agent import AgentContext, QuestionCancelled, QuestionDismissed, TurnIO, notes_of, sources_of

__all__ = [
    "DELEGATE_SCHEMA",
    "OBSERVE_SECONDS",
    "Sandbox",
    "ask_options",
    "delegate_tool",
    "tui_folders_of",
    "tui_token_files",
]

log = logging.getLogger("tui.worker.sandbox")

OBSERVE_SECONDS = 0.05
"""How often a running program's new output is collected and streamed."""

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


DELEGATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "prompt": {"type": "string", "minLength": 1},
        "agent": {"type": ["string", "null"]},
        "model": {"type": ["string", "null"]},
        "wait": {"type": "boolean"},
        "cost": {"type": ["number", "null"], "minimum": 0},
        "tokens": {"type": ["integer", "null"], "minimum": 0},
        "turns": {"type": ["integer", "null"], "minimum": 0},
        "time": {"type": ["string", "number", "null"]},
    },
    "required": ["prompt"],
    "additionalProperties": False,
}

DELEGATE_DESCRIPTION = (
    "Start a child session (a session of its own, in this session's folder) with `prompt` as its "
    "first turn: a program for a python child (the default), prose for a model child (model=NAME). "
    "With wait=True (the default) returns the child's reply as text and raises ToolError with the "
    "child's error when its turn fails; with wait=False returns the child's id at once. cost (USD), "
    "tokens, turns and time (a duration, '30m') are the child's budget (config.toml's [budget] "
    "else); what it spends counts in this session's budget too."
)


def budget_of(
    *, cost: float | None, tokens: int | None, turns: int | None, time: str | float | None
) -> Budget | None:
    """A child's limits as ``delegate`` takes them; None when none is given (config.toml's then).

    Raises:
        InvalidRequest: a duration that does not read.
    """
    if cost is None and tokens is None and turns is None and time is None:
        return None
    seconds = None
    if time is not None:
        try:
            seconds = parse_duration(time) or None
        except ValueError as exc:
            raise InvalidRequest(f"time: {exc}") from None
    return Budget(cost=cost or None, tokens=tokens or None, turns=turns or None, time=seconds)


def delegate_tool(turn: TurnIO) -> Tool:
    """The catalog tool ``delegate`` of a program run in `turn`: a child session."""

    async def delegate(
        prompt: str,
        agent: str | None = None,
        model: str | None = None,
        wait: bool = True,
        cost: float | None = None,
        tokens: int | None = None,
        turns: int | None = None,
        time: str | float | None = None,
    ) -> str:
        try:
            budget = budget_of(cost=cost, tokens=tokens, turns=turns, time=time)
            return await turn.delegate(prompt, agent=agent, model=model, wait=wait, budget=budget)
        except TuiError as exc:
            raise ToolError(exc.detail) from None

    return Tool(
        name="delegate", description=DELEGATE_DESCRIPTION, parameters=DELEGATE_SCHEMA, handler=delegate
    )


def ask_options(raw: list[Any] | None) -> list[Option]:
    """A question's options from labels or ``{'label': …, 'description': …}``.

    Raises:
        ToolError: an option is neither, or two labels are the same.
    """
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


async def ask_person(
    turn: TurnIO, question: str, options: list[Option], *, multiple: bool, freeform: bool
) -> Any:
    """Put a question through `turn` and return the chosen label, the labels, or the freeform text.

    Raises:
        QuestionDismissed, QuestionCancelled: as `TurnIO.ask`.
    """
    answer = await turn.ask(question, options, multiple=multiple, freeform=freeform)
    if answer.selected:
        return list(answer.selected) if multiple else answer.selected[0]
    return answer.freeform or ""


def tui_folders_of(context: AgentContext) -> list[Path]:
    """tui's own folders a session's programs and agent must not see: the state dir the session
    lives in, the config dir and the socket folders."""
    return [context.session_folder.parent.parent, config_dir(), *socket_fallback_dirs()]


def tui_token_files(folders: list[Path]) -> list[Path]:
    """The token files tui knows of (its remotes', ``tui web``'s), from whichever of `folders` is
    a state dir."""
    states: list[Path | None] = [folder for folder in folders if (folder / "sessions").is_dir()]
    return [path for state in states or [None] for path in token_files(state)]


class Sandbox:
    """The session's one warm `PythonSession`, opened on first use.

    Args:
        workdir: the session's working folder.
        observe_seconds: how often a running program's output is collected.
        tui_folders: tui's own folders programs must not see (state dir, config dir, socket
            folders); by default the config dir and the socket folders.
        settings: the ``[sandbox]`` table of config.toml (more hidden or read-only paths, the
            write limit, and the opt-out for developing tui from inside tui).
    """

    def __init__(
        self,
        workdir: Path,
        *,
        observe_seconds: float = OBSERVE_SECONDS,
        tui_folders: list[Path] | None = None,
        settings: SandboxSettings | None = None,
    ) -> None:
        settings = settings or SandboxSettings()
        self.workdir = workdir
        if settings.write_limit is None:
            self.limits = Limits(observe_seconds=observe_seconds)
        else:
            self.limits = Limits(observe_seconds=observe_seconds, write_bytes=settings.write_limit)
        folders = tui_folders if tui_folders is not None else [config_dir(), *socket_fallback_dirs()]
        self._tui_folders = folders
        self._hidden = [*tui_token_files(folders), *settings.hidden]
        self._read_only = list(settings.read_only)
        self._tui_paths_writable = settings.tui_paths_writable
        self.notes: tuple[str, ...] = ()
        """What the people attached must be told when the worker starts."""
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
        """Set (and replaced) after each observation's output went to its callback."""
        self.programs = 0
        """Programs started by this worker (0: the interpreter holds nothing of earlier turns)."""

    async def _open(self) -> PythonSession:
        session = PythonSession(
            workdir=self.workdir,
            limits=self.limits,
            hidden=self._hidden,
            read_only=self._read_only,
            tui_paths_writable=self._tui_paths_writable,
            tui_folders=self._tui_folders,
        )
        await session.__aenter__()
        log.info("code mode ready: %s", getattr(session, "sandbox", "sandboxed"))
        return session

    async def ready(self) -> PythonSession:
        """The session, opened now if it is not yet.

        Raises:
            SandboxError, OSError: it could not start.
        """
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
        """Warm the sandbox; a failure is logged (the first program tries again)."""
        try:
            await self.ready()
        except Exception as exc:
            log.warning("code mode did not start yet (the first turn tries again): %s", exc)

    def interrupt(self) -> None:
        """Cancel the program being run or observed (it ends ``terminated`` within 100 ms)."""
        if self._context is not None:
            self._context.cancel()

    async def run(
        self,
        source: str,
        turn: TurnIO,
        on_output: Callable[[str], None],
        *,
        resume: bool = False,
        replace: bool = True,
        budget: float | None = None,
        number: int | None = None,
    ) -> ProgramResult:
        """Run `source` (or, with `resume`, go on observing the active program) until it ends.

        Args:
            source: the program.
            turn: the running turn (its ``ask`` tool, and whether it was interrupted).
            on_output: called with each observation's new output, in order.
            resume: observe the program left active instead of starting `source`.
            replace: stop a program still active before starting `source` (else `ProgramActive`).
            budget: return ``still_working`` once this many seconds passed (None: wait to the end).
            number: what the program's tracebacks call it (``<program N>``); by default the
                sandbox's count of programs.

        Raises:
            ProgramActive: a program is active and `replace` is False.
            NoActiveProgram: `resume` with no active program.
            SandboxError: the sandbox failed.
        """
        session = await self.ready()
        context = RunContext()
        self._context = context
        if turn.interrupted:
            context.cancel()
        until = None if budget is None else time.monotonic() + budget
        catalog = [self.ask_tool(turn), delegate_tool(turn), notes_tool(turn), context_tool(turn)]
        try:
            if resume:
                result = await session.wait(context=context)
            else:
                try:
                    result = await session.execute(
                        source=source, catalog=catalog, context=context, number=number
                    )
                except ProgramActive:
                    if not replace:
                        raise
                    await session.stop()
                    result = await session.execute(
                        source=source, catalog=catalog, context=context, number=number
                    )
                self.programs += 1
            while True:
                if result.output:
                    on_output(result.output)
                self._observed.set()
                self._observed = asyncio.Event()
                if result.status != "still_working" or (until is not None and time.monotonic() >= until):
                    return result
                result = await session.wait(context=context)
        finally:
            self._context = None

    async def stop(self) -> ProgramResult:
        """Stop the active program: ``terminated`` with its last output.

        Raises:
            NoActiveProgram: none is active.
        """
        session = await self.ready()
        return await session.stop()

    def ask_tool(self, turn: TurnIO) -> Tool:
        """The catalog tool ``ask`` of a program run in `turn`: a question to the people attached."""

        async def ask(
            question: str, options: list[Any] | None = None, multiple: bool = False, freeform: bool = True
        ) -> Any:
            offered = ask_options(options)
            if not offered and not freeform:
                raise ToolError("a question without options must allow a freeform answer")
            # The call's line names what the program chose, not the defaults it left alone.
            args: dict[str, Any] = {"question": question}
            if options is not None:
                args["options"] = options
            if multiple:
                args["multiple"] = True
            if not freeform:
                args["freeform"] = False
            # What the program printed before asking is collected at the next observation (at most
            # one interval away): let it go out first, so the question follows its lead-in.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._observed.wait(), 4 * self.limits.observe_seconds)
            call_id = turn.tool_started("ask", args)
            try:
                value = await ask_person(turn, question, offered, multiple=multiple, freeform=freeform)
            except QuestionDismissed:
                # Said once, by the turn ("question dismissed by …"), not again on the tool line.
                turn.tool_ended(call_id, "terminated")
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
        """Release the sandbox (ends any program)."""
        if self._opening is not None and self._session is None:
            self._opening.cancel()
        session, self._session = self._session, None
        if session is not None:
            with contextlib.suppress(Exception):
                await session.close()


def notes_tool(turn: TurnIO) -> Tool:
    """The catalog tool ``notes`` of a program run in `turn`: the notes left for this turn
    (``tui note``) that the turn's programs have not read yet, each once."""
    unread = list(notes_of(turn))

    async def notes() -> list[dict[str, Any]]:
        taken = [
            {
                "text": note.text,
                "by": note.by.name if note.by is not None else "",
                "source": note.source,
                "at": note.at.isoformat(),
            }
            for note in unread
        ]
        unread.clear()
        return taken

    return Tool(
        name="notes",
        description=(
            "The notes left for this session since its last turn (`tui note`) that no program of "
            "this turn read yet, oldest first: a list of dicts with text, by, source and at."
        ),
        parameters={"type": "object", "properties": {}, "additionalProperties": False},
        handler=notes,
    )


def context_tool(turn: TurnIO) -> Tool:
    """The catalog tool ``context`` of a program run in `turn`: a context source's value as the
    turn started (``tui context``)."""
    sources = {entry.name: entry for entry in sources_of(turn)}

    async def context(name: str) -> str:
        entry = sources.get(name)
        if entry is None:
            named = ", ".join(sorted(sources)) or "none"
            raise ToolError(f"no context source {name!r} (this session's: {named})")
        return entry.value

    return Tool(
        name="context",
        description=(
            "The latest value of the session's context source NAME (`tui context add`), as the "
            "turn started; a failed command's value is its error. Raises ToolError for a name "
            "the session has no source of."
        ),
        parameters={
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
            "additionalProperties": False,
        },
        handler=context,
    )
