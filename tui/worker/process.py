"""The worker process: take the session's lock, continue its journal, serve the bridge.

``python -m tui.commands.worker --state-dir DIR SESSION_ID`` (`tui.commands.worker` hands `main`
the access layer the session's children are started through). Order of a start: the owner lock (a second
worker is refused at once), the journal (a torn last line cut), ``worker_started`` and the
repair of what a dead predecessor left open, the bridge listening on a socket bound here (mode
0600 in a 0700 folder), and only then ``worker.json``: a launcher that sees the sidecar can talk
to the bridge.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import logging
import os
import shutil
import signal
import socket
import sys
import threading
from collections.abc import Callable, Generator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from tui import worker_version
from tui.config import Config, WorkerSettings, load_config
from tui.errors import Locked, TuiError
from tui.protocol import FEATURES, Budget, TurnRecord
from tui.serve import JsonH11
from tui.store import (
    EpochFence,
    Journal,
    OwnerLock,
    SessionPaths,
    SessionRecord,
    StatePaths,
    TurnStore,
    WorkerSidecar,
    get_session,
    write_sidecar,
)
from tui.store.checkpoint import read_checkpoint
from tui.summary import note_session
from tui.worker.agent import Agent, AgentContext
from tui.worker.agents import make_agent
from tui.worker.bridge import build_app
from tui.worker.children import ChildStarter
from tui.worker.core import SessionWorker
from tui.worker.indexing import keep_index
from tui.worker.notify import watch

__all__ = ["agent_context", "bind_socket", "main", "take_session"]

log = logging.getLogger("tui.worker")

EXIT_BOUND = 2.0
"""Seconds within which a leaving worker's process is gone, open streams or not."""


def agent_context(paths: SessionPaths, record: SessionRecord) -> AgentContext:
    """What the session's agent is made from: its record, paths, the user's config, its turns.

    A config.toml that cannot be read is logged and read as empty: the agent kinds that need a
    setting say so themselves, and a python session does not stop working over a typo there.
    """
    try:
        config = load_config()
    except TuiError as exc:
        log.warning("%s; going on without it", exc)
        config = Config()

    def earlier_turns() -> list[TurnRecord]:
        turns, _ = TurnStore(paths.turns).page(1_000_000)
        return turns

    return AgentContext(record=record, paths=paths, config=config, earlier_turns=earlier_turns)


def bind_socket(path: Path) -> socket.socket:
    """Bind and listen on the bridge's Unix socket: mode 0600, in a folder of mode 0700 or stricter."""
    if path.parent.stat().st_mode & 0o077:
        os.chmod(path.parent, 0o700)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a dead predecessor's; the lock says it is ours now
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(256)
    sock.setblocking(False)
    return sock


BRIDGE_HOST = "TUI_BRIDGE_HOST"
"""The environment variable naming the address a worker on a cluster's node listens on over TCP
too (set by the engine that starts it, `tui.link.ray`), behind the session's secret."""
PREDECESSOR_LOST = "TUI_PREDECESSOR_LOST"
"""Set by the engine that starts the worker when the previous one's machine was lost: the error
of the turn it left open."""


def bind_tcp(host: str) -> socket.socket:
    """Listen on TCP at `host`, on a port the system picks."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.bind((host, 0))
    sock.listen(256)
    sock.setblocking(False)
    return sock


UNAUTHORIZED = (
    b'{"error":"unauthorized","detail":"the session\'s secret (bridge.secret) is wrong or missing"}'
)


def behind_secret(app: ASGIApp, secret: str) -> ASGIApp:
    """`app`, answering a request that came over TCP only when it carries ``Authorization: Bearer
    SECRET``: 401 otherwise, without reading it. A request on the Unix socket (mode 0600) is not
    asked (uvicorn's ``server`` of a Unix socket has no port)."""
    expected = f"Bearer {secret}".encode()

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        server = scope.get("server")
        if scope["type"] == "http" and server is not None and server[1] is not None:
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, expected):
                body = UNAUTHORIZED
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", b"%d" % len(body)),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


class _Server(uvicorn.Server):
    """uvicorn, minus its signal handling (the worker leaves properly on SIGTERM) and its 10 Hz
    main loop (an idle worker wakes for nothing: `exit` ends the wait), plus a ready event.

    uvicorn's tick refreshes the ``date`` header and counts requests for ``limit_max_requests``;
    the bridge sends no ``date`` header (``date_header=False``) and sets no request limit.
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()
        self._exit = asyncio.Event()

    def exit(self) -> None:
        """Stop serving: uvicorn's graceful shutdown follows (open connections get their grace)."""
        self.should_exit = True
        self._exit.set()

    async def main_loop(self) -> None:
        await self.on_tick(0)  # the headers, once
        if not self.should_exit:
            await self._exit.wait()

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()


