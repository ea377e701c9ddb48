"""Remotes over SSH: one OpenSSH connection per remote and process, and an httpx transport over it.

The user's own ``ssh`` does the connecting (their keys, agent, ``~/.ssh/config``, known hosts):

1. ``ssh -M -S DIR/c … HOST -- '<tui> relay'``: a ControlMaster of this process (its control
   socket in a private folder ``DIR``, ``/tmp/tui-$UID/ssh-XXXXXXXX``) whose session runs
   ``tui relay`` there. The relay serves the web
   bridge's routes, as the owner and without a token, on a Unix socket of the remote state dir,
   and prints ``tui-relay VERSION PATH`` once it listens.
2. ``ssh -S DIR/c -O forward -L DIR/s:PATH``: the same connection forwards a local Unix socket
   to the relay's.

Every request and event stream of the process is then an HTTP connection to ``DIR/s``: each one
a channel of that one SSH connection, so `WebClient`, `RemoteLink` and `BridgeClient` work as
for a ``tui web`` remote. Nothing listens on a network port there. When the connection drops (the
``ssh`` process ends), the next request starts a new one, and a follower resumes by its cursor
like after any drop. A refusal of ``ssh`` (exit 255) or a remote without tui (127) is one
`Unreachable` line saying what failed and what to run.

Both sockets are live credentials to the remote (the master runs any command there as the remote
user; the forwarded socket drives the relay as the owner): ``DIR`` lies in tui's own socket folder
(`own_socket_dir`), which every session's programs and agents have hidden, never in the temporary
folder they see.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import select
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from tui.errors import Unreachable, UsageError
from tui.link.remote import WebClient
from tui.link.uds import UnixTransport
from tui.store.paths import own_socket_dir

__all__ = [
    "RELAY_URL",
    "SshTarget",
    "SshTransport",
    "SshTunnel",
    "close_all",
    "parse_ssh_url",
    "remove_stale_folders",
    "ssh_web_client",
    "tunnel_for",
]

RELAY_URL = "http://tui-relay"
"""The base URL requests to a relay are made with (the Host its gate takes)."""
READY = "tui-relay"
"""The first word of the line the relay prints once it listens."""
START_TIMEOUT = 45.0
"""Seconds the connection and the relay get to be ready."""
FOLDER_PREFIX = "ssh-"
"""The private folders of connections (control socket, forwarded socket, ssh's log), in tui's own
socket folder (`own_socket_dir`)."""
LEGACY_PREFIX = "tui-ssh-"
"""Where earlier versions made them, in the temporary folder: left-behind ones are removed too."""
STALE_AFTER = 60.0
"""Seconds before a folder whose sockets do not answer counts as left behind by a killed client."""
SSH_COMMAND = "TUI_SSH_COMMAND"
"""An environment variable naming the ``ssh`` to run, with options (``ssh -F FILE``)."""


@dataclass(frozen=True)
class SshTarget:
    """Where an ``ssh://[USER@]HOST[:PORT]`` address points."""

    host: str
    user: str | None = None
    port: int | None = None

    @property
    def destination(self) -> str:
        return f"{self.user}@{self.host}" if self.user else self.host

    def options(self) -> list[str]:
        return ["-p", str(self.port)] if self.port else []

    def spelled(self) -> str:
        """The ``ssh`` command line a user would type to check the connection."""
        return shlex.join(["ssh", *self.options(), self.destination])


def parse_ssh_url(url: str) -> SshTarget:
    """``ssh://[USER@]HOST[:PORT]`` (a host of ``~/.ssh/config`` may stand alone).

    Raises:
        UsageError: not such an address.
    """
    shape = "write it as ssh://[USER@]HOST[:PORT]"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"{url!r} is not an ssh address ({exc}); {shape}") from exc
    host = parts.hostname or ""
    if parts.scheme != "ssh" or not host or host.startswith("-") or parts.path not in ("", "/"):
        raise UsageError(f"{url!r} is not an ssh address; {shape}")
    if parts.password is not None or parts.query or parts.fragment:
        raise UsageError(f"{url!r}: an ssh address holds no password, query or fragment; {shape}")
    user = parts.username or None
    if user is not None and user.startswith("-"):
        raise UsageError(f"{url!r}: {user!r} is not a user name; {shape}")
    return SshTarget(host, user, port)


def _ssh() -> list[str]:
    return shlex.split(os.environ.get(SSH_COMMAND, "") or "ssh")


def _last_lines(path: Path, count: int = 3) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return " / ".join(lines[-count:])


