"""The plain surface for piped stdin (cli.md, "Piped input"): scripted turns, no full-screen app.

Each line of stdin is one input (a line ending in ``\\`` continues on the next): a prompt, sent
once the previous turn ended, or a slash command (``/model NAME``, ``/queue [PROMPT]``,
``/stats``, ``/detach``, ``/exit``). stdout gets each reply's text as it streams (or, with
``--output jsonl``, every event as a JSON line); stderr one line per turn outcome and every
error. It follows the session with the same `SessionWatch` as ``tui send --wait``.

Exit codes (`tui.link.outcomes`): 0 every turn completed; 1 a turn failed or was interrupted, a
timeout, any other error; 3 a question nobody answered; 4 the worker went away; 5 a reply with
nothing in it (a model that said nothing). Slash commands are the core's table (`tui.link.slash`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import threading
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from tui.access.base import SessionAccess
from tui.errors import TuiError, UsageError
from tui.link import slash as commands
from tui.link.base import AttachLink, LinkState, Reconnecting
from tui.link.local import local_client_id
from tui.link.outcomes import FAILED, turn_ending
from tui.link.watch import AnswerSpec, QuestionPolicy, SessionWatch, TurnResult, Unanswered, WorkerGoneError
from tui.protocol import Event, TextChunk
from tui.protocol.ids import short_id

__all__ = ["ReplyWriter", "StdoutClosed", "load_answers", "read_inputs", "run"]


def load_answers(path: str) -> list[AnswerSpec] | dict[str, AnswerSpec]:
    """Read ``--answers FILE``: JSON or TOML, a list (in order) or a map from question text.

    TOML holds a table: its ``answers`` key (a list or a table) when present, else the table itself.

    Raises:
        UsageError: the file cannot be read or holds something else.
    """
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UsageError(f"cannot read --answers {path}: {exc.strerror}") from exc
    data: Any
    try:
        data = json.loads(text)
    except ValueError:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise UsageError(f"--answers {path} is neither JSON nor TOML ({exc})") from exc
        if isinstance(data, dict) and "answers" in data:
            data = data["answers"]
    if isinstance(data, list) or (isinstance(data, dict) and all(isinstance(k, str) for k in data)):
        for value in data.values() if isinstance(data, dict) else data:
            ok = isinstance(value, (str, int)) or (
                isinstance(value, list) and all(isinstance(v, (str, int)) for v in value)
            )
            if not ok:
                raise UsageError(f"--answers {path}: {value!r} is not a label, a number or free text")
        return data
    raise UsageError(f"--answers {path} must hold a list of answers or a map from question to answer")


def read_inputs(lines: list[str]) -> list[str]:
    """Join continued lines (ending in ``\\``) into inputs; for tests and whole-file reads."""
    inputs: list[str] = []
    carry: list[str] = []
    for raw in lines:
        line = raw.rstrip("\n").rstrip("\r")
        if line.endswith("\\"):
            carry.append(line[:-1])
            continue
        inputs.append("\n".join([*carry, line]))
        carry = []
    if carry:
        inputs.append("\n".join(carry))
    return inputs


class _Inputs:
    """stdin's inputs as they arrive, read by a daemon thread (a pipe, a file or a terminal)."""

    def __init__(self, stream: IO[str], loop: asyncio.AbstractEventLoop) -> None:
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._loop = loop
        self._stream = stream
        threading.Thread(target=self._read, name="tui piped stdin", daemon=True).start()

    def _read(self) -> None:
        carry: list[str] = []
        try:
            for raw in self._stream:
                line = raw.rstrip("\n").rstrip("\r")
                if line.endswith("\\"):
                    carry.append(line[:-1])
                    continue
                self._put("\n".join([*carry, line]))
                carry = []
        except (OSError, ValueError):
            pass
        if carry:
            self._put("\n".join(carry))
        self._put(None)

    def _put(self, item: str | None) -> None:
        self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    async def next(self) -> str | None:
        return await self._queue.get()


class StdoutClosed(TuiError):
    """stdout was closed under us (``tui … | head``): nothing more can be shown."""


class ReplyWriter:
    """Writes reply text of this client's turns to stdout as it streams, plain bytes.

    Args:
        own_turns: the turn ids whose text is shown (this client's).
        out: the binary stdout.
    """

    def __init__(self, own_turns: Callable[[], set[str]], out: IO[bytes]) -> None:
        self._own_turns = own_turns
        self.out = out
        self._streamed: set[str] = set()
        self._last_byte = 10

    def write(self, data: bytes) -> None:
        """Write and flush; a closed stdout becomes `StdoutClosed` (and stops Python's own flush)."""
        try:
            self.out.write(data)
            self.out.flush()
        except BrokenPipeError as exc:
            with contextlib.suppress(OSError, ValueError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, self.out.fileno())
            raise StdoutClosed("stdout was closed; the session keeps running") from exc

    def __call__(self, event: Event) -> None:
        if isinstance(event, TextChunk) and event.text and event.turn_id in self._own_turns():
            data = event.text.encode("utf-8", "replace")
            self.write(data)
            self._last_byte = data[-1]
            self._streamed.add(event.turn_id)

    def finish(self, result: TurnResult) -> None:
        """End a turn's output: its reply when nothing streamed, a final newline when missing."""
        data = b""
        if result.turn_id not in self._streamed and result.reply:
            data = result.reply.encode("utf-8", "replace")
            self._last_byte = data[-1]
        if self._last_byte != 10:
            data += b"\n"
            self._last_byte = 10
        if data:
            self.write(data)


