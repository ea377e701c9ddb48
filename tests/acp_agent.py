"""A small ACP agent for the tests, written with the `acp` package's agent side.

It does what real coding agents do, chosen by words in the prompt:

- always: a thought chunk, then the reply in several message chunks;
- ``edit``: a plan, an ``edit`` tool call with a location, a file written through the client
  (``fs/write_text_file``) and the diff of it, the plan updated as it goes;
- ``permission``: asks to run a command (two options named alike, as real agents do) and says
  which option was chosen, or that it was cancelled;
- ``read``: reads ``notes.txt`` through the client, then tries ``../outside.txt`` and says
  whether it was refused;
- ``rename``: a tool call first titled "Preparing file…" with no input and a line of output, then
  updated (as Claude Code does) to "Write out.txt" with its path and content, its output replaced
  by the diff of the file it writes;
- ``create``: as Gemini CLI does, reads ``new.txt`` (missing) before writing it, and gives up
  when that read is an error;
- ``slow``: keeps working until it is cancelled (``session/cancel``), then stops ``cancelled``;
- ``crash``: writes a line to stderr and exits in the middle of the turn;
- ``broken``: answers the prompt with an internal error and its details;
- ``unannounced``: as Gemini CLI does, asks permission for a call it never started
  (``tool_call``), then says it failed;
- ``recall``: says the prompts this ACP session has seen (kept across ``session/load``);
- ``attack {json}``: tries, as an attacker would, each write and read of tui's own files named in
  the JSON, both through the client (``fs/write_text_file``, ``fs/read_text_file``) and from its
  own process (renames, ``umount``, ``/proc/<worker pid>/root``, bpf, its capabilities), and
  says what happened to each as ``attack results: {json}``.
- ``reach ssh {json}``: looks for a tui's SSH connection sockets and tries to use them
  (`reach_ssh`), saying what happened as ``ssh results: {json}``;
- ``usage``: reports the context it uses and what the session cost (``usage_update``): a total
  for the ACP session, kept across ``session/load``: $0.42, and $0.01 more for each ``usage``
  prompt after the first.
- ``spend``: keeps working, reporting the session's cost $0.03 higher each step (``usage_update``),
  until it is cancelled (at most 20 steps).

A session has two modes (``ask``, ``code``) and a ``model`` config option (``fast``, ``smart``,
and ``smart[1m]``, a value that starts with another as Claude Code's ``sonnet[1m]`` does), which
``session/set_mode`` and ``session/set_config_option`` change.

With ``TEST_AGENT_STUBBORN=1`` it behaves like adapters that outlive their client: it ignores
SIGTERM, starts a child process, and stays after stdin ends.

With ``TEST_AGENT_MODELS=1`` it says its model as Gemini CLI does, in ``session/new``'s ``models``
(no config options). ``TEST_AGENT_NAME`` is the name it gives itself (``gemini-cli`` to be taken
for Gemini CLI).
With ``TEST_AGENT_LOGIN=1`` it answers ``session/new`` that it needs a login (``auth_required``),
offering one login method. After ``session/new``'s answer it sends ``available_commands_update``
(as real adapters do, after the response). With ``TEST_AGENT_NO_LOAD=1`` it does not offer
``session/load``. Sessions are kept in ``$TEST_AGENT_STATE`` (a folder), so a restarted agent can
load them, and another process fork them (``session/fork``: a new session with the prompts of the
one forked); with ``TEST_AGENT_NO_FORK=1`` it does not offer ``session/fork``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import acp
import acp.helpers
from acp import schema

STATE = Path(os.environ.get("TEST_AGENT_STATE", "."))


def agent_pids(session_id: str) -> list[int]:
    """The live processes of the session's agent (they carry TUI_SESSION in their environment), not
    counting bubblewrap around them."""
    found = []
    marker = f"TUI_SESSION={session_id}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            # bubblewrap, confining the agent, carries the marker too: the agent's own are counted
            if (
                marker in (proc / "environ").read_bytes().split(b"\0")
                and (proc / "comm").read_text() != "bwrap\n"
            ):
                stat = (proc / "stat").read_text()
                if stat.rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(proc.name))
        except OSError:
            continue
    return found


def configure(
    config_dir: Path,
    agent_state: Path,
    *,
    load: bool = True,
    fork: bool = True,
    stubborn: bool = False,
    python: str = sys.executable,
) -> None:
    """Write config.toml in `config_dir` with this agent as `[agents.tester]` (without
    ``session/load``; ignoring SIGTERM and the end of stdin, with a child process)."""
    env = {"TEST_AGENT_STATE": str(agent_state)}
    if not load:
        env["TEST_AGENT_NO_LOAD"] = "1"
    if not fork:
        env["TEST_AGENT_NO_FORK"] = "1"
    if stubborn:
        env["TEST_AGENT_STUBBORN"] = "1"
    lines = [
        "[agents.tester]",
        f"command = {json.dumps([python, str(Path(__file__).resolve())])}",
        "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }",
    ]
    (config_dir / "config.toml").write_text("\n".join(lines) + "\n")


class CodingAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.cancelled: dict[str, asyncio.Event] = {}
        self.spent = 0.0
        """The cost ``spend`` reports (a total, as agents report it)."""
        self.tasks: set[asyncio.Task[None]] = set()
        self.mode = "ask"
        self.model = "fast"

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> schema.InitializeResponse:
        return schema.InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=schema.AgentCapabilities(
                load_session=os.environ.get("TEST_AGENT_NO_LOAD") != "1",
                session_capabilities=schema.SessionCapabilities(fork=schema.SessionForkCapabilities())
                if os.environ.get("TEST_AGENT_NO_FORK") != "1"
                else None,
            ),
            agent_info=schema.Implementation(
                name=os.environ.get("TEST_AGENT_NAME", "test-agent"), version="1"
            ),
            auth_methods=[schema.AuthMethodAgent(id="test-login", name="run `test-agent login`")]
            if os.environ.get("TEST_AGENT_LOGIN") == "1"
            else None,
        )

    def _history(self, session_id: str) -> list[str]:
        path = STATE / f"{session_id}.json"
        return list(json.loads(path.read_text())) if path.exists() else []

    def _remember(self, session_id: str, prompt: str) -> None:
        STATE.mkdir(parents=True, exist_ok=True)
        (STATE / f"{session_id}.json").write_text(json.dumps([*self._history(session_id), prompt]))

    def _later(self, session_id: str) -> None:
        async def commands() -> None:
            await asyncio.sleep(0.05)
            await self.say(
                session_id,
                acp.helpers.update_available_commands(
                    [
                        schema.AvailableCommand(name="review", description="review the changes"),
                        schema.AvailableCommand(name="compact", description="summarise the conversation"),
                    ]
                ),
            )

        task = asyncio.create_task(commands())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _modes(self) -> schema.SessionModeState:
        return schema.SessionModeState(
            current_mode_id=self.mode,
            available_modes=[
                schema.SessionMode(id="ask", name="Ask", description="asks before each change"),
                schema.SessionMode(id="code", name="Code", description="changes files without asking"),
            ],
        )

    def _options(self) -> list[Any]:
        return [
            schema.SessionConfigOptionSelect(
                type="select",
                id="model",
                name="Model",
                category="model",
                current_value=self.model,
                options=[
                    schema.SessionConfigSelectOption(value="fast", name="Fast One"),
                    schema.SessionConfigSelectOption(value="smart", name="Smart One"),
                    schema.SessionConfigSelectOption(value="smart[1m]", name="Smart One, 1M context"),
                ],
            )
        ]

    async def new_session(self, cwd: str, **kwargs: Any) -> schema.NewSessionResponse:
        if os.environ.get("TEST_AGENT_LOGIN") == "1":
            raise acp.RequestError.auth_required()
        session_id = f"acp-{uuid.uuid4().hex[:8]}"
        print(f"new session {session_id} in {cwd}", file=sys.stderr, flush=True)
        self._later(session_id)
        if os.environ.get("TEST_AGENT_MODELS") == "1":
            # as Gemini CLI says its model: in `models`, beyond the package's schema
            schema.NewSessionResponse.model_config["extra"] = "allow"
            schema.NewSessionResponse.model_rebuild(force=True)
            models = {
                "currentModelId": "gemini-2.5-pro",
                "availableModels": [{"modelId": "gemini-2.5-pro", "name": "Gemini 2.5 Pro"}],
            }
            return schema.NewSessionResponse(session_id=session_id, modes=self._modes(), models=models)
        return schema.NewSessionResponse(
            session_id=session_id, modes=self._modes(), config_options=self._options()
        )

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> schema.SetSessionModeResponse:
        if mode_id not in ("ask", "code"):
            raise acp.RequestError.invalid_params({"mode_id": mode_id})
        self.mode = mode_id
        await self.say(
            session_id,
            schema.CurrentModeUpdate(session_update="current_mode_update", current_mode_id=mode_id),
        )
        return schema.SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> schema.SetSessionConfigOptionResponse:
        if config_id != "model" or value not in ("fast", "smart", "smart[1m]"):
            raise acp.RequestError.invalid_params({"config_id": config_id, "value": value})
        self.model = str(value)
        return schema.SetSessionConfigOptionResponse(config_options=self._options())

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> schema.LoadSessionResponse:
        if os.environ.get("TEST_AGENT_NO_LOAD") == "1":
            raise acp.RequestError.method_not_found("session/load")
        print(f"loaded session {session_id}", file=sys.stderr, flush=True)
        for prompt in self._history(session_id):  # a load replays the conversation
            await self.say(session_id, acp.update_user_message_text(prompt))
            await self.say(session_id, acp.update_agent_message_text(f"(replayed reply to {prompt})"))
        self._later(session_id)
        return schema.LoadSessionResponse(modes=self._modes(), config_options=self._options())

    async def fork_session(self, cwd: str, session_id: str, **kwargs: Any) -> schema.ForkSessionResponse:
        if os.environ.get("TEST_AGENT_NO_FORK") == "1":
            raise acp.RequestError.method_not_found("session/fork")
        if not (STATE / f"{session_id}.json").exists():
            raise acp.RequestError.invalid_params({"session_id": session_id, "reason": "no such session"})
        forked = f"acp-{uuid.uuid4().hex[:8]}"
        (STATE / f"{forked}.json").write_text(json.dumps(self._history(session_id)))
        print(f"forked session {session_id} into {forked} in {cwd}", file=sys.stderr, flush=True)
        self._later(forked)
        return schema.ForkSessionResponse(
            session_id=forked, modes=self._modes(), config_options=self._options()
        )

    async def say(self, session_id: str, update: Any) -> None:
        await self.conn.session_update(session_id=session_id, update=update)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled.setdefault(session_id, asyncio.Event()).set()

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> schema.PromptResponse:
        text = " ".join(block.text for block in prompt if isinstance(block, schema.TextContentBlock))
        cancelled = self.cancelled[session_id] = asyncio.Event()
        self._remember(session_id, text)
        await self.say(session_id, acp.update_agent_thought_text("Thinking about it."))
        if text.startswith("stop at "):  # e.g. "stop at max_tokens": answered with that stop reason
            await self.say(session_id, acp.update_agent_message_text("Cut here"))
            return schema.PromptResponse(stop_reason=text.split()[2])  # type: ignore[arg-type]
        for word in ("Working ", "on: ", text, "\n"):
            await self.say(session_id, acp.update_agent_message_text(word))
        if "shell: " in text:
            # As an agent's own shell tool does: a command run in its folder, which tui never sees.
            command = text.split("shell: ", 1)[1]
            shell = await asyncio.create_subprocess_shell(
                command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            status = await shell.wait()
            await self.say(session_id, acp.update_agent_message_text(f"shell exit {status}\n"))
            return schema.PromptResponse(stop_reason="end_turn")
        if "broken" in text:  # as Claude's adapter answers when Claude Code exits
            raise acp.RequestError.internal_error({"details": "Claude Code process exited with code 1"})
        if "crash" in text:
            print("the test agent crashes on purpose", file=sys.stderr, flush=True)
            os._exit(3)
        if "edit" in text:
            await self.edit(session_id)
        if "permission" in text:
            await self.permission(session_id)
        if "unannounced" in text:
            await self.unannounced(session_id)
        if "read" in text:
            await self.read(session_id)
        if "rename" in text:
            await self.rename(session_id)
        if "create" in text:
            await self.create(session_id)
        if "probe" in text:
            # What the agent itself reaches of tui's own files: its session's journal.
            journal = (
                Path(os.environ["TUI_STATE_DIR"]) / "sessions" / os.environ["TUI_SESSION"] / "journal.jsonl"
            )
            try:
                found = f"read {len(journal.read_bytes())} bytes"
            except OSError as exc:
                found = type(exc).__name__
            await self.say(session_id, acp.update_agent_message_text(f"journal: {found}\n"))
        if text.startswith("attack "):
            results = await self.attack(session_id, json.loads(text.removeprefix("attack ")))
            await self.say(
                session_id, acp.update_agent_message_text(f"attack results: {json.dumps(results)}\n")
            )
        if text.startswith("reach ssh "):
            found = reach_ssh(json.loads(text.removeprefix("reach ssh ")))
            await self.say(session_id, acp.update_agent_message_text(f"ssh results: {json.dumps(found)}\n"))
        if "usage" in text:
            total = 0.42 + 0.01 * (sum("usage" in p for p in self._history(session_id)) - 1)
            await self.say(
                session_id,
                schema.UsageUpdate(
                    session_update="usage_update",
                    used=12_345,
                    size=200_000,
                    cost=schema.Cost(amount=round(total, 2), currency="USD"),
                ),
            )
        if "which" in text:
            await self.say(
                session_id, acp.update_agent_message_text(f"mode {self.mode}, model {self.model}\n")
            )
        if "recall" in text:
            seen = self._history(session_id)
            await self.say(
                session_id, acp.update_agent_message_text(f"I remember {len(seen)} prompts: {seen}\n")
            )
        if "spend" in text:
            for _ in range(20):
                self.spent = round(self.spent + 0.03, 2)
                await self.say(
                    session_id,
                    schema.UsageUpdate(
                        session_update="usage_update",
                        used=1_000,
                        size=200_000,
                        cost=schema.Cost(amount=self.spent, currency="USD"),
                    ),
                )
                await self.say(session_id, acp.update_agent_message_text(f"spent {self.spent}\n"))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(cancelled.wait(), 1)
                if cancelled.is_set():
                    return schema.PromptResponse(stop_reason="cancelled")
            return schema.PromptResponse(stop_reason="end_turn")
        if "slow" in text:
            await self.say(session_id, acp.update_agent_message_text("slowly\n"))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(cancelled.wait(), 60)
            return schema.PromptResponse(stop_reason="cancelled")
        await self.say(session_id, acp.update_agent_message_text("Done.\n"))
        return schema.PromptResponse(stop_reason="end_turn")

    async def edit(self, session_id: str) -> None:
        steps = ["Read notes.txt", "Change the greeting"]

        async def plan(done: int) -> None:
            entries = [
                acp.plan_entry(
                    step, status="completed" if i < done else "in_progress" if i == done else "pending"
                )
                for i, step in enumerate(steps)
            ]
            await self.say(session_id, acp.update_plan(entries))

        await plan(0)
        cwd = Path.cwd()
        target = cwd / "notes.txt"
        old = target.read_text() if target.exists() else None
        await plan(1)
        await self.say(
            session_id,
            acp.start_edit_tool_call("edit-1", "Edit notes.txt", path=str(target), content=None),
        )
        new = "hello from the agent\n" + (old or "")
        await self.conn.write_text_file(session_id=session_id, path=str(target), content=new)
        await self.say(
            session_id,
            acp.update_tool_call(
                "edit-1",
                status="completed",
                content=[acp.tool_diff_content(str(target), new, old)],
            ),
        )
        await plan(2)

    async def permission(self, session_id: str) -> None:
        await self.say(
            session_id,
            acp.start_tool_call("run-1", "Run make test", kind="execute", status="pending"),
        )
        options = [
            schema.PermissionOption(option_id="allow-once", name="Allow", kind="allow_once"),
            schema.PermissionOption(option_id="allow-always", name="Allow", kind="allow_always"),
            schema.PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
        ]
        answer = await self.conn.request_permission(
            session_id=session_id,
            tool_call=schema.ToolCallUpdate(tool_call_id="run-1", title="Run make test"),
            options=options,
        )
        outcome = answer.outcome
        chosen = outcome.option_id if isinstance(outcome, schema.AllowedOutcome) else "cancelled"
        await self.say(session_id, acp.update_agent_message_text(f"permission: {chosen}\n"))
        await self.say(
            session_id,
            acp.update_tool_call(
                "run-1",
                status="completed" if chosen.startswith("allow") else "failed",
                content=[acp.tool_content(acp.text_block("2 passed"))],
            ),
        )

    async def rename(self, session_id: str) -> None:
        target = Path.cwd() / "out.txt"
        await self.say(
            session_id,
            schema.ToolCallStart(
                session_update="tool_call",
                tool_call_id="write-1",
                title="Preparing file…",
                kind="edit",
                status="pending",
                raw_input={},
                content=[acp.tool_content(acp.text_block("thinking about the file"))],
            ),
        )
        body = "written by the agent\n"
        await self.say(
            session_id,
            schema.ToolCallProgress(
                session_update="tool_call_update",
                tool_call_id="write-1",
                title="Write out.txt",
                status="in_progress",
                raw_input={"file_path": str(target), "content": body},
                locations=[schema.ToolCallLocation(path=str(target))],
            ),
        )
        await self.conn.write_text_file(session_id=session_id, path=str(target), content=body)
        await self.say(
            session_id,
            acp.update_tool_call(
                "write-1", status="completed", content=[acp.tool_diff_content(str(target), body, None)]
            ),
        )

    async def create(self, session_id: str) -> None:
        target = Path.cwd() / "new.txt"
        await self.say(
            session_id, acp.start_edit_tool_call("create-1", "Write new.txt", path=str(target), content=None)
        )
        try:
            old = await self.conn.read_text_file(session_id=session_id, path=str(target))
        except acp.RequestError as exc:
            await self.say(
                session_id, acp.update_tool_call("create-1", status="failed", raw_output={"error": str(exc)})
            )
            await self.say(
                session_id, acp.update_agent_message_text(f"Error checking existing file: {exc}\n")
            )
            return
        await self.conn.write_text_file(session_id=session_id, path=str(target), content="brand new\n")
        await self.say(
            session_id,
            acp.update_tool_call(
                "create-1",
                status="completed",
                content=[acp.tool_diff_content(str(target), "brand new\n", old.content or None)],
            ),
        )
        await self.say(
            session_id, acp.update_agent_message_text(f"created new.txt (it held {old.content!r})\n")
        )

    async def unannounced(self, session_id: str) -> None:
        target = str(Path.cwd() / "new.txt")
        await self.conn.request_permission(
            session_id=session_id,
            tool_call=schema.ToolCallUpdate(
                tool_call_id="write-9",
                title="Writing to new.txt",
                kind="edit",
                locations=[schema.ToolCallLocation(path=target)],
                content=[acp.tool_diff_content(target, "new text\n", None)],
            ),
            options=[schema.PermissionOption(option_id="allow-once", name="Allow", kind="allow_once")],
        )
        await self.say(session_id, acp.update_tool_call("write-9", status="failed"))

    async def read(self, session_id: str) -> None:
        inside = await self.conn.read_text_file(session_id=session_id, path=str(Path.cwd() / "notes.txt"))
        await self.say(
            session_id, acp.update_agent_message_text(f"notes.txt says: {inside.content.strip()}\n")
        )
        try:
            await self.conn.read_text_file(session_id=session_id, path=str(Path.cwd() / ".." / "outside.txt"))
            said = "outside.txt was read"
        except acp.RequestError:
            said = "outside.txt was refused"
        try:
            await self.conn.write_text_file(
                session_id=session_id, path="/tmp/../etc/escaped.txt", content="x"
            )
            said += "; the write was done"
        except acp.RequestError:
            said += "; the write was refused"
        await self.say(session_id, acp.update_agent_message_text(said + "\n"))

    async def attack(self, session_id: str, t: dict[str, str]) -> dict[str, str]:
        """Each attack's name and what came of it: ``done``/the content when it worked, else the error."""
        results: dict[str, str] = {}
        home, site, config, journal, token = t["home"], t["site"], t["config"], t["journal"], t["token"]

        async def via_client(name: str, path: str, content: str | None = None) -> None:
            try:
                if content is None:
                    read = await self.conn.read_text_file(session_id=session_id, path=path)
                    results[name] = "read: " + read.content
                else:
                    await self.conn.write_text_file(session_id=session_id, path=path, content=content)
                    results[name] = "done"
            except acp.RequestError as exc:
                results[name] = f"refused: {exc}"

        def direct(name: str, action: Any) -> None:
            try:
                value = action()
                results[name] = "done" if value is None else f"read: {value}"
            except OSError as exc:
                results[name] = f"{type(exc).__name__}: {exc.strerror}"

        def write(path: str, text: str) -> None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text)

        evil = "import os; open('/tmp/tui-pwned', 'w').write('pwned')\n"
        await via_client("fs write .pth", f"{site}/evil.pth", evil)
        await via_client(
            "fs write .git/hooks", f"{home}/.git/hooks/pre-commit", "#!/bin/sh\ntouch /tmp/tui-pwned\n"
        )
        await via_client(
            "fs write .git/config", f"{home}/.git/config", "[core]\n\tfsmonitor = touch /tmp/tui-pwned\n"
        )
        await via_client("fs write .git/commondir", f"{home}/.git/commondir", "/tmp\n")
        await via_client("fs write config.toml", f"{config}/config.toml", 'default_agent = "evil"\n')
        await via_client("fs write the tui command", f"{home}/.local/bin/tui", "#!/bin/sh\n")
        await via_client("fs read journal", journal)
        await via_client("fs read token", token)
        # a folder of the working folder swapped for a symlink into tui's config dir
        with contextlib.suppress(OSError):
            os.symlink(config, f"{home}/link-to-config")
        await via_client("fs write through a symlink", f"{home}/link-to-config/config.toml", "x = 1\n")
        await via_client("fs write through ..", f"{home}/.git/../.git/hooks/post-checkout", "#!/bin/sh\n")

        libc = ctypes.CDLL(None, use_errno=True)

        def umount() -> None:
            if libc.umount2(t["state"].encode(), 2) != 0:  # MNT_DETACH
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))

        def bpf() -> None:
            if libc.syscall(321, 0, 0, 0) != 0:  # bpf(BPF_MAP_CREATE, NULL, 0) on x86_64
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))

        direct("umount the state dir", umount)
        direct("bpf", bpf)
        direct(
            "read /proc/<worker>/root journal",
            lambda: Path(f"/proc/{t['worker_pid']}/root{journal}").read_text(),
        )
        direct(
            "list /proc/<worker>/root state", lambda: os.listdir(f"/proc/{t['worker_pid']}/root{t['state']}")
        )
        direct("write .pth", lambda: write(f"{site}/evil.pth", evil))
        direct("write .git/hooks", lambda: write(f"{home}/.git/hooks/pre-commit", "#!/bin/sh\n"))
        direct("write .git/commondir", lambda: write(f"{home}/.git/commondir", "/tmp\n"))
        direct("write config.toml", lambda: write(f"{config}/config.toml", 'default_agent = "evil"\n'))
        direct("rename ~/.config", lambda: os.rename(f"{home}/.config", f"{home}/.config-old"))
        direct("rename ~/.local/state", lambda: os.rename(f"{home}/.local/state", f"{home}/.local/state-old"))
        direct("rename .venv", lambda: os.rename(f"{home}/.venv", f"{home}/.venv-old"))

        def write_and_remove(path: str) -> None:
            Path(path).write_text("probe")
            Path(path).unlink()

        # root's own: /etc/ld.so.preload would load its code into the next tui (a probe file, removed)
        direct("write into /etc", lambda: write_and_remove(f"/etc/tui-probe-{os.getpid()}"))
        direct("write the tui command", lambda: write(f"{home}/.local/bin/tui", "#!/bin/sh\n"))
        direct("replace the tui command", lambda: os.rename(f"{home}/.local/bin/tui", f"{home}/tui-old"))
        direct("read journal", lambda: Path(journal).read_text())
        direct("read token", lambda: Path(token).read_text())
        # a sysctl (kernel.core_pattern runs a command as root on a crash), opened, never written
        direct(
            "open a sysctl to write", lambda: os.close(os.open("/proc/sys/kernel/core_pattern", os.O_WRONLY))
        )
        results["CapEff"] = capabilities()
        return results