class SshTunnel:
    """One SSH connection to a remote, running its relay, with a local socket forwarded to it.

    Started on first use, again after it ended; thread-safe (commands may run several event
    loops one after the other, and the app its own).

    Args:
        name: the remote's name.
        url: its ``ssh://`` address.
        tui: the command that runs tui there (passed to the remote shell).
    """

    def __init__(self, name: str, url: str, tui: str) -> None:
        self.name = name
        self.url = url
        self.target = parse_ssh_url(url)
        self.tui = tui or "tui"
        self.generation = 0
        """How many connections were made: a transport's connections belong to one."""
        self.process: subprocess.Popen[bytes] | None = None
        self.remote_socket: str | None = None
        self._lock = threading.Lock()
        self._folder: Path | None = None

    @property
    def pid(self) -> int | None:
        """The ``ssh`` process's id while it runs."""
        return self.process.pid if self.process is not None and self.process.poll() is None else None

    def ready_path(self) -> str | None:
        """The local socket while the connection is up; None when `ensure` must (re)connect."""
        if self.process is not None and self.process.poll() is None and self.remote_socket:
            return str(self._paths()[1])
        return None

    def _paths(self) -> tuple[Path, Path]:
        if self._folder is None:
            try:
                root = own_socket_dir()
            except OSError as exc:
                raise Unreachable(
                    f"remote {self.name}: no private folder for its connection ({exc.strerror or exc})"
                ) from exc
            remove_stale_folders(root)
            # Short: a Unix socket's path has ~100 bytes (ssh adds 17 to the control socket's).
            self._folder = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX, dir=root))
        return self._folder / "c", self._folder / "s"

    def ensure(self) -> str:
        """The local socket of a live connection, connecting first when there is none.

        Raises:
            Unreachable: ssh could not connect, or tui could not be run there.
        """
        with self._lock:
            path = self.ready_path()
            if path is not None:
                return path
            self._end()
            return self._connect()

    def _connect(self) -> str:
        control, local = self._paths()
        log = control.parent / "ssh.log"
        # A killed master leaves its control socket behind; a new master would not take the path.
        control.unlink(missing_ok=True)
        argv = [
            *_ssh(),
            "-M",
            "-S",
            str(control),
            "-T",
            *("-o", "ControlPersist=no", "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes"),
            *("-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=3"),
            *("-o", "StreamLocalBindUnlink=yes", "-o", "ConnectTimeout=20"),
            *self.target.options(),
            "--",
            self.target.destination,
            f"{self.tui} relay",
        ]
        with open(log, "wb") as err:
            try:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE,  # held open: the relay ends when this process does
                    stdout=subprocess.PIPE,
                    stderr=err,
                    start_new_session=True,  # a Ctrl+C in the terminal is not the connection's
                )
            except OSError as exc:
                raise Unreachable(
                    f"remote {self.name}: cannot run {argv[0]!r} ({exc.strerror or exc}); "
                    "install OpenSSH's client (`ssh`)"
                ) from exc
        self.process = proc
        line = self._first_line(proc)
        words = line.split()
        if len(words) < 3 or words[0] != READY:
            raise self._failure(proc, log, line)
        self.remote_socket = " ".join(words[2:])
        local.unlink(missing_ok=True)
        forward = subprocess.run(
            [
                *_ssh(),
                "-S",
                str(control),
                "-O",
                "forward",
                "-L",
                f"{local}:{self.remote_socket}",
                "--",
                self.target.destination,
            ],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=START_TIMEOUT,
            check=False,
        )
        if forward.returncode != 0:
            self._end()
            said = forward.stderr.decode(errors="replace").strip().splitlines()
            raise Unreachable(
                f"remote {self.name}: ssh could not forward the relay's socket "
                f"({said[-1] if said else f'exit {forward.returncode}'}); "
                "does the server allow it (`AllowStreamLocalForwarding yes` in its sshd_config)?"
            )
        self.generation += 1
        return str(local)

    def _first_line(self, proc: subprocess.Popen[bytes]) -> str:
        """The relay's first line, or what came before ssh ended or the time ran out."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + START_TIMEOUT
        got = b""
        while b"\n" not in got:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            got += chunk
        return got.split(b"\n", 1)[0].decode(errors="replace").strip()

    def _failure(self, proc: subprocess.Popen[bytes], log: Path, line: str) -> Unreachable:
        """One line: what failed, and what to run."""
        try:
            code = proc.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        self._end()
        said = _last_lines(log) or line
        check = self.target.spelled()
        if code is None:
            return Unreachable(
                f"remote {self.name}: no answer from `{self.tui} relay` over ssh within "
                f"{START_TIMEOUT:g} s; check that `{check} {self.tui} --version` answers"
            )
        if code == 255:
            return Unreachable(
                f"remote {self.name}: ssh could not connect ({said or 'exit 255'}); "
                f"check that `{check}` logs in without a prompt (keys in ssh-agent, host in known_hosts)"
            )
        if code == 127 or "not found" in said:
            return Unreachable(
                f"remote {self.name}: `{self.tui}` is not a command there ({said or 'exit 127'}); "
                f"install tui on {self.target.host}, or name it: "
                f"`tui remote add {self.name} {self.url} --tui /path/to/tui`"
            )
        if "invalid choice" in said:
            return Unreachable(
                f"remote {self.name}: the tui there has no `relay` command (too old); update it there"
            )
        return Unreachable(
            f"remote {self.name}: `{self.tui} relay` ended with exit {code} ({said or 'nothing said'}); "
            f"`{check} {self.tui} relay` shows why"
        )

    def _end(self) -> None:
        """End the connection (the relay there sees its input end and stops)."""
        proc, self.process, self.remote_socket = self.process, None, None
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(3)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    def close(self) -> None:
        """End the connection and remove the private folder."""
        with self._lock:
            self._end()
            if self._folder is not None:
                shutil.rmtree(self._folder, ignore_errors=True)
                self._folder = None


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
        return True


def remove_stale_folders(root: Path | None = None) -> None:
    """Remove this user's folders of connections whose process was killed (no atexit ran): older
    than a minute, and neither socket answers. They are in `root` (tui's own socket folder by
    default), or in the temporary folder where earlier versions made them."""
    now = time.time()
    own = (root or own_socket_dir()).glob(f"{FOLDER_PREFIX}*")
    legacy = Path(tempfile.gettempdir()).glob(f"{LEGACY_PREFIX}*")
    for folder in [*own, *legacy]:
        try:
            info = folder.lstat()
        except OSError:
            continue
        if info.st_uid != os.getuid() or now - info.st_mtime < STALE_AFTER:
            continue
        if not any(_answers(folder / name) for name in ("c", "s")):
            shutil.rmtree(folder, ignore_errors=True)


_TUNNELS: dict[tuple[str, str, str], SshTunnel] = {}
_TUNNELS_LOCK = threading.Lock()


def tunnel_for(name: str, url: str, tui: str) -> SshTunnel:
    """This process's one connection to a remote (made on first use)."""
    key = (name, url, tui)
    with _TUNNELS_LOCK:
        tunnel = _TUNNELS.get(key)
        if tunnel is None:
            tunnel = _TUNNELS[key] = SshTunnel(name, url, tui)
        return tunnel