@dataclass
class _Run:
    link: AttachLink
    args: argparse.Namespace
    out: IO[bytes]
    err: IO[str]
    policy: QuestionPolicy
    reply_format: Literal["verbatim", "markdown"] = "verbatim"
    turns: int = 0
    exit_code: int = 0
    running: str | None = None
    """The request id of this script's turn in progress."""
    queued: list[tuple[int, str]] = field(default_factory=list)
    interrupted: bool = False
    watch: SessionWatch | None = None
    replies: ReplyWriter | None = None

    def say(self, text: str) -> None:
        print(f"tui: {text}", file=self.err, flush=True)

    # --- output ------------------------------------------------------------------------------
    def on_event(self, event: Event) -> None:
        if self.args.output == "jsonl":
            assert self.replies is not None
            self.replies.write(event.model_dump_json().encode() + b"\n")
        elif self.replies is not None:
            self.replies(event)

    def on_state(self, state: LinkState) -> None:
        if isinstance(state, Reconnecting) and state.attempt == 1:
            self.say(f"the stream dropped ({state.reason}); reconnecting")

    def _finish_output(self, result: TurnResult) -> None:
        if self.args.output != "jsonl" and self.replies is not None:
            self.replies.finish(result)

    # --- turns -------------------------------------------------------------------------------
    def _outcome(self, n: int, result: TurnResult) -> int:
        self._finish_output(result)
        attach = self.link.command("attach", short_id(self.link.session_id))
        ending = turn_ending(result, self.reply_format, attach=attach, turn=f"turn {n}")
        self.say(ending.line)
        return ending.code

    def _record(self, code: int) -> bool:
        """Keep the first failure's code; whether the script goes on."""
        if code and not self.exit_code:
            self.exit_code = code
        return not code or (self.args.keep_going and not self.interrupted)

    async def prompt(self, text: str) -> bool:
        assert self.watch is not None
        await self.watch.wait_idle(self.policy)
        if not await self._report_queued():
            return False
        self.turns += 1
        n = self.turns
        rid = await self.watch.send(text)
        self.running = rid
        result = await self.watch.wait_turn(rid, self.policy)
        # Left set when the wait is cut short, so a timeout can say the turn still runs.
        self.running = None
        return self._record(self._outcome(n, result))

    async def _report_queued(self, wait: bool = False) -> bool:
        assert self.watch is not None
        going = True
        for n, rid in list(self.queued):
            turn_id = self.watch.by_request.get(rid)
            if not wait and (turn_id is None or turn_id not in self.watch.ended):
                continue
            result = await self.watch.wait_turn(rid, self.policy)
            self.queued.remove((n, rid))
            going = self._record(self._outcome(n, result)) and going
        return going

    async def slash(self, line: str) -> bool | None:
        """Run a slash command; None ends the script (``/detach``, ``/exit``)."""
        assert self.watch is not None
        word, rest = commands.parse(line)
        if commands.find(word, "piped") is None:
            names = ", ".join(c.name for c in commands.commands_for("piped"))
            raise UsageError(f"unknown command {word}; piped input takes {names}")
        if word == "/model":
            if not rest:
                raise UsageError("/model needs a name: `/model NAME`")
            await self.link.set_model(rest)
            self.say(f"model is now {rest}")
        elif word == "/queue":
            if not rest:
                items = [item.prompt.splitlines()[0] if item.prompt else "" for item in self.watch.queue]
                self.say(f"queue: {len(items)} waiting" + "".join(f"\n  {i}" for i in items))
                return True
            self.turns += 1
            rid = await self.watch.send(rest, delivery="queue")
            self.queued.append((self.turns, rid))
        elif word == "/stats":
            self.say(commands.format_stats(await self.link.stats()))
        elif word == "/detach":
            return None
        elif word == "/exit":
            await self._report_queued(wait=True)
            await self.link.stop_worker()
            self.say(f"stopped session {short_id(self.link.session_id)}")
            return None
        return True

    async def script(self, inputs: _Inputs, first: str | None) -> int:
        self.reply_format = (await self.link.info()).reply_format
        self.watch = await SessionWatch.open(self.link, on_event=self.on_event, on_state=self.on_state)
        watch = self.watch
        self.replies = ReplyWriter(lambda: watch.own_turns, self.out)
        try:
            pending = first
            while True:
                line = pending if pending is not None else await inputs.next()
                pending = None
                if line is None:
                    break
                if not line.strip():
                    continue
                try:
                    if line.startswith("/") and not line.startswith("//"):
                        going = await self.slash(line.strip())
                        if going is None:
                            break
                    else:
                        going = await self.prompt(line)
                except (Unanswered, WorkerGoneError, StdoutClosed):
                    raise
                except TuiError as exc:
                    self.say(str(exc))
                    going = self._record(exc.exit_code if exc.exit_code != 2 else FAILED)
                if not going:
                    return self.exit_code
            await self._report_queued(wait=True)
            return self.exit_code
        finally:
            await self.watch.close()


