"""The ``model`` agent: a language model that works in the session's Python sandbox.

Each turn's prompt is prose for the model (pydantic-ai's models and providers: OpenAI Chat
Completions or Responses, Anthropic, Google). Its tools run in the worker's one Code Mode session,
the namespace the person shares: ``run_python(code)`` (with ``wait_python()`` / ``stop_python()``
for a program that runs on), and ``ask_user(...)``, a question like any other. A prompt that starts
with ``!`` runs as Python directly, and the model reads it (code and output) on its next turn.

The conversation lives in ``sessions/ID/messages.jsonl`` (one line a turn: pydantic-ai's message
JSON, never a key), so a new worker continues it. Retries are ours alone (the SDKs' are off): a
rate limit or a server error is tried again after a backoff, at most `MAX_TRIES` times, and the
status row says ``retrying in N s``. Every failure ends the turn with one line that says what to do.

This module imports pydantic-ai and the providers' SDKs; only a worker of a model session imports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import Tool as PydanticTool
from pydantic_ai.exceptions import (
    AgentRunError,
    ContentFilterError,
    OutputTokenLimitExceeded,
    UnexpectedModelBehavior,
    UsageLimitExceeded,
    UserError,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings

from tui.codemode import NoActiveProgram, ProgramActive, ProgramResult, SandboxError
from tui.config import Config, ModelProfile
from tui.errors import InvalidModel, TuiError
from tui.protocol import Budget, Question, StopReason
from tui.worker.agent import (
    Agent,
    AgentContext,
    Answer,
    QuestionCancelled,
    QuestionDismissed,
    TurnIO,
    TurnOutcome,
    context_for_agent,
    notes_for_agent,
)
from tui.worker.agents import register
from tui.worker.agents._history import MessageLog, fit_context, repair
from tui.worker.agents._pricing import price_of
from tui.worker.agents._provider import (
    CONTEXT_WINDOWS,
    MAX_TRIES,
    _Retrying,
    build_model,
    context_window,
    failure,
)
from tui.worker.agents._sandbox import OBSERVE_SECONDS, Sandbox, ask_options, ask_person, tui_folders_of
from tui.worker.agents.python import run_program

__all__ = [
    "CONTEXT_WINDOWS",
    "INSTRUCTIONS",
    "MAX_TRIES",
    "MessageLog",
    "ModelAgent",
    "build_model",
    "fit_context",
]

log = logging.getLogger("tui.worker.model")

RUN_BUDGET_SECONDS = 20.0
"""How long ``run_python`` / ``wait_python`` watch a program before answering ``still_working``."""
TOOL_RESULT_CHARACTERS = 20_000
"""A tool result the model reads is cut to this many characters (its beginning and its end)."""

INSTRUCTIONS = """\
You work in a terminal session together with a person. You have a live Python interpreter, the same \
one the person uses (they run code in it with a leading `!`), so variables persist between calls and \
between turns, and the person can inspect what you define. Its current directory is the session's \
folder: {folder}. The interpreter has no network access.

Tools:
- run_python(code): run Python; you get what it printed and the value of its last expression. A \
program that runs longer than about {budget:.0f} s returns `still_working` with its output so far: \
then call wait_python() to keep waiting or stop_python() to stop it.
- ask_user(question, options, multiple, freeform): ask the person when you need a decision or a fact \
only they have.
- delegate(prompt, agent, model, wait): start a child session on a piece of the work (a Python program \
by default; prose with model=NAME) and get its reply.