@atexit.register
def close_all() -> None:
    """End every SSH connection of this process (at exit)."""
    for tunnel in list(_TUNNELS.values()):
        proc = tunnel.process
        if proc is not None and proc.poll() is None:
            # A connection still being made holds the lock: ending its ssh lets go of it.
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGTERM)
        tunnel.close()


async def _in_daemon_thread(connect: Callable[[], str]) -> str:
    """`connect()` in a thread of its own that does not hold up the end of the event loop or of
    the process: a caller that gives up (``--everywhere``'s timeout) does not wait for ssh."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[str] = loop.create_future()

    def settle(result: str | None, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result or "")

    def run() -> None:
        try:
            result, error = connect(), None
        except BaseException as exc:  # handed to the awaiting task
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: no one waits any more
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name="ssh-connect", daemon=True).start()
    return await done


class SshTransport(httpx.AsyncBaseTransport):
    """HTTP to the relay through the local socket of a remote's `SshTunnel`, connecting first
    when the connection is not up."""

    def __init__(self, tunnel: SshTunnel) -> None:
        self.tunnel = tunnel
        self._inner: UnixTransport | None = None
        self._key: tuple[asyncio.AbstractEventLoop, int] | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = self.tunnel.ready_path() or await _in_daemon_thread(self.tunnel.ensure)
        # Connections belong to one event loop and one SSH connection.
        key = (asyncio.get_running_loop(), self.tunnel.generation)
        if self._inner is None or self._key != key:
            self._inner = UnixTransport(path)
            self._key = key
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        inner, key, self._inner, self._key = self._inner, self._key, None, None
        if inner is not None and key is not None and key[0] is asyncio.get_running_loop():
            await inner.aclose()


class SshWebClient(WebClient):
    """`WebClient` of a remote's relay, over its SSH connection."""

    def __init__(self, name: str, url: str, tui: str) -> None:
        self.tunnel = tunnel_for(name, url, tui)
        super().__init__(name, RELAY_URL, "", transport=SshTransport(self.tunnel))
        self.address = url

    def make_transport(self) -> httpx.AsyncBaseTransport:
        return SshTransport(self.tunnel)

    def unreachable(self, exc: Exception) -> Unreachable:
        return Unreachable(
            f"remote {self.name} ({self.address}) broke off ({type(exc).__name__}); "
            "the ssh connection is made again on the next try"
        )


def ssh_web_client(name: str, url: str, tui: str) -> SshWebClient:
    """The client of remote `name` reached at ``ssh://…`` `url`, running `tui` there."""
    return SshWebClient(name, url, tui)
