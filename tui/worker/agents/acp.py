"""The ``acp`` agent: an external coding agent (Claude Code, Codex, Gemini CLI …) run as a
subprocess and spoken to over the Agent Client Protocol, the worker being its client.

A session names an ``[agents.NAME]`` entry of config.toml (its command and env). The worker
starts the command itself (`spawn_agent`), initializes it, opens an ACP session in the working
directory (``session/new``) or, after a restart, loads the one it had (``session/load``, its id
kept in ``sessions/ID/acp.json``); a session ``tui fork`` made forks its parent's ACP session
(``session/fork``, where the agent offers it; ``sessions/ID/fork.json`` says from what). It maps
each ACP message to the `TurnIO` calls of agents.md's table: chunks to text and thinking, tool
calls to tool events with diffs, the plan, permission requests to questions, file reads and writes
served inside the working directory.

An agent that exits or stops making sense fails the running turn with its last stderr lines;
the next turn starts it again.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import mimetypes
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal, cast

import acp
from acp import schema

from tui import __version__
from tui.codemode.confine import Protected
from tui.config import AgentProfile
from tui.errors import InvalidModel
from tui.protocol import AgentChoice, AgentCommand, AgentSetting, Option, PlanEntry
from tui.worker.agent import (
    Agent,
    AgentContext,
    QuestionCancelled,
    QuestionDismissed,
    TurnIO,
    TurnOutcome,
    notes_for_agent,
)
from tui.worker.agents import register
from tui.worker.agents._calls import ToolCalls
from tui.worker.agents._client import _Client, _sources
from tui.worker.agents._kept import FORK_FILE, STATE_FILE, Kept, fork_told
from tui.worker.agents._process import AgentProcess, group_of_session, spawn_agent
from tui.worker.agents._reach import AgentFiles, confinement, protected_of, reach
from tui.worker.agents._shapes import (
    GEMINI_PLAIN_MODES,
    GEMINI_UNTRUSTED,
    MODELS_OF_SESSION,
    AgentGone,
    cost_text,
    error_said,
    gemini_distrusts,
    keep_models,
    models_setting,
    setting_of,
    text_of,
    unique_labels,
)

__all__ = ["FORK_FILE", "STATE_FILE", "AcpAgent"]

log = logging.getLogger("tui.worker.acp")

AUTH_REQUIRED = -32000
"""ACP's error code for "authentication required"."""