Inside programs, ask(question, options=None, multiple=False, freeform=True) asks the person too.
Answer in Markdown, briefly; show results rather than describing what you will do."""


# --- the agent ----------------------------------------------------------------------------------
@dataclass
class _Running:
    """What one turn has streamed so far.

    Reply text and reasoning reach the journal batched as a program's output is: a chunk after a
    quiet spell is sent at once (the first token is never held back), the chunks that follow
    within `interval` wait and go as one event when it ends. A new part, another kind of chunk,
    a tool call and the end of the stream send what waits first, so nothing is lost or reordered.
    The first text and the first reasoning of each model request set `due`: the stream is read on
    only once the followers' streams have written it (`TurnIO.delivered`).
    """

    turn: TurnIO
    interval: float = OBSERVE_SECONDS
    wrote: str = ""
    calls_made: int = 0
    said: set[str] = field(default_factory=set)
    """The kinds (``text``, ``thinking``) sent in this model request so far."""
    due: bool = False
    """The first chunk of a kind was just sent: wait for `TurnIO.delivered` before reading on."""
    _kind: str = ""
    """What `_held` is: ``text`` or ``thinking``."""
    _held: list[str] = field(default_factory=list)
    _timer: asyncio.TimerHandle | None = None
    """Set while chunks are batched: when it fires, what is held is sent."""

    def text(self, chunk: str, *, new_part: bool) -> None:
        if not chunk:
            return
        if new_part and self.wrote and not self.wrote.endswith("\n\n"):
            chunk = ("\n" if self.wrote.endswith("\n") else "\n\n") + chunk
        self.wrote += chunk
        self._put("text", chunk, new_part)

    def thinking(self, chunk: str, *, new_part: bool) -> None:
        if chunk:
            self._put("thinking", chunk, new_part)

    def _put(self, kind: str, chunk: str, new_part: bool) -> None:
        if new_part or kind != self._kind:
            self.flush()
        if self._timer is None:
            self._send(kind, chunk)
            self._timer = asyncio.get_running_loop().call_later(self.interval, self._tick)
        else:
            self._kind = kind
            self._held.append(chunk)

    def _tick(self) -> None:
        self._timer = None
        if self._held:
            self._send(self._kind, "".join(self._held))
            self._held.clear()
            self._timer = asyncio.get_running_loop().call_later(self.interval, self._tick)

    def flush(self) -> None:
        """Send what waits, now (before anything else of the turn is said, and at its end)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._held:
            self._send(self._kind, "".join(self._held))
            self._held.clear()

    def _send(self, kind: str, chunk: str) -> None:
        self._kind = kind
        if kind not in self.said:
            self.said.add(kind)
            self.due = True
        if kind == "text":
            self.turn.text(chunk)
        else:
            self.turn.thinking(chunk)