def _end_fenced(newer: int) -> None:
    """A newer worker took the session: end this process at once, writing nothing more (not
    even ``worker_leaving``: the journal is the newer worker's now)."""
    log.error("ending: worker epoch %d runs this session now", newer)
    logging.shutdown()
    os._exit(5)


def idle_policy(agent: Agent, settings: WorkerSettings, explicit: float | None) -> Callable[[], float]:
    """Seconds of idleness after which the worker lets go of its session (0: never), asked anew
    each time (an ACP agent says whether it loads its session only once it started).

    `explicit` (``--idle-timeout``, ``TUI_IDLE_TIMEOUT``) holds for every session; otherwise a
    session that comes back whole (`Agent.keeps_state`) gets ``[workers] idle_timeout`` and one
    whose worker holds what a restart loses gets ``python_idle_timeout``.
    """

    def timeout() -> float:
        if explicit is not None:
            return explicit
        return settings.idle_timeout if agent.keeps_state else settings.python_idle_timeout

    return timeout


def _said(seconds: float) -> str:
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"


async def _leave_when_idle(worker: SessionWorker) -> None:
    trimmed = 0.0
    while not worker.writer.leaving:
        limit = worker.idle_timeout()
        await asyncio.sleep(min(5.0, limit / 4) if limit > 0 else 5.0)
        limit = worker.idle_timeout()
        idle = worker.idle_for()
        if limit > 0 and idle >= limit:
            await worker.leave(f"idle for {_said(limit)}")
            return
        trimmed = _trim_when_idle(worker, idle, trimmed)


TRIM_AFTER = 5.0
"""Seconds of idleness after which the worker gives the heap it freed back to the system, once."""


def _trim_when_idle(worker: SessionWorker, idle: float, trimmed: float) -> float:
    """Trim the heap once per idle spell: when `worker` has been idle `TRIM_AFTER` seconds and
    was not trimmed since its last activity (`trimmed`: the activity it was last trimmed after)."""
    if idle >= TRIM_AFTER and worker.writer.last_activity != trimmed:
        _trim_heap()
        return worker.writer.last_activity
    return trimmed


def _trim_heap() -> None:
    """Return the C heap's free pages to the system (glibc's ``malloc_trim``): what the start,
    the journal's reading and a turn allocated and freed since stays counted in the worker's
    memory otherwise. Nothing where the C library has no such call."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


GONE_CHECK = 5.0
"""Seconds between looks at whether the session's folder still exists."""


async def _leave_when_gone(worker: SessionWorker, paths: SessionPaths) -> None:
    """Leave once the session's record is gone (its folder or the whole state dir was deleted):
    no client can find this worker any more, and it would run on for nobody."""
    while not worker.writer.leaving:
        await asyncio.sleep(GONE_CHECK)
        if not paths.record.exists():
            log.warning("the session's folder %s is gone; leaving", paths.root)
            await worker.leave("its session folder was deleted")
            return


def keep_checkpoints(worker: SessionWorker, context: AgentContext, paths: SessionPaths) -> None:
    """Checkpoints of the session's folder at each turn's start and end (config.toml's
    ``[checkpoints]``; ``TUI_CHECKPOINTS=off`` in the environment turns them off for every
    session), kept in ``sessions/ID/files.git``; made ready in the background."""
    from tui.protocol import FilesChanged, Note, Rewound
    from tui.worker.files import keep_files

    writer = worker.writer

    def emit(event: Note | FilesChanged | Rewound) -> object:
        if isinstance(event, FilesChanged):
            writer.emit_turn(event)
            return None
        return writer.emit(event)

    settings = context.config.checkpoints
    if os.environ.get("TUI_CHECKPOINTS", "").lower() in ("0", "off", "false", "no"):
        settings = settings.model_copy(update={"enabled": False})
    worker.control.files = keep_files(
        settings,
        context.working_directory,
        paths.root / "files.git",
        paths.root.parent.parent,
        emit,
        worker.writer.journal,
    )