@register("acp")
class AcpAgent(Agent):
    """An ``[agents.NAME]`` entry's command, spoken to over ACP."""

    name: ClassVar[str] = "acp"
    reply_format: ClassVar[Literal["verbatim", "markdown"]] = "markdown"
    model = None

    def __init__(
        self,
        agent: str,
        profile: AgentProfile,
        workdir: Path,
        folder: Path,
        session_id: str,
        *,
        wrap: Callable[[Sequence[str]], list[str]] | None = None,
        protected: Protected | None = None,
    ) -> None:
        # The session names its [agents] entry, and /info and worker_started say that name.
        self.name = agent  # type: ignore[misc]
        self.profile = profile
        self.wrap = wrap
        """What confines the agent's command (tui's own paths kept from it); None: nothing."""
        self.workdir = workdir
        self.files = AgentFiles(workdir, protected or Protected(workdir=workdir.resolve()), self._note)
        """The files served to the agent, by the same rule as its process."""
        self.state = Kept(folder)
        """What the session's folder keeps for a later worker, and the reported cost totals."""
        self.session_id = session_id
        self._kept_model: str | None = None
        self._kept: dict[str, str] = {}
        """The model and settings (`keep`) the session chose before this worker."""
        self._process: AgentProcess | None = None
        self._starting: asyncio.Task[AgentProcess] | None = None
        self._turn: TurnIO | None = None
        self._loading = False
        self._calls = ToolCalls(workdir)
        """The running turn's tool calls."""
        self._distrusted = False
        """Gemini CLI runs in a folder it does not trust: its privileged approval modes fail here."""
        self._asking = asyncio.Lock()
        """One permission question at a time: a second request waits for the first's answer."""

    @property
    def keeps_state(self) -> bool:
        # Known once the agent said what it can do: a next worker loads its session again.
        running = self._process
        return running is not None and bool(running.capabilities.load_session)

    @classmethod
    def from_context(cls, context: AgentContext) -> AcpAgent:
        name = context.record.agent
        protected = protected_of(context)
        agent = cls(
            name,
            context.config.agents[name],
            context.working_directory,
            context.session_folder,
            context.session_id,
            wrap=confinement(context, protected),
            protected=protected,
        )
        agent.notes = (reach(agent.wrap is not None, context.config.sandbox.tui_paths_writable),)
        return agent

    # --- the process ---------------------------------------------------------------------------
    def _environment(self) -> dict[str, str]:
        # the user's whole environment (an agent needs its credentials), plus the entry's own
        return {**os.environ, **self.profile.env, "TUI_SESSION": self.session_id}

    async def _open(self) -> AgentProcess:
        self._end_leftover()
        try:
            command = list(self.profile.command)
            process = await spawn_agent(
                self.wrap(command) if self.wrap is not None else command, self.workdir, self._environment()
            )
        except OSError as exc:
            raise AgentGone(
                f"the agent {self.name!r} could not start ({' '.join(self.profile.command)}): "
                f"{exc.strerror or exc}; fix [agents.{self.name}] in config.toml"
            ) from exc
        running = AgentProcess(process, self.name)
        self.state.store(pid=process.pid)
        log.info("agent %s started: pid %d, %s", self.name, process.pid, " ".join(self.profile.command))
        try:
            await self._handshake(running)
            await self._choose_again(running)
        except BaseException:
            await running.stop()
            raise
        return running

    async def _handshake(self, running: AgentProcess) -> None:
        assert running.process.stdin is not None and running.process.stdout is not None
        # only the methods it offers are served; the others answer "method not found"
        client = cast(acp.Client, _Client(self))
        conn = acp.connect_to_agent(client, running.process.stdin, running.process.stdout)
        running.conn = conn
        init = await self._call(
            running,
            conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=schema.ClientCapabilities(
                    fs=schema.FileSystemCapabilities(read_text_file=True, write_text_file=True),
                    terminal=False,
                ),
                client_info=schema.Implementation(name="tui", version=__version__),
            ),
        )
        running.capabilities = init.agent_capabilities or schema.AgentCapabilities()
        running.auth_methods = list(init.auth_methods or [])
        keep_models()
        said = init.agent_info.name if init.agent_info is not None else ""
        self._distrusted = said == "gemini-cli" and gemini_distrusts(self.workdir, self._environment())
        earlier = self.state.stored_session()
        if earlier is not None and running.capabilities.load_session:
            self._loading = True
            try:
                loaded = await self._call(
                    running, conn.load_session(cwd=str(self.workdir), session_id=earlier)
                )
                running.session_id = earlier
                if loaded is not None:
                    self._modes(loaded.modes, loaded.config_options, loaded)
                log.info("agent %s: loaded its session %s", self.name, earlier)
                return
            except acp.RequestError as exc:
                self._note(
                    f"the agent could not load its earlier session ({exc}): this is a new agent session"
                )
            finally:
                self._loading = False
        elif earlier is not None:
            self._note(
                "this agent cannot load its earlier session: this is a new agent session, "
                "which does not remember the earlier turns"
            )
        fork = self.state.fork_asked() if earlier is None else None
        if fork is not None and await self._forked(running, conn, fork):
            return
        try:
            new = await self._call(running, conn.new_session(cwd=str(self.workdir)))
        except acp.RequestError as exc:
            if exc.code == AUTH_REQUIRED:
                raise AgentGone(self._login(running)) from exc
            raise
        running.session_id = new.session_id
        self._modes(new.modes, new.config_options, new)
        self.state.cost_seen = 0.0  # a new agent session's total starts again
        self.state.store(session_id=new.session_id, cost_total=0.0)

    async def _forked(self, running: AgentProcess, conn: Any, fork: dict[str, Any]) -> bool:
        """Fork the parent's ACP session (``session/fork``) when the agent offers it: True when it
        did. Either way the next prompt tells the agent what it needs: the parent's turns undone
        (after a fork), or what came before, turn by turn (a new session)."""
        parent = fork.get("session_id")
        to_turn = fork.get("to_turn")
        undone = [n for n in fork.get("undone", []) if isinstance(n, int)]
        offered = running.capabilities.session_capabilities
        forked: str | None = None
        if not isinstance(parent, str) or not parent:
            why = "its parent's agent never started"
        elif offered is None or offered.fork is None:
            why = "this agent does not offer session/fork"
        else:
            try:
                answer = await self._call(
                    running, conn.fork_session(cwd=str(self.workdir), session_id=parent)
                )
            except acp.RequestError as exc:
                why = f"the agent could not fork its session ({exc})"
            else:
                forked = answer.session_id
                running.session_id = answer.session_id
                self._modes(answer.modes, answer.config_options, answer)
                # The fork's total holds what its parent spent, counted there: its first is the baseline.
                self.state.cost_seen = None
                self.state.store(session_id=answer.session_id, cost_total=None)
                why = ""
        if forked is not None:
            told = fork_told(undone, to_turn)
            self._note(
                "the agent forked its own conversation (session/fork): it remembers the turns "
                f"before turn {to_turn}"
                + (
                    ", and is told with the next prompt that the later ones are not part of this session"
                    if told
                    else ""
                )
            )
        else:
            told = str(fork.get("summary") or "")
            self._note(f"{why}: it is told what came before, turn by turn, with the next prompt")
        with contextlib.suppress(OSError):
            if told:
                self.state.rewound_file.write_text(
                    "\n".join(t for t in (self.state.rewound_told(), told) if t)
                )
            self.state.fork_file.unlink()
        return forked is not None

    def _login(self, running: AgentProcess) -> str:
        """The one line saying the agent needs a login, and how to log in."""
        how = self.profile.login
        if how is None:
            offered = [m.name for m in running.auth_methods if getattr(m, "name", "")]
            how = (
                f"log in as it offers ({'; '.join(offered)}) in a terminal"
                if offered
                else "log in to it in a terminal as its documentation says"
            )
        return f"the agent {self.name!r} needs you to log in: {how}; then send the prompt again"

    async def _call(self, running: AgentProcess, request: Any) -> Any:
        """Await a request to the agent, or fail when the agent exits first."""
        pending = asyncio.ensure_future(request)
        done, _ = await asyncio.wait({pending, running.exited}, return_when=asyncio.FIRST_COMPLETED)
        if pending not in done:
            pending.cancel()
            await self._drained(running)
            raise AgentGone(running.why_gone())
        try:
            return pending.result()
        except ConnectionError as exc:
            await self._drained(running)
            raise AgentGone(running.why_gone()) from exc

    @staticmethod
    async def _drained(running: AgentProcess) -> None:
        # how it ended and its last stderr lines are what a person needs: wait for them briefly
        await asyncio.wait({running.exited, running.copying}, timeout=1.0, return_when=asyncio.ALL_COMPLETED)

    def _end_leftover(self) -> None:
        """End the process group an earlier worker of this session started and left behind (a
        worker killed outright cannot stop its agent; some agents do not stop when stdin ends)."""
        pid = self.state.stored().get("pid")
        if not isinstance(pid, int) or pid <= 1:
            return
        if group_of_session(pid, self.session_id):  # still ours, not a reused pid
            log.info("agent %s: ending the process group %d an earlier worker left", self.name, pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)

    async def _ready(self) -> AgentProcess:
        if self._process is not None and self._process.process.returncode is None:
            return self._process
        if self._process is not None:
            await self._drop()
        starting = self._starting
        if starting is None:
            starting = self._starting = asyncio.create_task(self._open(), name=f"acp {self.name} start")
        try:
            self._process = await asyncio.shield(starting)
        finally:
            if starting.done() and self._starting is starting:
                self._starting = None
        return self._process

    async def _drop(self) -> None:
        running, self._process = self._process, None
        if running is not None:
            await running.stop()

    async def start(self) -> None:
        try:
            await self._ready()
        except AgentGone as exc:
            log.warning("%s (the first turn tries again)", exc)

    def rewound(self, to_turn: int, turns: Sequence[int]) -> str:
        undone = f"turn {turns[0]}" if len(turns) == 1 else f"turns {turns[0]}-{turns[-1]}"
        told = self.state.rewound_told()
        text = (
            f"(The person rewound this session: {undone} of our conversation "
            f"{'was' if len(turns) == 1 else 'were'} undone, and the files of the working folder are "
            f"back as they were before turn {to_turn}. Forget what those turns did and said; "
            "look at the files again before relying on them.)"
        )
        with contextlib.suppress(OSError):
            self.state.rewound_file.parent.mkdir(parents=True, exist_ok=True)
            self.state.rewound_file.write_text("\n".join(t for t in (told, text) if t))
        return f"{self.name} is told with the next prompt"

    # --- turns -----------------------------------------------------------------------------------
    async def run_turn(self, turn: TurnIO) -> TurnOutcome:
        self._turn = turn
        self._calls.clear()
        self.state.cost_turn = 0.0
        kept = self.state.cost_seen
        try:
            return await self._prompt(turn)
        finally:
            self._turn = None
            if self.state.cost_seen != kept:
                with contextlib.suppress(OSError):
                    self.state.store(cost_total=self.state.cost_seen)

    async def _prompt(self, turn: TurnIO) -> TurnOutcome:
        try:
            running = await self._ready()
            if turn.interrupted:
                return TurnOutcome("interrupted")
            assert running.conn is not None
            said = notes_for_agent(turn)
            rewound = self.state.rewound_told()
            texts = [text for text in (rewound, said, turn.prompt) if text]
            blocks: list[Any] = [
                *(acp.text_block(text) for text in texts or [""]),
                *self._images(turn, running),
                *_sources(turn),
            ]
            answer: schema.PromptResponse = await self._call(
                running, running.conn.prompt(session_id=running.session_id, prompt=blocks)
            )
            if rewound:
                with contextlib.suppress(OSError):
                    self.state.rewound_file.unlink()
        except AgentGone as exc:
            await self._drop()
            self._calls.end_all(self._turn, "error", "the agent stopped")
            return TurnOutcome("failed", str(exc))
        except acp.RequestError as exc:
            self._calls.end_all(self._turn, "error", str(exc))
            if exc.code == AUTH_REQUIRED and self._process is not None:
                return TurnOutcome("failed", self._login(self._process))
            return TurnOutcome("failed", f"the agent {self.name!r} answered with an error: {error_said(exc)}")
        cancelled = answer.stop_reason == "cancelled" or turn.interrupted
        self._calls.end_all(self._turn, "terminated" if cancelled else "completed", None)
        usage = answer.usage
        tokens = {"input": usage.input_tokens, "output": usage.output_tokens} if usage is not None else {}
        if cancelled:
            return TurnOutcome("interrupted", usage=tokens)
        stop = answer.stop_reason  # passed through: the editors of `tui acp` see it as the agent said it
        return TurnOutcome("completed", usage=tokens, stop_reason=None if stop == "cancelled" else stop)

    def _images(self, turn: TurnIO, running: AgentProcess) -> list[schema.ImageContentBlock]:
        caps = running.capabilities.prompt_capabilities
        if not turn.images or caps is None or not caps.image:
            return []
        return [
            acp.image_block(
                base64.b64encode(path.read_bytes()).decode(),
                mimetypes.guess_type(path.name)[0] or "image/png",
            )
            for path in turn.images
        ]

    def interrupt(self) -> None:
        running = self._process
        if running is not None and running.conn is not None and running.session_id:
            conn, session_id = running.conn, running.session_id

            async def cancel() -> None:
                with contextlib.suppress(Exception):
                    await conn.cancel(session_id=session_id)

            asyncio.get_running_loop().create_task(cancel())

    async def close(self) -> None:
        if self._starting is not None:
            self._starting.cancel()
        await self._drop()

    # --- what the agent sends ------------------------------------------------------------------
    def _note(self, text: str) -> None:
        log.info("agent %s: %s", self.name, text)
        self.note(text)

    def _modes(
        self, modes: schema.SessionModeState | None, options: Sequence[Any] | None = None, answer: Any = None
    ) -> None:
        """The modes and config options a new or loaded session said it has."""
        if modes is not None:
            self.mode = modes.current_mode_id
            self.modes = [
                AgentChoice(
                    value=m.id,
                    name=m.name,
                    description=(m.description or "")
                    + (
                        f" — {GEMINI_UNTRUSTED}"
                        if self._distrusted and m.id not in GEMINI_PLAIN_MODES
                        else ""
                    ),
                )
                for m in modes.available_modes
            ]
        if options is not None:
            self.settings = [setting_of(o) for o in options]
        if answer is not None and not any(s.category == "model" for s in self.settings):
            model = models_setting(answer)
            if model is not None:
                self.settings = [*self.settings, model]
                options = options or []
        if modes is not None or options is not None:
            self.info_changed()

    # --- its modes and settings ------------------------------------------------------------------
    def _choose(self, choices: Sequence[AgentChoice], value: str, what: str) -> AgentChoice:
        """The choice `value` names (its value or its name, in any case).

        Raises:
            InvalidModel: none does; the sentence lists what the agent offers.
        """
        wanted = value.strip().casefold()
        for choice in choices:
            if wanted in (choice.value.casefold(), choice.name.casefold()):
                return choice
        offered = ", ".join(
            c.value + (f" ({c.name})" if c.name and c.name != c.value else "") for c in choices
        )
        raise InvalidModel(f"the agent {self.name!r} has no {what} {value!r}: it offers {offered or 'none'}")

    def keep(self, model: str | None, chosen: Mapping[str, str]) -> None:
        self._kept_model = model
        self._kept = dict(chosen)

    async def _choose_again(self, running: AgentProcess) -> None:
        """Set again in the agent's new process the model and settings chosen before (`keep`);
        a choice the agent no longer takes is one note, and the agent keeps its own."""
        wanted: list[tuple[str, str]] = list(self._kept.items())
        model = next((s for s in self.settings if s.category == "model"), None)
        if self._kept_model is not None and model is not None and model.id != MODELS_OF_SESSION:
            wanted.append((model.id, self._kept_model))
        for setting, value in wanted:
            try:
                if setting == "mode" and self.modes:
                    choice = self._choose(self.modes, value, "mode")
                    if choice.value != self.mode:
                        await self._mode_in(running, choice.value)
                    continue
                option = self._setting(setting)
                if option is None:
                    raise InvalidModel(f"it has no setting {setting!r} now")
                choice = self._choose(option.choices, value, option.name or option.id)
                if choice.value != option.current:
                    await self._option_in(running, option.id, choice.value)
                if option.category == "model":
                    self.model = choice.name or choice.value
            except (InvalidModel, acp.RequestError) as exc:
                self._note(f"the agent did not take back the {setting} {value!r} chosen before: {exc}")

    def _setting(self, setting: str) -> AgentSetting | None:
        """Its setting `setting` (``mode``: the setting of that category, for an agent that says
        its mode as a config option)."""
        return next(
            (s for s in self.settings if s.id == setting or (setting == "mode" and s.category == "mode")),
            None,
        )

    def set_model(self, model: str) -> None:
        setting = next((s for s in self.settings if s.category == "model"), None)
        if setting is None:
            raise InvalidModel(
                f"the agent {self.name!r} does not say which models it offers: "
                "choose one with its own commands or settings"
            )
        if setting.id == MODELS_OF_SESSION:
            raise InvalidModel(
                f"the agent {self.name!r} says its model ({setting.current}) but offers no way for tui to "
                "switch it: set the model in the agent's own settings (GEMINI_MODEL for Gemini CLI)"
            )
        choice = self._choose(setting.choices, model, "model")
        self._send(self._set_option(setting.id, choice.value), f"switch to model {choice.value}")
        self.model = choice.name or choice.value

    def set_setting(self, setting: str, value: str) -> None:
        if setting == "mode" and self.modes:
            choice = self._choose(self.modes, value, "mode")
            self._send(self._set_mode(choice.value), f"switch to mode {choice.value}")
            return
        option = self._setting(setting)
        if option is None:
            known = ", ".join(["mode"] * bool(self.modes) + [s.id for s in self.settings]) or "none"
            raise InvalidModel(f"the agent {self.name!r} has no setting {setting!r} (it has: {known})")
        choice = self._choose(option.choices, value, option.name or option.id)
        self._send(self._set_option(option.id, choice.value), f"set {option.id} to {choice.value}")

    def _send(self, request: Any, what: str) -> None:
        """Ask the agent in the background; a refusal is a note in the transcript."""

        async def send() -> None:
            try:
                await request
            except (AgentGone, acp.RequestError, ConnectionError) as exc:
                self._note(f"the agent could not {what}: {exc}")

        asyncio.get_running_loop().create_task(send(), name=f"acp {self.name} {what}")

    async def _set_mode(self, mode: str) -> None:
        await self._mode_in(await self._ready(), mode)

    async def _mode_in(self, running: AgentProcess, mode: str) -> None:
        assert running.conn is not None
        await self._call(running, running.conn.set_session_mode(session_id=running.session_id, mode_id=mode))
        self.mode = mode
        self.info_changed()

    async def _set_option(self, option: str, value: str) -> None:
        await self._option_in(await self._ready(), option, value)

    async def _option_in(self, running: AgentProcess, option: str, value: str) -> None:
        assert running.conn is not None
        kind = next((s for s in self.settings if s.id == option), None)
        sent: str | bool = value
        if kind is not None and [c.value for c in kind.choices] == ["on", "off"]:
            sent = value == "on"
        answer = await self._call(
            running,
            running.conn.set_config_option(config_id=option, session_id=running.session_id, value=sent),
        )
        if answer is not None:
            self._modes(None, answer.config_options)

    def update(self, update: Any) -> None:
        """One ``session/update`` from the agent, mapped to the running turn's events."""
        if isinstance(update, schema.AvailableCommandsUpdate):
            self.commands = [
                AgentCommand(name=c.name, description=c.description) for c in update.available_commands
            ]
            self.info_changed()
            return
        if isinstance(update, schema.CurrentModeUpdate):
            self.mode = update.current_mode_id
            self.info_changed()
            return
        if isinstance(update, schema.ConfigOptionUpdate):
            self._modes(None, update.config_options)
            return
        turn = self._turn
        loaded = self._loading and isinstance(update, schema.UsageUpdate) and update.cost is not None
        if loaded and update.cost.currency.upper() == "USD":  # a loaded session's total: counted before
            self.state.cost_seen = update.cost.amount
        if turn is None or self._loading:
            # a loaded session's history is in the journal already; late chunks have no turn
            return
        if isinstance(update, schema.UsageUpdate):
            turn.context(update.used, update.size, cost=cost_text(update.cost) if update.cost else None)
            if update.cost is not None and update.cost.currency.upper() == "USD":
                # Past the session's budget the worker cancels the prompt (stop reason ``budget``).
                self.state.cost_turn += self.state.added(update.cost.amount)
                turn.spend(self.state.cost_turn)
            return
        if isinstance(update, schema.AgentMessageChunk):
            turn.text(text_of(update.content))
        elif isinstance(update, schema.AgentThoughtChunk):
            turn.thinking(text_of(update.content))
        elif isinstance(update, schema.AgentPlanUpdate):
            turn.plan([PlanEntry(content=e.content, status=e.status) for e in update.entries])
        elif isinstance(update, schema.ToolCallStart | schema.ToolCallProgress):
            self._calls.update(turn, update)

    async def permission(
        self, tool_call: schema.ToolCallUpdate, options: list[schema.PermissionOption]
    ) -> schema.RequestPermissionResponse:
        """A permission request: a question whose options are the permission options."""
        cancelled = schema.RequestPermissionResponse(outcome=schema.DeniedOutcome(outcome="cancelled"))
        async with self._asking:
            turn = self._turn
            if turn is None or turn.interrupted or not options:
                return cancelled
            labels = unique_labels([o.name for o in options])
            by_label = dict(zip(labels, options, strict=True))
            # The request describes the call (some agents, Gemini CLI, never send its `tool_call`):
            # it starts it, or says it again, as an update would.
            self._calls.update(
                turn,
                schema.ToolCallProgress(
                    session_update="tool_call_update", **tool_call.model_dump(exclude={"status"})
                ),
            )
            what = tool_call.title or self._calls.title_of(tool_call.tool_call_id) or "this"
            try:
                answer = await turn.ask(
                    f"Allow {what}?",
                    [Option(label=label, description=self._option_said(by_label[label])) for label in labels],
                    multiple=False,
                    freeform=False,
                )
            except (QuestionDismissed, QuestionCancelled):
                return cancelled
            chosen = by_label.get(answer.selected[0]) if answer.selected else None
            if chosen is None:
                return cancelled
            return schema.RequestPermissionResponse(
                outcome=schema.AllowedOutcome(option_id=chosen.option_id, outcome="selected")
            )

    def _option_said(self, option: schema.PermissionOption) -> str:
        """What a permission option says besides its label: its kind, and when it cannot work
        here, why (before the person picks it)."""
        said = option.kind.replace("_", " ")
        if self._distrusted and option.kind == "allow_always":
            said += f" — {GEMINI_UNTRUSTED}"
        return said