@register("model")
class ModelAgent(Agent):
    """A language model that runs Python in the session's sandbox and asks the person questions."""

    name: ClassVar[str] = "model"
    reply_format: ClassVar[Literal["verbatim", "markdown"]] = "markdown"

    @property
    def keeps_state(self) -> bool:
        return True  # its messages are in its log (`MessageLog`), read again by the next worker

    def __init__(
        self,
        *,
        config: Config,
        model: str,
        workdir: Path,
        messages: Path,
        observe_seconds: float = OBSERVE_SECONDS,
        run_budget: float = RUN_BUDGET_SECONDS,
        make_model: Callable[[ModelProfile], Model] | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
        tui_folders: list[Path] | None = None,
    ) -> None:
        self.config = config
        self.model = model
        self.models = sorted(config.models)
        self.workdir = workdir
        self.log = MessageLog(messages)
        self.sandbox = Sandbox(
            workdir, observe_seconds=observe_seconds, tui_folders=tui_folders, settings=config.sandbox
        )
        self.notes = self.sandbox.notes
        self.run_budget = run_budget
        self._make_model = make_model or build_model
        self._sleep = sleep
        self._task: asyncio.Task[None] | None = None
        self._told_fresh = False
        """Whether the model was told this worker's interpreter is new (once, on its first turn)."""

    @classmethod
    def from_context(cls, context: AgentContext) -> ModelAgent:
        model = context.record.model or context.config.default_model or ""
        return cls(
            config=context.config,
            model=model,
            workdir=context.working_directory,
            messages=context.session_folder / "messages.jsonl",
            tui_folders=tui_folders_of(context),
        )

    async def start(self) -> None:
        await self.sandbox.start()

    def interrupt(self) -> None:
        self.sandbox.interrupt()
        if self._task is not None:
            self._task.cancel()

    def set_model(self, model: str) -> None:
        profile = self.config.model_profile(model)
        missing = profile.missing_key(model)
        if missing is not None:
            raise InvalidModel(missing)
        self.model = model

    def answers_child(self, question: Question) -> bool:
        """The profile's ``answers_children``: ``options`` a question with options (the model
        must name one), ``always`` any; ``never`` (the default) none."""
        try:
            profile = self.config.model_profile(self.model or "")
        except InvalidModel:
            return False
        policy = profile.answers_children
        if policy == "never" or (policy == "options" and not question.options):
            return False
        return profile.missing_key(self.model or "") is None

    async def answer_child(self, child_id: str, question: Question) -> Answer | None:
        if not self.answers_child(question):
            return None
        profile = self.config.model_profile(self.model or "")
        policy = profile.answers_children
        labels = [option.label for option in question.options]
        free = question.freeform and policy == "always"
        ask = f"Your child session {child_id[:8]} (started on part of your work) asks: {question.text}\n"
        if labels:
            ask += f"Options: {', '.join(labels)}. Reply with one option's label only"
            ask += ", or a short answer of your own." if free else "."
        else:
            ask += "Reply with a short answer only."
        agent: PydanticAgent[None, str] = PydanticAgent(
            _Retrying(self._make_model(profile), waiting=lambda _text: None, sleep=self._sleep),
            instructions="You answer your child session's question: the answer alone, nothing else.",
        )
        try:
            async with agent.run_stream(ask) as streamed:  # streamed, as every request of ours
                said = str(await streamed.get_output()).strip()
        except Exception as exc:  # the people attached answer instead
            log.warning("the model could not answer child %s's question: %s", child_id, exc)
            return None
        bare = said.strip(" .'\"`*").lower()
        for label in labels:
            if bare == label.lower():
                return Answer([label])
        return Answer([], said) if free and said else None

    async def close(self) -> None:
        await self.sandbox.close()

    # --- a turn ----------------------------------------------------------------------------------
    async def run_turn(self, turn: TurnIO) -> TurnOutcome:
        if turn.prompt.startswith("!"):
            return await self._run_python_line(turn)
        name = self.model or ""
        try:
            profile = self.config.model_profile(name)
        except InvalidModel as exc:
            return TurnOutcome("failed", exc.detail)
        missing = profile.missing_key(name)
        if missing is not None:
            return TurnOutcome("failed", missing)
        window = context_window(profile)
        history = self.log.load()
        prompt = turn.prompt
        if history and not self._told_fresh and self.sandbox.programs == 0:
            prompt = (
                "(The Python interpreter was started afresh since the earlier turns: "
                "variables defined before are gone.)\n\n" + prompt
            )
        self._told_fresh = True
        said = notes_for_agent(turn)
        current = context_for_agent(turn)
        sent, dropped = fit_context(history, window, (len(current) + len(said) + len(prompt)) // 4)
        # The notes left since the last turn: a message of their own, before the prompt (or the
        # prompt itself, for a turn a note started with none).
        noted = [ModelRequest(parts=[UserPromptPart(content=said)])] if said and prompt else []
        # The context sources' values: a message before them, sent each turn and not kept (the
        # next turn sends them as they stand then).
        told = [ModelRequest(parts=[UserPromptPart(content=current)])] if current else []
        sent = [*sent, *told, *noted]
        asked = prompt or said
        if dropped:
            turn.note(
                f"the conversation neared the model's context window ({window:,} tokens): its oldest "
                f"{dropped} turn{'s' if dropped != 1 else ''} are left out of what the model reads now"
            )
        model = _Retrying(self._make_model(profile), waiting=turn.activity, sleep=self._sleep)
        running = _Running(turn)
        agent: PydanticAgent[None, str] = PydanticAgent(
            model,
            instructions=INSTRUCTIONS.format(folder=self.workdir, budget=self.run_budget),
            tools=self._tools(running),
            model_settings=ModelSettings(max_retries=0),
            retries={"tools": 2, "output": 0},
        )
        handle: list[Any] = []
        if turn.interrupted:
            return TurnOutcome("interrupted")
        task = asyncio.create_task(self._stream(agent, asked, sent, running, handle, profile))
        self._task = task
        outcome: TurnOutcome
        try:
            await task
            outcome = TurnOutcome("completed", stop_reason=_stopped_by(handle[0]) if handle else None)
        except asyncio.CancelledError:
            task.cancel()  # when this turn's own task was cut off, the stream goes with it
            if not _stopped(turn):
                raise
            outcome = TurnOutcome("interrupted")
        except OutputTokenLimitExceeded:  # cut before it said anything (or inside a tool call)
            outcome = TurnOutcome("completed", stop_reason="max_tokens")
        except ContentFilterError:  # a refusal with nothing else said
            outcome = TurnOutcome("completed", stop_reason="refusal")
        except UsageLimitExceeded:  # pydantic-ai's limit of model requests in one run
            outcome = TurnOutcome("completed", stop_reason="max_turn_requests")
        except UnexpectedModelBehavior as exc:
            # A reply of nothing at all is an empty reply (a piped run exits 5), not a failure.
            said_nothing = not running.wrote and not running.calls_made
            outcome = (
                TurnOutcome("completed")
                if said_nothing
                else TurnOutcome("failed", failure(exc, self.model, profile))
            )
        except (AgentRunError, UserError) as exc:
            outcome = TurnOutcome("failed", failure(exc, self.model, profile))
        finally:
            self._task = None
            turn.activity("")
        if handle:
            events = handle[0]
            self._spent(turn, events, window)
            with contextlib.suppress(Exception):
                self.log.append(repair([*noted, *events.new_messages()]), turn.number)
        return outcome

    async def _stream(
        self,
        agent: PydanticAgent[None, str],
        prompt: str,
        history: list[ModelMessage],
        running: _Running,
        handle: list[Any],
        profile: ModelProfile,
    ) -> None:
        # `iter` and each request's own stream: the shortest path from the SDK's chunks to here
        # (`run_stream_events` adds a task and a memory stream per event on top of it)
        async with agent.iter(prompt, message_history=history) as run:
            handle.append(run)
            try:
                async for node in run:
                    if not PydanticAgent.is_model_request_node(node):
                        continue
                    async with node.stream(run.ctx) as stream:
                        running.said.clear()
                        async for event in stream:
                            if isinstance(event, PartDeltaEvent):
                                delta = event.delta
                                if isinstance(delta, TextPartDelta):
                                    running.text(delta.content_delta, new_part=False)
                                elif isinstance(delta, ThinkingPartDelta) and delta.content_delta:
                                    running.thinking(delta.content_delta, new_part=False)
                            elif isinstance(event, PartStartEvent):
                                if isinstance(event.part, TextPart):
                                    running.text(event.part.content, new_part=True)
                                elif isinstance(event.part, ThinkingPart):
                                    running.thinking(event.part.content, new_part=True)
                                else:
                                    running.flush()
                            if running.due:
                                # the first text out to every follower before more is read (a
                                # burst behind it would otherwise be parsed first)
                                running.due = False
                                await running.turn.delivered()
                    # What the turn spent, after each model request: past the session's budget,
                    # no further request is made (the turn ends with stop reason ``budget``).
                    running.flush()  # the reply so far before any line the check says
                    usage = run.usage
                    tokens = (usage.input_tokens or 0) + (usage.output_tokens or 0)
                    if running.turn.spend(price_of(profile, usage), tokens=tokens):
                        break
            finally:
                running.flush()

    @staticmethod
    def _spent(turn: TurnIO, events: Any, window: int) -> None:
        usage = events.usage
        turn.usage(
            input=usage.input_tokens or 0,
            output=usage.output_tokens or 0,
            cached=getattr(usage, "cache_read_tokens", 0) or 0,
        )
        last = next((m for m in reversed(events.all_messages()) if isinstance(m, ModelResponse)), None)
        if last is not None and last.usage.input_tokens:
            turn.context(last.usage.input_tokens + last.usage.output_tokens, window)

    # --- tools -------------------------------------------------------------------------------------
    def _tools(self, running: _Running) -> list[PydanticTool[None]]:
        turn = running.turn

        async def run_python(code: str) -> str:
            """Run Python code in the session's interpreter (shared with the person; globals persist).

            Args:
                code: the program; the value of its last line is returned as a REPL shows it.
            """
            running.flush()
            running.calls_made += 1
            call_id = turn.tool_started("run_python", {"code": code}, kind="execute")
            return await self._observe(turn, call_id, code, resume=False)

        async def wait_python() -> str:
            """Keep waiting for the program that answered still_working; returns its new output."""
            running.flush()
            call_id = turn.tool_started("wait_python", {}, kind="execute")
            return await self._observe(turn, call_id, "", resume=True)

        async def stop_python() -> str:
            """Stop the program that answered still_working; returns its last output."""
            running.flush()
            call_id = turn.tool_started("stop_python", {}, kind="execute")
            try:
                result = await self.sandbox.stop()
            except NoActiveProgram:
                turn.tool_ended(call_id, "error", error="no program is running")
                return "No program is running."
            if result.output:
                turn.tool_output(call_id, result.output)
            turn.tool_ended(call_id, "terminated")
            return _clip(result.output) + "[the program was stopped]"

        async def ask_user(
            question: str, options: list[str] | None = None, multiple: bool = False, freeform: bool = True
        ) -> str:
            """Ask the person a question and wait for the answer.

            Args:
                question: what to ask.
                options: labels to choose from (none: a freeform answer).
                multiple: whether several options may be chosen.
                freeform: whether the person may type an answer of their own.
            """
            args = {"question": question, "options": options, "multiple": multiple, "freeform": freeform}
            running.flush()
            running.calls_made += 1
            call_id = turn.tool_started("ask_user", args, kind="other")
            try:
                offered = ask_options(options)
                value = await ask_person(
                    turn, question, offered, multiple=multiple, freeform=freeform or not offered
                )
            except QuestionDismissed:
                turn.tool_ended(call_id, "error", error="dismissed")
                return "The person dismissed the question: they declined to answer."
            except QuestionCancelled:
                turn.tool_ended(call_id, "terminated", error="cancelled")
                raise asyncio.CancelledError from None
            except Exception as exc:  # a bad option list, another question pending …
                turn.tool_ended(call_id, "error", error=str(exc))
                return f"The question could not be asked: {exc}"
            turn.tool_ended(call_id, "completed", value=value)
            return json.dumps(value)

        async def delegate(
            prompt: str,
            agent: str | None = None,
            model: str | None = None,
            wait: bool = True,
            cost: float | None = None,
        ) -> str:
            """Start a child session (its own interpreter, in this session's folder) on a piece of
            the work, and by default wait for its reply.

            Args:
                prompt: the child's first turn: a Python program for a python child (the default),
                    or prose for a model child (give `model`).
                agent: what the child runs (``python`` by default, ``model`` with `model`).
                model: the child's model profile, for a model child.
                wait: wait for the child's reply (else its id is returned at once).
                cost: the most the child may spend, in USD (its spend counts in this session's).
            """
            args = {"prompt": prompt, "agent": agent, "model": model, "wait": wait, "cost": cost}
            running.flush()
            running.calls_made += 1
            call_id = turn.tool_started("delegate", args, kind="other")
            try:
                budget = None if cost is None else Budget(cost=cost or None)
                reply = await turn.delegate(prompt, agent=agent, model=model, wait=wait, budget=budget)
            except TuiError as exc:
                turn.tool_ended(call_id, "error", error=exc.detail)
                return f"The child did not complete: {exc.detail}"
            turn.tool_output(call_id, reply)
            turn.tool_ended(call_id, "completed")
            return reply if wait else f"Started child session {reply}."

        return [
            PydanticTool(run_python),
            PydanticTool(wait_python),
            PydanticTool(stop_python),
            PydanticTool(ask_user),
            PydanticTool(delegate),
        ]

    async def _observe(self, turn: TurnIO, call_id: str, code: str, *, resume: bool) -> str:
        chunks: list[str] = []

        def output(text: str) -> None:
            chunks.append(text)
            turn.tool_output(call_id, text)

        try:
            result = await self.sandbox.run(
                code, turn, output, resume=resume, replace=False, budget=self.run_budget
            )
        except ProgramActive:
            turn.tool_ended(call_id, "error", error="a program is still running")
            return (
                "A program is still running: call wait_python() to wait for it or stop_python() to stop it."
            )
        except NoActiveProgram:
            turn.tool_ended(call_id, "error", error="no program is running")
            return "No program is running."
        except (SandboxError, OSError) as exc:
            turn.tool_ended(call_id, "error", error=str(exc))
            return f"The Python sandbox failed: {exc}"
        return self._result(turn, call_id, result, "".join(chunks))

    @staticmethod
    def _result(turn: TurnIO, call_id: str, result: ProgramResult, printed: str) -> str:
        shown = _clip(printed)
        if result.status == "completed":
            value = getattr(result, "value_repr", None)
            if value is None and result.value is not None:
                value = repr(result.value)
            turn.tool_ended(call_id, "completed", value=result.value)
            if value is not None:
                shown += ("" if not shown or shown.endswith("\n") else "\n") + value
            return shown or "(no output)"
        if result.status == "still_working":
            turn.tool_ended(call_id, "still_working")
            return shown + "[still_working: the program runs on; call wait_python() or stop_python()]"
        if result.status == "error" and result.error is not None:
            trace = result.error.traceback or str(result.error)
            turn.tool_ended(call_id, "error", error=str(result.error))
            return shown + trace
        turn.tool_ended(call_id, "terminated")
        return shown + "[the program was terminated]"

    # --- a `!` line ----------------------------------------------------------------------------------
    async def _run_python_line(self, turn: TurnIO) -> TurnOutcome:
        """Run the rest of a ``!`` prompt as a python session would; the model reads it next turn."""
        source = turn.prompt[1:].lstrip("\n")
        printed: list[str] = []
        fenced = _Fence(turn, printed)
        outcome = await run_program(self.sandbox, turn, source, write=fenced.write)
        fenced.close()
        if not printed and outcome.outcome == "completed":
            # say so, or a script's `!import pandas as pd` would read as a model that said nothing
            turn.text("*(no output)*\n")
        output = _clip("".join(printed)).rstrip("\n")
        self.log.append(
            [
                ModelRequest(
                    parts=[
                        UserPromptPart(
                            "The person ran this Python in the shared interpreter:\n```python\n"
                            f"{source}\n```\nwhich printed:\n```\n{output}\n```"
                        )
                    ]
                )
            ],
            turn.number,
        )
        return outcome

    def rewound(self, to_turn: int, turns: Sequence[int]) -> str:
        self.log.keep_before(to_turn)
        return "the model's conversation went back with it; its programs' variables were not rewound"


class _Fence:
    """A ``!`` line's output as a Markdown code block (the reply is Markdown), opened at its first text."""

    def __init__(self, turn: TurnIO, printed: list[str]) -> None:
        self.turn = turn
        self.printed = printed
        self.open = False

    def write(self, text: str) -> None:
        if not text:
            return
        if not self.open:
            self.turn.text("```\n")
            self.open = True
        self.printed.append(text)
        self.turn.text(text)

    def close(self) -> None:
        if self.open:
            ended = "".join(self.printed).endswith("\n")
            self.turn.text(("" if ended else "\n") + "```\n")
            self.open = False


def _stopped(turn: TurnIO) -> bool:
    """Whether someone, or the session's budget, stopped `turn` (read afresh: it changes while the
    turn awaits)."""
    return turn.interrupted or turn.over_budget


_FINISHED: dict[str | None, StopReason] = {"length": "max_tokens", "content_filter": "refusal"}
"""A model's finish reason (pydantic-ai's, from OpenAI's or Anthropic's) that cut its reply, as
ACP's stop reason."""


def _stopped_by(run: Any) -> StopReason | None:
    """Why the model's last response in `run` ended, when it cut the reply short; else None."""
    last = next((m for m in reversed(run.all_messages()) if isinstance(m, ModelResponse)), None)
    return _FINISHED.get(last.finish_reason) if last is not None else None


def _clip(text: str, limit: int = TOOL_RESULT_CHARACTERS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[… {len(text) - limit} characters left out …]\n{text[-half:]}"