def reach_ssh(t: dict[str, str]) -> dict[str, str]:
    """Look for a tui's SSH connections (its ControlMaster's socket, the socket forwarded to a
    remote's relay) where sockets are kept, and use what is found and the paths `t` names: a command
    run on the remote through the master, the relay's sessions asked for. Each attempt and what
    came of it (``done: …`` when it worked); ``found`` lists what was seen. Also run by a program
    (its source is sent as the program)."""
    import glob
    import os
    import socket
    import subprocess
    import tempfile

    results: dict[str, str] = {}
    uid = os.getuid()
    runtime = os.environ.get("XDG_RUNTIME_DIR", f"/run/user/{uid}")
    places = {tempfile.gettempdir(), "/tmp", f"/tmp/tui-{uid}", runtime, f"{runtime}/tui"}
    places |= {os.path.dirname(os.path.dirname(t["control"])), os.path.dirname(t["control"])}
    found: list[str] = []
    for place in sorted(places):
        try:
            names = os.listdir(place)
        except OSError as exc:
            results[f"list {place}"] = type(exc).__name__
            continue
        for name in names:
            if "ssh" in name:
                found += [p for p in glob.glob(os.path.join(place, name, "*")) if os.path.basename(p) in "cs"]
    results["found"] = " ".join(sorted(set(found)))
    controls = {t["control"], *(p for p in found if p.endswith("/c"))}
    relays = {t["relay"], *(p for p in found if p.endswith("/s"))}
    options = ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
    options += ["-o", "LogLevel=ERROR", "-p", t["port"]]
    for control in sorted(controls):
        for what, argv in (
            ("check", ["ssh", "-S", control, "-O", "check", *options, t["destination"]]),
            ("run id", ["ssh", "-S", control, *options, t["destination"], "id", "-u"]),
        ):
            try:
                ran = subprocess.run(
                    argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
                )
            except (OSError, subprocess.SubprocessError) as exc:
                results[f"ssh {what} {control}"] = type(exc).__name__
                continue
            said = (ran.stdout + ran.stderr).strip().replace("\n", " / ")
            results[f"ssh {what} {control}"] = ("done: " if ran.returncode == 0 else "failed: ") + said
    for relay in sorted(relays):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(60)
                s.connect(relay)
                s.sendall(b"GET /api/sessions HTTP/1.1\r\nhost: tui-relay\r\nconnection: close\r\n\r\n")
                got = b""
                while b"\r\n" not in got and (chunk := s.recv(200)):
                    got += chunk
                head = got.decode(errors="replace").split("\r\n")[0]
            results[f"relay {relay}"] = ("done: " if " 200 " in head else "failed: ") + head
        except OSError as exc:
            results[f"relay {relay}"] = type(exc).__name__
    return results


def capabilities() -> str:
    """This process's effective capabilities (hex), as ``/proc/self/status`` says."""
    status = Path("/proc/self/status").read_text()
    return next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff"))


def main() -> None:
    stubborn = os.environ.get("TEST_AGENT_STUBBORN") == "1"
    if stubborn:
        # like adapters that outlive their client: SIGTERM ignored, a child process of its own,
        # and still there after stdin ended
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    asyncio.run(acp.run_agent(CodingAgent(), use_unstable_protocol=True))
    if stubborn:
        time.sleep(600)


if __name__ == "__main__":
    main()