async def _run_async(
    target: AttachLink | SessionAccess,
    args: argparse.Namespace,
    *,
    session_id: str | None,
    first_prompt: str | None,
    stdin: IO[str],
    out: IO[bytes],
    err: IO[str],
) -> int:
    policy = QuestionPolicy(
        answers=load_answers(args.answers) if getattr(args, "answers", None) else None,
        timeout=getattr(args, "question_timeout", None),
        default=getattr(args, "default_answer", None),
    )
    if policy.default is not None and policy.timeout is None:
        policy.timeout = 0.0
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    link: AttachLink | None = target if isinstance(target, AttachLink) else None
    state: _Run | None = None
    tasks: set[asyncio.Task[bool]] = set()

    def on_sigint() -> None:
        if state is not None and state.running is not None and not state.interrupted:
            state.interrupted = True
            state.say("interrupting the running turn (Ctrl+C again leaves at once)")
            tasks.add(loop.create_task(state.link.interrupt()))
        else:
            if state is not None:
                state.interrupted = True
            main.cancel()

    with_signal = threading.current_thread() is threading.main_thread()
    if with_signal:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    try:
        async with asyncio.timeout(getattr(args, "timeout", None)):
            if link is None:
                assert isinstance(target, SessionAccess)
                if session_id is None:
                    folder = _folder(getattr(args, "dir", None))
                    agent = getattr(args, "agent", None)
                    model = getattr(args, "model", None)
                    session_id = await target.create(working_directory=folder, agent=agent, model=model)
                    print(f"tui: new session {session_id}", file=err, flush=True)
                else:
                    session_id = await target.resolve(session_id)
                link = await target.link(session_id, client_id=local_client_id())
            state = _Run(link, args, out, err, policy)
            code = await state.script(_Inputs(stdin, loop), first_prompt)
            if state.interrupted:
                return 1
            return code
    except TimeoutError:
        left = ""
        if state is not None and (state.running is not None or state.queued) and link is not None:
            short = short_id(link.session_id)
            left = f"; the running turn was left running (`{link.command('attach', short)}` to watch)"
        print(f"tui: timed out after {args.timeout:g} s{left}", file=err, flush=True)
        return 1
    except asyncio.CancelledError:
        if state is not None and state.interrupted:
            print("tui: interrupted", file=err, flush=True)
            return 1
        raise
    except Unanswered as exc:
        print(f"tui: {exc}", file=err, flush=True)
        return exc.exit_code
    except WorkerGoneError as exc:
        print(f"tui: the session's worker went away: {exc}", file=err, flush=True)
        return exc.exit_code
    finally:
        if with_signal:
            loop.remove_signal_handler(signal.SIGINT)
        if link is not None and not isinstance(target, AttachLink):
            await link.close()


def run(
    target: AttachLink | SessionAccess,
    args: argparse.Namespace,
    *,
    session_id: str | None = None,
    first_prompt: str | None = None,
    stdin: IO[str] | None = None,
    stdout: IO[bytes] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    """Run stdin's script against a session and return the exit code (cli.md).

    Args:
        target: an open link to the session, or the machine's sessions (`SessionAccess`): then
            the session `session_id` is attached (its worker started), or a new one is made in
            ``args.dir`` (default: the current folder) when `session_id` is None.
        args: the piped options (``output``, ``keep_going``, ``answers``, ``question_timeout``,
            ``default_answer``, ``timeout``).
        session_id: the session to attach (an id or a unique prefix), with a `SessionAccess`.
        first_prompt: a prompt to run before stdin's (``tui PROMPT < script``).
        stdin, stdout, stderr: the streams (the process's by default).
    """
    body = _run_async(
        target,
        args,
        session_id=session_id,
        first_prompt=first_prompt,
        stdin=stdin or sys.stdin,
        out=stdout or sys.stdout.buffer,
        err=stderr or sys.stderr,
    )
    return asyncio.run(body)


def _folder(folder: str | None) -> str:
    return os.path.abspath(folder or os.getcwd())