def source_confinement(context: AgentContext) -> tuple[Callable[[Sequence[str]], list[str]] | None, str]:
    """How a context source's command is confined: as a program is (its folder writable, tui's
    own folders hidden, its installation and ``.git`` read-only, a network namespace of its own
    and the programs' seccomp filter: no socket, so no network, no abstract Unix socket, no
    loopback), and why it cannot be when it cannot (no bubblewrap). What it runs may be a script
    a program wrote in the session's folder: it reaches no more than the program."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None, "bubblewrap is not installed, and a context source's command runs only confined"
    from tui.codemode.confine import PROGRAM_REFUSED, Protected, bwrap_command

    workdir = context.working_directory
    rule: list[Protected] = []  # the rule is read at the first run: a worker with no source pays nothing
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(workdir), "LANG": "C.UTF-8"}

    def confine(command: Sequence[str]) -> list[str]:
        if not rule:
            from tui.worker.agents._reach import protected_of  # its acp import only when needed

            rule.append(protected_of(context))
        return bwrap_command(
            command, bwrap=bwrap, workdir=workdir, protected=rule[0], env=env, refused=PROGRAM_REFUSED
        )

    return confine, ""


async def _serve(
    paths: SessionPaths,
    record: SessionRecord,
    lock: OwnerLock,
    idle_timeout: float | None,
    starter: Callable[[StatePaths], ChildStarter] | None,
) -> int:
    checkpoint = read_checkpoint(paths.checkpoint)
    journal = Journal.open_for_append(paths.journal, resume=checkpoint.mark if checkpoint else None)
    context = agent_context(paths, record)
    agent = make_agent(context)
    worker = SessionWorker(
        paths, record, journal, agent, lock=lock, follower_limit=_follower_limit(), starter=starter
    )
    worker.idle_timeout = idle_policy(agent, context.config.workers, idle_timeout)
    worker.predecessor_lost = os.environ.get(PREDECESSOR_LOST) or None
    if record.budget is None:
        worker.first_budget = Budget.model_validate(context.config.budget.model_dump())
    worker.writer.load(checkpoint)
    # This worker's epoch, claimed before it writes anything: an older worker of the session
    # still running somewhere (a machine cut off, storage without flock) writes no more.
    fence = EpochFence(paths.epoch, worker.writer.state.epoch + 1)
    fence.claim()
    worker.writer.fence = fence
    worker.writer.on_fenced = _end_fenced
    watch(worker, context.config.notify)
    indexer = keep_index(worker.writer.listeners, paths)
    worker.begin()
    keep_checkpoints(worker, context, paths)
    if worker.control.children is not None:
        worker.control.children.resume()  # follow again the children a predecessor followed
    sock_path = paths.socket
    sock = bind_socket(sock_path)
    sockets = [sock]
    app = build_app(worker)
    address: str | None = None
    host = os.environ.get(BRIDGE_HOST)
    if host:
        # On a cluster's node: clients on other machines reach the bridge over TCP, with the
        # secret the engine wrote beside the journal (a TCP port is not a 0600 socket).
        try:
            secret = paths.secret.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError) as exc:
            log.error("the session's secret %s cannot be read (%s); not serving over TCP", paths.secret, exc)
            worker.release()
            return 1
        tcp = bind_tcp(host)
        sockets.append(tcp)
        app = behind_secret(app, secret)
        bound = tcp.getsockname()
        address = f"[{bound[0]}]:{bound[1]}" if ":" in bound[0] else f"{bound[0]}:{bound[1]}"
    config = uvicorn.Config(
        app,
        lifespan="off",
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=1,
        http=JsonH11,
        ws="none",  # the bridge has no websocket route: websockets is not imported
        date_header=False,
    )
    server = _Server(config)
    serving = asyncio.create_task(server.serve(sockets=sockets))
    ready = asyncio.create_task(server.ready.wait())
    await asyncio.wait({serving, ready}, return_when=asyncio.FIRST_COMPLETED)
    if serving.done():
        ready.cancel()
        log.error("the bridge did not start")
        worker.release()
        return 1
    sidecar = WorkerSidecar(
        pid=os.getpid(),
        epoch=worker.writer.state.epoch,
        socket=str(sock_path),
        address=address,
        started_at=datetime.now(UTC),
        version=worker_version(),
        features=list(FEATURES),
    )
    write_sidecar(paths.sidecar, sidecar)
    log.info(
        "worker %d epoch %d serving session %s on %s%s",
        os.getpid(),
        worker.writer.state.epoch,
        record.id,
        sock_path,
        f" and {address}" if address else "",
    )

    def mark_leaving() -> None:
        with contextlib.suppress(OSError):
            write_sidecar(paths.sidecar, sidecar.model_copy(update={"leaving": True}))

    worker.on_leaving = mark_leaving
    loop = asyncio.get_running_loop()

    leaving: list[asyncio.Task[None]] = []

    def on_signal(sig: signal.Signals) -> None:
        leaving.append(asyncio.ensure_future(worker.leave(f"stopped by signal {sig.name}")))

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, on_signal, sig)

    warm = asyncio.create_task(agent.start())
    idle = asyncio.create_task(_leave_when_idle(worker))
    gone = asyncio.create_task(_leave_when_gone(worker, paths))
    worker.sources.confine, why = source_confinement(context)
    if why:
        worker.sources.unconfined_reason = why
    worker.sources.start()
    worker.control.kick_queue()
    await worker.left.wait()
    indexer.stop()  # what it had not indexed yet, the next search catches up
    # The session is let go of (worker_leaving written, lock released): whatever open streams or a
    # stuck sandbox do now, the process ends in time.
    timer = threading.Timer(EXIT_BOUND, os._exit, (0,))
    timer.daemon = True
    timer.start()
    server.exit()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(serving, EXIT_BOUND)
    warm.cancel()
    gone.cancel()
    idle.cancel()
    log.info("worker %d left session %s", os.getpid(), record.id)
    return 0


def _follower_limit() -> tuple[int, int]:
    """Each follower's live queue bound: ``TUI_FOLLOWER_QUEUE=EVENTS:BYTES`` (4096:8388608)."""
    events, _, size = os.environ.get("TUI_FOLLOWER_QUEUE", "").partition(":")
    try:
        return int(events or 4096), int(size or 8 * 1024 * 1024)
    except ValueError:
        return 4096, 8 * 1024 * 1024


