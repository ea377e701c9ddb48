"""The program runner inside the sandbox.

This file runs in the sandboxed interpreter as a script, with the standard library only (it never
imports ``tui``). It talks to the parent over two inherited pipes with frames of a 5-byte header
(kind, length) and a payload: kind 0 is a JSON message, kind 1 raw output bytes.

Threads: the main thread runs programs; the control thread reads the parent's messages (run,
tool replies, interrupt); the pump thread ships output, both the Python-level writes buffered by
`_Output` and whatever C code and subprocesses write to fd 1 and 2, which are a pipe it reads.
"""

from __future__ import annotations

import _ast
import contextlib
import errno
import fcntl
import json
import linecache
import os
import resource
import select
import signal
import struct
import sys
import threading
import time
import types

TYPE_CHECKING = False  # typing is not imported either: an idle interpreter holds none of these
if TYPE_CHECKING:  # asyncio (6 MiB) and traceback are imported when first needed; ast (0.6 MiB) and
    # platform never: compiling needs only the builtin _ast, the version is sys.version's
    import asyncio
    import traceback
    from typing import Any

HEADER = struct.Struct(">BI")
ENCODE = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
KIND_JSON = 0
KIND_OUTPUT = 1
CHUNK = 1 << 20
READ_SIZE = 65536  # os.read allocates this much each call: keep it small for fast round trips
FLUSH_SECONDS = 0.01
PIPE_CHECK_SECONDS = 0.001
HERE = os.path.abspath(__file__)
TOP_LEVEL_AWAIT = _ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
CO_COROUTINE = 0x0080
"""``inspect.CO_COROUTINE``: the flag of code with a top-level ``await`` (inspect is not imported)."""
TRIM_AFTER = 5.0
"""Seconds with no program after which the runner hands the heap it freed back to the system, once."""


class LimitExceeded(Exception):
    """The program ran into one of its limits."""


class ToolError(Exception):
    """A tool call failed; the message says why."""


MAIN_THREAD = threading.get_ident()


class NoInterrupt:
    """Hold an interrupt back while the main thread is inside the block; raise it on leaving.

    The SIGINT handler runs in the main thread between bytecodes (and inside a system call that
    returns EINTR, which is then retried); while a block is held it only notes the interrupt.
    This costs no system call, unlike masking the signal.
    """

    depth = 0
    pending = False
    __slots__ = ("main",)

    def __enter__(self) -> None:
        self.main = threading.get_ident() == MAIN_THREAD
        if self.main:
            NoInterrupt.depth += 1

    def __exit__(self, *_: object) -> None:
        if self.main:
            NoInterrupt.depth -= 1
            if NoInterrupt.depth == 0 and NoInterrupt.pending:
                NoInterrupt.pending = False
                raise KeyboardInterrupt


