"""The plain surface for piped stdin (cli.md, "Piped input"): scripted turns, no full-screen app.

stdin is cut into inputs by `tui.link.scripts`: for a session whose prompts are Python programs, the
way Python reads a program (a compound statement with its indented lines is one input); else a
line each (a line ending in ``\\`` continues on the next); ``--whole``: the whole script. An input
is a prompt, sent once the previous turn ended, or a slash command (``/model NAME``, ``/queue [PROMPT]``,
``/resume``, ``/stats``, ``/detach``, ``/exit``). stdout gets each reply's text as it streams (or, with
``--output jsonl``, every event as a JSON line); stderr one line per turn outcome and every
error. It follows the session with the same `SessionWatch` as ``tui send --wait``.

Exit codes (`tui.link.outcomes`): 0 every turn completed; 1 a turn failed or was interrupted, a
timeout, any other error; 3 a question nobody answered; 4 the worker went away; 5 a reply with
nothing in it (a model that said nothing). Slash commands are the core's table (`tui.link.slash`),
carried out by the attachment (`Attachment.command`), as the app's are.
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, cast

from tui.access.base import SessionAccess
from tui.errors import NotPermitted, TuiError, UsageError
from tui.link import changes
from tui.link import slash as commands
from tui.link.base import AttachLink, LinkState, Reconnecting
from tui.link.local import local_client_id
from tui.link.outcomes import FAILED, turn_ending
from tui.link.scripts import Input, Split, Splitter
from tui.link.watch import AnswerSpec, QuestionPolicy, SessionWatch, TurnResult, Unanswered, WorkerGoneError
from tui.protocol import Event, TextChunk
from tui.protocol.ids import short_id
from tui.protocol.python import syntax_error

__all__ = ["ReplyWriter", "StdoutClosed", "load_answers", "run"]


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


class _Replayed:
    """A stream whose first lines were read already: those lines, then the rest of it (what
    `_Inputs` reads of a stream: its lines)."""

    def __init__(self, head: list[str], rest: IO[str]) -> None:
        self._head = head
        self._rest = rest

    def readline(self) -> str:
        return self._head.pop(0) if self._head else self._rest.readline()

    def __iter__(self) -> Iterator[str]:
        while self._head:
            yield self._head.pop(0)
        yield from self._rest


def with_input(stream: IO[str]) -> IO[str] | None:
    """`stream` once it has shown something to run (a line with more than blanks), or None when it
    ended first: ``tui < /dev/null`` makes no session."""
    head: list[str] = []
    for line in stream:
        head.append(line)
        if line.strip():
            return cast(IO[str], _Replayed(head, stream))
    return None


class _Inputs:
    """stdin's inputs as they arrive, cut by a `Splitter` in a daemon thread (a pipe, a file or a
    terminal). Lines before `start` are counted but skipped (``--from-line``)."""

    def __init__(self, stream: IO[str], loop: asyncio.AbstractEventLoop, how: Split, start: int = 1) -> None:
        self._queue: asyncio.Queue[Input | None] = asyncio.Queue()
        self._loop = loop
        self._stream = stream
        self._splitter = Splitter(how)
        self._start = start
        self.lines = 0
        """How many lines of the script were read so far."""
        self.ended = False
        """Whether the script's end was read."""
        threading.Thread(target=self._read, name="tui piped stdin", daemon=True).start()

    def _read(self) -> None:
        number = 0
        try:
            for raw in self._stream:
                number += 1
                if number >= self._start:
                    for item in self._splitter.feed(number, raw.rstrip("\n").rstrip("\r")):
                        self._put(item)
                self.lines = number
        except (OSError, ValueError):
            pass
        for item in self._splitter.end(number):
            self._put(item)
        self.ended = True
        self._put(None)

    def _put(self, item: Input | None) -> None:
        self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    async def next(self) -> Input | None:
        return await self._queue.get()

    def left(self, after: int) -> tuple[int, str] | None:
        """Where the rest of the script begins and what of it was not run, when it stops after
        line `after`; None when nothing is left."""
        first = None
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is not None and first is None:
                first = item.first
        if first is None and self.ended:
            return None
        begin = first if first is not None else after + 1
        if self.ended and begin == self.lines:
            return begin, f"line {begin} of the script was not run"
        if self.ended:
            return begin, f"lines {begin}-{self.lines} of the script ({self.lines - begin + 1}) were not run"
        return begin, f"the script from line {begin} on was not run"


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
    prompt_syntax: Literal["python", "text"] = "text"
    position: int = 0
    """The last line of the script taken so far."""
    inputs: _Inputs | None = None
    left: str | None = None
    """What of the script a question or a lost worker left unrun (said after its own line)."""

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
        # The session's number for the turn (as the TUI's `#N` and a traceback's `<program N>`).
        ending = turn_ending(result, self.reply_format, attach=attach, turn=f"turn {result.number or n}")
        self.say(ending.line)
        return ending.code

    def _record(self, code: int) -> bool:
        """Keep the first failure's code; whether the script goes on."""
        if code and not self.exit_code:
            self.exit_code = code
        return not code or (self.args.keep_going and not self.interrupted)

    async def prompt(self, text: str, line: int = 0) -> bool:
        assert self.watch is not None
        if self.prompt_syntax == "python":
            why = syntax_error(text)
            if why is not None:
                self.turns += 1
                where = f"line {line} of the script" if line else f"turn {self.turns}"
                self.say(f"{where} is not valid Python: {why}; it was not sent")
                return self._record(FAILED)
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
        """Run a slash command (the attachment's, as the app's are); None ends the script
        (``/detach``, ``/exit``)."""
        assert self.watch is not None
        word, rest = commands.parse(line)
        if word == "/queue" and rest and commands.find(word, "piped") is not None:
            # A script's queued prompt is sent now and its turn reported when it ends.
            self.turns += 1
            rid = await self.watch.send(rest, queue=True)
            self.queued.append((self.turns, rid))
            return True
        if word == "/exit":
            await self._report_queued(wait=True)
        outcome = await self.watch.attachment.command(line, surface="piped")
        if isinstance(outcome, changes.Unknown):
            names = ", ".join(c.name for c in commands.commands_for("piped"))
            raise UsageError(f"unknown command {word}; piped input takes {names}")
        if isinstance(outcome, changes.Usage):
            raise UsageError(
                outcome.text
                if word in ("/note", "/context", "/rewind")
                else f"{word} needs a name: `{word} NAME`"
            )
        if isinstance(outcome, changes.NotPermitted):
            raise NotPermitted(outcome.text)
        if isinstance(outcome, changes.Failed):
            raise outcome.error
        if isinstance(outcome, changes.Done) and outcome.name == "model":
            self.say(f"model is now {rest}")
        elif isinstance(outcome, changes.QueueShown):
            items = [item.prompt.splitlines()[0] if item.prompt else "" for item in outcome.queue]
            self.say(f"queue: {len(items)} waiting" + "".join(f"\n  {i}" for i in items))
        elif isinstance(outcome, changes.StatsShown):
            self.say(outcome.line)
        elif (
            isinstance(outcome, changes.ChildrenShown | changes.ContextShown | changes.Done) and outcome.text
        ):
            self.say(outcome.text)
        elif isinstance(outcome, changes.Resumed):
            self.say("the held queue runs again" if outcome.resumed else "the queue was not held")
        elif isinstance(outcome, changes.Stopped):
            self.say(
                f"stopped session {short_id(self.link.session_id)}: what it held in memory "
                "(its programs' variables) is gone; its transcript stays"
            )
            return None
        elif isinstance(outcome, changes.Leave):
            return None
        return True

    def what_is_left(self, cut: Input | None = None) -> str | None:
        """What of the script was not run, and how to run it; None when nothing is left. `cut`:
        the input whose turn the worker's end cut short, said first and run again."""
        left = self.inputs.left(self.position) if self.inputs is not None else None
        attach = self.link.command("attach", short_id(self.link.session_id))
        if cut is not None and cut.first > 0:
            lines = f"line {cut.first}" if cut.last <= cut.first else f"lines {cut.first}-{cut.last}"
            was = "was" if cut.last <= cut.first else "were"
            rest = f"; {left[1]}" if left is not None else ""
            return (
                f"{lines} of the script {was} cut short (the worker stopped during its turn){rest}; "
                f"`{attach} --from-line {cut.first} < SCRIPT` runs it again and the rest"
            )
        if left is None:
            return None
        begin, what = left
        return f"{what}; `{attach} --from-line {begin} < SCRIPT` runs the rest"

    async def script(self, stdin: IO[str], first: str | None) -> int:
        info = await self.link.info()
        self.reply_format, self.prompt_syntax = info.reply_format, info.prompt_syntax
        whole = getattr(self.args, "whole", False)
        how: Split = "whole" if whole else "python" if info.prompt_syntax == "python" else "lines"
        start = getattr(self.args, "from_line", 1)
        self.inputs = inputs = _Inputs(stdin, asyncio.get_running_loop(), how, start)
        self.watch = await SessionWatch.open(self.link, on_event=self.on_event, on_state=self.on_state)
        watch = self.watch
        self.replies = ReplyWriter(lambda: watch.own_turns, self.out)
        try:
            pending = Input(first, 0, 0) if first is not None else None
            while True:
                item = pending if pending is not None else await inputs.next()
                pending = None
                if item is None:
                    if first is None and inputs.ended and start > max(inputs.lines, 1):
                        lines = f"{inputs.lines} line{'s' if inputs.lines != 1 else ''}"
                        self.say(
                            f"--from-line {start} is past the script's end (it has {lines}); nothing was run"
                        )
                        return 2
                    break
                if not item.text.strip():
                    continue
                self.position = max(self.position, item.last)
                try:
                    if item.slash:
                        going = await self.slash(item.text.strip())
                        if going is None:
                            break
                    else:
                        going = await self.prompt(item.text, item.first)
                except Unanswered:
                    self.left = self.what_is_left()
                    raise
                except WorkerGoneError:  # the turn running now did not end
                    self.left = self.what_is_left(cut=None if item.slash else item)
                    raise
                except StdoutClosed:
                    raise
                except TuiError as exc:
                    self.say(str(exc))
                    going = self._record(exc.exit_code if exc.exit_code != 2 else FAILED)
                if not going:
                    left = self.what_is_left()
                    if left is not None:
                        self.say(left)
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
    if getattr(args, "answers", None):
        policy.source = f"--answers {args.answers}"
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
                    session_id = await target.create(
                        working_directory=folder,
                        agent=agent,
                        model=model,
                        budget=getattr(args, "budget", None),
                    )
                    print(f"tui: new session {session_id}", file=err, flush=True)
                else:
                    session_id = await target.resolve(session_id)
                link = await target.link(session_id, client_id=local_client_id("script"))
            state = _Run(link, args, out, err, policy)
            code = await state.script(stdin, first_prompt)
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
        _say_left(state, err)
        return exc.exit_code
    except WorkerGoneError as exc:
        print(f"tui: the session's worker went away: {exc}", file=err, flush=True)
        _say_left(state, err)
        return exc.exit_code
    finally:
        if with_signal:
            loop.remove_signal_handler(signal.SIGINT)
        if link is not None and not isinstance(target, AttachLink):
            await link.close()


def _say_left(state: _Run | None, err: IO[str]) -> None:
    if state is not None and state.left is not None:
        print(f"tui: {state.left}", file=err, flush=True)


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