def _logging(path: Path) -> None:
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(os.environ.get("TUI_LOG_LEVEL", "INFO").upper())
    logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
    # A full disk under the log must not cost a traceback on stderr (the same disk) per line.
    logging.raiseExceptions = False


def main(argv: list[str] | None = None, starter: Callable[[StatePaths], ChildStarter] | None = None) -> int:
    """Run one session's worker until it leaves; returns the exit code.

    Args:
        argv: the command line (``sys.argv[1:]`` when None).
        starter: makes the access layer on the state dir, through which the session starts and
            follows its children (`tui.worker.children.ChildStarter`); None: it cannot.
    """
    parser = argparse.ArgumentParser(
        prog="python -m tui.commands.worker", description="run one session's worker"
    )
    parser.add_argument("--state-dir", metavar="DIR", help="the state dir (env TUI_STATE_DIR)")
    parser.add_argument(
        "--idle-timeout",
        type=float,
        metavar="S",
        default=float(os.environ["TUI_IDLE_TIMEOUT"]) if os.environ.get("TUI_IDLE_TIMEOUT") else None,
        help="leave after S seconds with nothing running and no one attached, whatever the "
        "session (env TUI_IDLE_TIMEOUT; 0: never); by default config.toml's [workers] settings",
    )
    parser.add_argument("session_id")
    args = parser.parse_args(argv)
    try:
        state = StatePaths.resolve(args.state_dir)
        record = get_session(state, args.session_id)
        paths = state.session(record.id)
        lock = take_session(state, record.id)
    except TuiError as exc:
        print(f"tui worker: {exc}", file=sys.stderr)
        return 3 if isinstance(exc, Locked) else 1
    _logging(paths.log)
    try:
        return asyncio.run(_serve(paths, record, lock, args.idle_timeout, starter))
    except Exception:
        log.exception("the worker failed")
        return 1
    finally:
        if lock.held:  # it failed before the session let go: told here instead
            note_session(state.root, record.id, worker=False, state="stopped")
        lock.release()


def take_session(state: StatePaths, session_id: str) -> OwnerLock:
    """Take session `session_id`'s owner lock, after its row of the sessions' summary says a
    worker runs (`tui.summary`): a listing that trusts the row probes the lock from then on, so a
    worker in its first moments (its lock held, no worker.json yet) is not listed as stopped.

    Raises:
        Conflict: another worker holds it (code ``locked``).
    """
    note_session(state.root, session_id, worker=True, state="starting")
    lock = OwnerLock(state.session(session_id).lock)
    lock.acquire()
    return lock