class Channel:
    """Frames to the parent; any thread may send."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lock = threading.Lock()

    def send(self, kind: int, payload: bytes) -> None:
        # An interrupt must never cut a frame in half (the stream would be lost), so SIGINT
        # waits while the main thread writes one; it is delivered right after.
        frame = memoryview(HEADER.pack(kind, len(payload)) + payload)
        with NoInterrupt(), self.lock:
            while frame:
                frame = frame[os.write(self.fd, frame) :]

    def message(self, **fields: Any) -> None:
        self.send(KIND_JSON, ENCODE(fields).encode())


class Output:
    """Both sys.stdout and sys.stderr: one buffer, so their order is kept.

    What C code and subprocesses write to fd 1 and 2 goes through a pipe instead. To keep the
    two in order, the buffer is always shipped before the pipe is drained, and the pipe is
    drained (after the buffer) before anything is added to the buffer.
    """

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.lock = threading.Lock()
        self.pending = bytearray()
        self.pipe_poll = select.poll()
        self.ship: Any = None
        self.next_check = 0.0
        self.wake: Any = None
        """Wakes the pump when it sleeps with nothing to ship (a thread writing between programs)."""

    def write_bytes(self, data: bytes, check: bool = True) -> None:
        # Looking at the pipe costs a system call: do it at most once a millisecond, and always
        # after an explicit flush (code that flushes, then writes to fd 1, expects its order kept).
        if check:
            now = time.perf_counter()
            if now >= self.next_check:
                self.next_check = now + PIPE_CHECK_SECONDS
                if self.pipe_poll.poll(0):
                    self.ship()
        with self.lock:
            self.pending += data
            if len(self.pending) >= 65536:
                self.flush_locked()
        if self.wake is not None:
            self.wake()

    def flush(self) -> None:
        self.next_check = 0.0
        with self.lock:
            self.flush_locked()

    def flush_locked(self) -> None:
        while self.pending:
            chunk = bytes(self.pending[:CHUNK])
            del self.pending[:CHUNK]
            self.channel.send(KIND_OUTPUT, chunk)


class _Binary:
    def __init__(self, output: Output) -> None:
        self._output = output

    def write(self, data: bytes) -> int:
        self._output.write_bytes(bytes(data))
        return len(data)

    def flush(self) -> None:
        self._output.flush()


class TextStream:
    """A text stream writing into `Output`, with what code usually asks of sys.stdout."""

    encoding = "utf-8"
    errors = "backslashreplace"
    newlines = None
    closed = False
    line_buffering = False

    def __init__(self, output: Output, fd: int, name: str) -> None:
        self._output = output
        self._fd = fd
        self.name = name
        self.buffer = _Binary(output)

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        # print() writes its end ("\n") right after the text: nothing else can come between
        self._output.write_bytes(text.encode("utf-8", "backslashreplace"), check=text != "\n")
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._output.flush()

    def fileno(self) -> int:
        self._output.flush()
        return self._fd

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False


class Runner:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.channel = Channel(config["out_fd"])
        self.in_fd = config["in_fd"]
        self.output = Output(self.channel)
        self.state = threading.Lock()
        self.running = False
        self.interrupt_requested = False
        self.cpu_deadline: float | None = None
        self.cpu_hit = False
        self.runs: list[dict[str, Any]] = []
        self.runs_ready = threading.Semaphore(0)
        self.reply_fd = config["reply_fd"]
        self.replies = bytearray()
        self.call_lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.forked = False
        self.next_call = 0
        self.main_ident = threading.get_ident()
        self.globals: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
        self.fd_pipe = -1
        self.pump_lock = threading.Lock()
        self.busy = False
        """A program is being run (the pump ticks every FLUSH_SECONDS only then, or with output held)."""
        self.pump_asleep = False
        self.wake_r, self.wake_w = -1, -1

    # setup -----------------------------------------------------------------------------------

    def setup(self) -> None:
        for fd in (self.in_fd, self.channel.fd, self.reply_fd):
            os.set_inheritable(fd, False)
        # confine first: a failure here still reaches the parent through the original stderr
        self.apply_limits()
        confine = self.config.get("confine")
        seccomp = self.config.get("seccomp")
        if confine or seccomp:
            confinement = load_beside("_child_confine")
            if confine:
                confinement.confine_self(confine)
            if seccomp:
                confinement.install_filter(seccomp)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 1)
        os.dup2(write_end, 2)
        os.close(write_end)
        os.set_blocking(read_end, False)
        self.fd_pipe = read_end
        self.output.pipe_poll.register(read_end, select.POLLIN)
        self.output.ship = self.ship
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.output.wake = self.wake_pump
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - lives as long as we do
        sys.stdout = sys.__stdout__ = TextStream(self.output, 1, "<stdout>")  # type: ignore[misc,assignment]
        sys.stderr = sys.__stderr__ = TextStream(self.output, 2, "<stderr>")  # type: ignore[misc,assignment]
        # the control thread needs the GIL to deliver an interrupt: a busy program would hold it
        # for the default 5 ms before switching, and stop would wait that long
        sys.setswitchinterval(0.0005)
        signal.signal(signal.SIGINT, self.on_sigint)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        self.globals["ToolError"] = ToolError
        self.globals["LimitExceeded"] = LimitExceeded

    def apply_limits(self) -> None:
        limits = self.config["limits"]
        pairs = [
            (resource.RLIMIT_AS, limits["memory_bytes"]),
            (resource.RLIMIT_NOFILE, limits["open_files"]),
            (resource.RLIMIT_FSIZE, limits["file_size_bytes"]),
            (resource.RLIMIT_CORE, 0),
        ]
        if self.config.get("nproc"):
            pairs.append((resource.RLIMIT_NPROC, limits["processes"]))
        for which, value in pairs:
            if value is not None:
                resource.setrlimit(which, (value, value))

    def on_sigint(self, signum: int, frame: Any) -> None:
        if not self.running:
            return
        if NoInterrupt.depth:
            NoInterrupt.pending = True
            return
        raise KeyboardInterrupt

    # threads ---------------------------------------------------------------------------------

    def control(self) -> None:
        buffer = bytearray()
        while True:
            try:
                data = os.read(self.in_fd, READ_SIZE)
            except InterruptedError:
                continue
            if not data:
                os._exit(0)
            buffer += data
            while len(buffer) >= HEADER.size:
                _kind, size = HEADER.unpack_from(buffer)
                if len(buffer) < HEADER.size + size:
                    break
                message = json.loads(bytes(buffer[HEADER.size : HEADER.size + size]))
                del buffer[: HEADER.size + size]
                self.dispatch(message)

    def dispatch(self, message: dict[str, Any]) -> None:
        kind = message["t"]
        if kind == "run":
            self.runs.append(message)
            self.runs_ready.release()
        elif kind == "interrupt":
            self.interrupt()
        elif kind == "exit":
            os._exit(0)

    def interrupt(self) -> None:
        with self.state:
            if self.running:
                self.interrupt_requested = True
                signal.pthread_kill(self.main_ident, signal.SIGINT)

    def pump(self) -> None:
        # Between programs, with nothing held, the pump sleeps until output comes through the pipe
        # or `wake_pump` is called: an idle interpreter wakes for nothing.
        while True:
            self.pump_asleep = True
            if self.busy or self.output.pending:
                self.pump_asleep = False
                select.select([self.fd_pipe], [], [], FLUSH_SECONDS)
            else:
                select.select([self.fd_pipe, self.wake_r], [], [])
                self.pump_asleep = False
                with contextlib.suppress(BlockingIOError):
                    os.read(self.wake_r, 4096)
            self.ship()
            self.check_cpu()

    def wake_pump(self) -> None:
        """Have a sleeping pump look again (a program starts, or output waits in the buffer)."""
        if self.pump_asleep:
            self.pump_asleep = False
            with contextlib.suppress(OSError):
                os.write(self.wake_w, b"!")

    def ship(self) -> None:
        """Send all output so far, in order: the buffered writes, then what came through the pipe."""
        with self.pump_lock:
            self.output.flush()
            while True:
                try:
                    data = os.read(self.fd_pipe, READ_SIZE)
                except BlockingIOError:
                    return
                if not data:
                    return
                self.channel.send(KIND_OUTPUT, data)

    def check_cpu(self) -> None:
        deadline = self.cpu_deadline
        if deadline is not None and not self.cpu_hit and cpu_time() > deadline:
            self.cpu_hit = True
            self.interrupt()

    # tools -----------------------------------------------------------------------------------

    def make_tool(self, name: str, properties: list[str], description: str) -> Any:
        runner = self

        def tool(*args: Any, **kwargs: Any) -> Any:
            if len(args) > len(properties):
                raise TypeError(
                    f"{name}() takes {len(properties)} positional arguments but {len(args)} were given"
                )
            for prop, arg in zip(properties, args, strict=False):
                if prop in kwargs:
                    raise TypeError(f"{name}() got multiple values for argument {prop!r}")
                kwargs[prop] = arg
            return runner.call(name, kwargs)

        tool.__name__ = tool.__qualname__ = name
        tool.__doc__ = description
        return tool

    def after_fork(self) -> None:
        """In a process the program forked: write straight to fd 1 and 2, never to the parent's pipes.

        Only the forking thread survives a fork, so nothing would ship the buffer, and frames
        written by two processes could interleave.
        """
        self.forked = True
        for fd in (self.channel.fd, self.in_fd, self.reply_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        sys.stdout = sys.__stdout__ = open(1, "w", encoding="utf-8", closefd=False, buffering=1)  # type: ignore[misc]  # noqa: SIM115
        sys.stderr = sys.__stderr__ = open(2, "w", encoding="utf-8", closefd=False, buffering=1)  # type: ignore[misc]  # noqa: SIM115

    def end_forked_child(self, outcome: dict[str, Any]) -> None:
        """A forked child ran to the end of the program: it exits as a script's child would."""
        error = outcome.get("error")
        if error:
            sys.stderr.write(error.get("traceback") or f"{error['type']}: {error['message']}\n")
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(0 if outcome.get("status") == "completed" else 1)

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        if self.forked:
            raise ToolError(f"{name}() can only be called from the program's own process, not a forked one")
        try:
            payload = ENCODE(arguments)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name}() takes JSON values only: {exc}") from None
        # one call at a time: the reply pipe has one reader, whichever thread of the program calls
        with self.call_lock:
            self.next_call += 1
            call_id = self.next_call
            head = b'{"t":"call","id":%d,"tool":%s,"args":' % (call_id, json.dumps(name).encode())
            self.channel.send(KIND_JSON, head + payload.encode() + b"}")
            reply = self.read_reply(call_id)
        if "error" in reply:
            if reply.get("kind") == "arguments":
                raise TypeError(f"{name}(): {reply['error']}")
            raise ToolError(reply["error"])
        return reply.get("value")

    def read_reply(self, call_id: int) -> dict[str, Any]:
        """Block until the parent answers this call; replies to abandoned calls are skipped.

        Only the main thread reads the reply pipe, so an answer reaches the program without a
        thread switch; an interrupt arrives as SIGINT and breaks the read.
        """
        buffer = self.replies
        while True:
            while len(buffer) >= HEADER.size:
                _kind, size = HEADER.unpack_from(buffer)
                if len(buffer) < HEADER.size + size:
                    break
                reply = json.loads(bytes(buffer[HEADER.size : HEADER.size + size]))
                del buffer[: HEADER.size + size]
                if reply.get("id") == call_id:
                    return reply  # type: ignore[no-any-return]
            # wait where an interrupt may land, then read where it may not, so no byte is lost
            select.select([self.reply_fd], [], [])
            with NoInterrupt():
                data = os.read(self.reply_fd, 4096)
                buffer += data
            if not data:
                os._exit(0)

    # programs --------------------------------------------------------------------------------

    def serve(self) -> None:
        threading.Thread(target=self.control, name="control", daemon=True).start()
        threading.Thread(target=self.pump, name="pump", daemon=True).start()
        os.register_at_fork(after_in_child=self.after_fork)
        self.channel.message(t="ready", python=sys.version.split()[0])
        while True:
            if not self.runs_ready.acquire(timeout=TRIM_AFTER):
                trim_heap()  # once per idle spell: a program's freed memory stays counted otherwise
                self.runs_ready.acquire()
            message = self.runs.pop(0)
            self.busy = True
            self.wake_pump()
            try:
                outcome = self.run(message)
            finally:
                self.busy = False
            if self.forked:
                self.end_forked_child(outcome)
            self.ship()
            self.channel.message(t="done", id=message["id"], **outcome)

    def run(self, message: dict[str, Any]) -> dict[str, Any]:
        source: str = message["source"]
        filename = message.get("name") or f"<program {message['id']}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        namespace = self.globals
        namespace["FRAME"] = message.get("frame")
        namespace["ToolError"] = ToolError
        for tool in message.get("tools", []):
            namespace[tool["name"]] = self.make_tool(tool["name"], tool["properties"], tool["description"])
        try:
            tree = compile(source, filename, "exec", _ast.PyCF_ONLY_AST | TOP_LEVEL_AWAIT, dont_inherit=True)
            last = None
            if tree.body and isinstance(tree.body[-1], _ast.Expr):
                last = _ast.Expression(tree.body[-1].value)
                del tree.body[-1]
            body = compile(tree, filename, "exec", TOP_LEVEL_AWAIT, dont_inherit=True)
            tail = (
                compile(last, filename, "eval", TOP_LEVEL_AWAIT, dont_inherit=True)
                if last is not None
                else None
            )
        except (SyntaxError, ValueError) as exc:
            return self.failure(exc)
        cpu_seconds = self.config["limits"].get("cpu_seconds")
        self.cpu_hit = False
        self.cpu_deadline = cpu_time() + cpu_seconds if cpu_seconds else None
        value: Any = None
        try:
            with self.state:
                self.interrupt_requested = False
                NoInterrupt.pending = False
                self.running = True
            try:
                self.evaluate(body, namespace)
                if tail is not None:
                    value = self.evaluate(tail, namespace)
            finally:
                with self.state:
                    self.running = False
                self.cpu_deadline = None
        except KeyboardInterrupt as exc:
            if self.cpu_hit:
                return self.limit("cpu", f"the program used more than {cpu_seconds} s of CPU time")
            if self.interrupt_requested:
                return {"status": "interrupted"}
            return self.failure(exc)
        except MemoryError:
            size = self.config["limits"]["memory_bytes"]
            return self.limit("memory", f"the program needed more than {size} bytes of memory")
        except SystemExit as exc:
            if exc.code in (None, 0):
                return {"status": "completed"}
            return self.failure(exc)
        except BaseException as exc:
            if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
                size = self.config["limits"]["file_size_bytes"]
                return self.limit("file_size", f"the program wrote a file larger than {size} bytes")
            if isinstance(exc, OSError) and exc.errno == errno.EMFILE:
                count = self.config["limits"]["open_files"]
                return self.limit("open_files", f"the program opened more than {count} files at once")
            return self.failure(exc)
        namespace["_"] = value if tail is not None and value is not None else namespace.get("_")
        if tail is None:
            return {"status": "completed"}
        return {"status": "completed", **describe_value(value)}

    def evaluate(self, code: types.CodeType, namespace: dict[str, Any]) -> Any:
        """Run compiled code; code with a top-level ``await`` runs on the runner's event loop."""
        if not code.co_flags & CO_COROUTINE:
            return eval(code, namespace)
        if self.loop is None:
            import asyncio  # the first program with a top-level await

            self.loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self.loop)
        task = self.loop.create_task(eval(code, namespace))
        try:
            return self.loop.run_until_complete(task)
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    self.loop.run_until_complete(task)

    def limit(self, name: str, detail: str) -> dict[str, Any]:
        message = f"{name}: {detail}"
        error = {"type": "LimitExceeded", "message": message, "traceback": f"LimitExceeded: {message}\n"}
        return {"status": "error", "error": error}

    def failure(self, exc: BaseException) -> dict[str, Any]:
        return {
            "status": "error",
            "error": {
                "type": type(exc).__name__,
                "message": str(exc),
                "traceback": "".join(trimmed(exc).format()),
            },
        }


def trimmed(exc: BaseException) -> traceback.TracebackException:
    """The exception's traceback without the frames of this runner."""
    import traceback  # the first program that fails

    report = traceback.TracebackException(type(exc), exc, exc.__traceback__, compact=True)
    seen: set[int] = set()
    stack: list[traceback.TracebackException] = [report]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        frames = [f for f in item.stack if f.filename != HERE]
        # start at the program's first frame: what runs it (asyncio for top-level await) is not its own
        first = next((i for i, f in enumerate(frames) if f.filename.startswith("<program ")), 0)
        item.stack = traceback.StackSummary.from_list(frames[first:])
        stack.extend(x for x in (item.__cause__, item.__context__) if x is not None)
    return report


def describe_value(value: Any) -> dict[str, Any]:
    if value is None:
        return {"value": None, "repr": None}
    try:
        text = repr(value)
    except Exception as exc:  # a broken __repr__ must not break the program's result
        text = f"<{type(value).__name__} object: repr() failed: {exc}>"
    jsonable = to_json(value)
    return {"value": jsonable if jsonable is not NOT_JSON else text, "repr": text}


NOT_JSON = object()


def to_json(value: Any, depth: int = 0) -> Any:
    """The value as plain JSON data, or NOT_JSON when any part of it is not JSON-compatible."""
    if depth > 100:
        return NOT_JSON
    if value is None or isinstance(value, bool | int | str):
        return value if type(value) in (bool, int, str) or value is None else NOT_JSON
    if isinstance(value, float):
        return value if type(value) is float and value == value and abs(value) != float("inf") else NOT_JSON
    if type(value) in (list, tuple):
        items = [to_json(v, depth + 1) for v in value]
        return NOT_JSON if any(i is NOT_JSON for i in items) else items
    if type(value) is dict:
        if not all(type(k) is str for k in value):
            return NOT_JSON
        pairs = {k: to_json(v, depth + 1) for k, v in value.items()}
        return NOT_JSON if any(v is NOT_JSON for v in pairs.values()) else pairs
    return NOT_JSON


def trim_heap() -> None:
    """Return the C heap's free pages to the system (glibc's ``malloc_trim``), through ctypes
    when the confinement or a program has loaded it; nothing where the C library has no such call."""
    ctypes = sys.modules.get("ctypes")
    if ctypes is not None:
        with contextlib.suppress(Exception):
            ctypes.CDLL(None).malloc_trim(0)


def load_beside(name: str) -> types.ModuleType:
    """The module ``NAME.py`` beside this file (the interpreter runs isolated: no script folder is
    on ``sys.path``): ``_child_site`` (the start-up) and ``_child_confine`` (confinement)."""
    import importlib.util

    path = os.path.join(os.path.dirname(HERE), f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise OSError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cpu_time() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    load_beside("_child_site").start_site()
    config = json.loads(sys.argv[1])
    runner = Runner(config)
    runner.setup()
    fcntl.fcntl(runner.channel.fd, fcntl.F_SETFD, fcntl.FD_CLOEXEC)
    del sys.argv[1:]
    sys.argv[0] = ""
    runner.serve()


if __name__ == "__main__":
    main()
