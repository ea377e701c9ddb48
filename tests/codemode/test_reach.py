"""A program never reaches tui itself: its files, its installation, its sockets, the working
folder's ``.git``; and never the kernel's mount, keyring, bpf or perf calls, nor the host's /dev/shm.

Each probe runs under every mechanism this host offers (the Landlock fallback mounts in a namespace
of its own what it cannot keep out otherwise).
"""

from __future__ import annotations

import os
import site
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tui.codemode import Limits, PythonSession
from tui.codemode.confine import (
    AGENT_REFUSED,
    PROGRAM_REFUSED,
    SHM_BYTES,
    agent_command,
    bwrap_command,
    protected_paths,
    seccomp_bytes,
)


def refused(result: object, *types: str) -> None:
    assert getattr(result, "status", None) == "error", result
    error = result.error  # type: ignore[attr-defined]
    assert error.type in types, error


@pytest.fixture
def listener(workdir: Path) -> Iterator[tuple[Path, list[object]]]:
    """A Unix socket listening in the working folder, as a bridge does, recording who connected."""
    path = workdir / "bridge.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    server.settimeout(0.2)
    accepted: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept())
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path, accepted
    stop.set()
    thread.join()
    server.close()


def make_state_dir(root: Path) -> Path:
    """A state dir as tui leaves it: a session's journal, sidecar and socket, the web bridge's folder."""
    session = root / "sessions" / "0123456789abcdef"
    session.mkdir(parents=True)
    (session / "journal.jsonl").write_text('{"type":"worker_started"}\n')
    (session / "worker.json").write_text('{"socket": "bridge.sock"}\n')
    (root / "web").mkdir()
    (root / "web" / "tokens.json").write_text("{}")
    return root


async def test_a_state_dir_inside_the_working_folder_is_hidden(workdir: Path, mechanism: str) -> None:
    state = make_state_dir(workdir / ".local" / "state" / "tui")
    session = PythonSession(workdir, Limits(observe_seconds=5.0), mechanism=mechanism, hidden=[state])  # type: ignore[arg-type]
    async with session:
        source = (
            "import os\n"
            "def probe(path):\n"
            "    try:\n"
            "        return sorted(os.listdir(path)) if os.path.isdir(path) else open(path).read()\n"
            "    except OSError as exc:\n"
            "        return type(exc).__name__\n"
            f"root = {str(state)!r}\n"
            "[probe(root), probe(root + '/sessions/0123456789abcdef/journal.jsonl'),\n"
            " probe(root + '/sessions/0123456789abcdef/worker.json'), probe(root + '/web')]"
        )
        result = await session.execute(source=source)
        assert result.value == [[], "FileNotFoundError", "FileNotFoundError", "FileNotFoundError"]
        written = await session.execute(source=f"open({str(state / 'planted')!r}, 'w').write('x')")
        refused(written, "OSError", "PermissionError")
        assert not (state / "planted").exists()
        # the rest of the working folder is as writable as ever
        assert (await session.execute(source="open('kept.txt', 'w').write('ok')")).value == 2
        assert (workdir / "kept.txt").read_text() == "ok"


async def test_a_working_folder_inside_the_state_dir_shows_only_itself(workdir: Path, mechanism: str) -> None:
    state = make_state_dir(workdir.parent / "state")
    inner = state / "work"
    inner.mkdir()
    limits = Limits(observe_seconds=5.0)
    async with PythonSession(inner, limits, mechanism=mechanism, hidden=[state]) as session:  # type: ignore[arg-type]
        source = (
            "import os\n"
            "try:\n"
            f"    seen = sorted(os.listdir({str(state)!r}))\n"
            "except OSError:\n"
            "    seen = []\n"
            f"journal = {str(state / 'sessions' / '0123456789abcdef' / 'journal.jsonl')!r}\n"
            "try:\n"
            "    read = open(journal).read()\n"
            "except OSError:\n"
            "    read = None\n"
            "[seen, read, open('here.txt', 'w').write('ok')]"
        )
        result = await session.execute(source=source)
        assert result.value[1:] == [None, 2]
        assert set(result.value[0]) <= {"work"}
        assert (inner / "here.txt").read_text() == "ok"


async def test_tui_installed_in_the_working_folder_is_read_only(
    workdir: Path, mechanism: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = workdir / ".venv"
    site_packages = venv / "lib" / "python3" / "site-packages"
    site_packages.mkdir(parents=True)
    session = PythonSession(workdir, Limits(observe_seconds=5.0), mechanism=mechanism)  # type: ignore[arg-type]
    # the interpreter running tui is a venv in the project the session works in
    with monkeypatch.context() as patch:
        patch.setattr(site, "getsitepackages", lambda: [str(site_packages)])
        await session.start()
    try:
        planted = site_packages / "evil.pth"
        result = await session.execute(source=f"open({str(planted)!r}, 'w').write('import os')")
        refused(result, "OSError", "PermissionError")
        assert not planted.exists()
        assert (await session.execute(source="open('ok.txt', 'w').write('ok')")).value == 2
    finally:
        await session.close()


@pytest.fixture
def git_workdir(workdir: Path) -> Path:
    (workdir / ".git" / "hooks").mkdir(parents=True)
    (workdir / ".git" / "config").write_text("[core]\n\tbare = false\n")
    return workdir


async def test_git_hooks_and_config_of_the_working_folder_are_read_only(
    git_workdir: Path, mechanism: str
) -> None:
    async with PythonSession(git_workdir, Limits(observe_seconds=5.0), mechanism=mechanism) as session:  # type: ignore[arg-type]
        hook = await session.execute(source="open('.git/hooks/pre-commit', 'w').write('#!/bin/sh\\nevil\\n')")
        refused(hook, "OSError", "PermissionError")
        config = await session.execute(
            source="open('.git/config', 'a').write('[core]\\n\\thooksPath = /x\\n')"
        )
        refused(config, "OSError", "PermissionError")
        assert not (git_workdir / ".git" / "hooks" / "pre-commit").exists()
        assert "hooksPath" not in (git_workdir / ".git" / "config").read_text()
        readable = await session.execute(source="open('.git/config').read()")
        assert "bare" in readable.value
        assert "hooks" in session.sandbox or "read-only" in session.sandbox


async def test_a_unix_socket_reachable_by_path_cannot_be_connected_to(
    workdir: Path, mechanism: str, listener: tuple[Path, list[object]]
) -> None:
    path, accepted = listener
    async with PythonSession(workdir, Limits(observe_seconds=5.0), mechanism=mechanism) as session:  # type: ignore[arg-type]
        result = await session.execute(
            source=f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({str(path)!r})"
        )
        refused(result, "PermissionError", "OSError")
        pair = await session.execute(
            source="import socket\na, b = socket.socketpair()\na.send(b'hi')\nb.recv(2)"
        )
        assert pair.value == "b'hi'"
    assert accepted == []


KEYRING = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
numbers = {'x86_64': (250, 248, 249), 'aarch64': (219, 217, 218)}[os.uname().machine]
codes = []
for nr in numbers:
    libc.syscall(nr, 0, 0, 0, 0, 0)
    codes.append(errno.errorcode[ctypes.get_errno()])
codes
"""

TRACE = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_SEIZE = 0x4206  # never stops the tracee, whatever happens
traced = libc.ptrace(PTRACE_SEIZE, 1, 0, 0)
code = errno.errorcode.get(ctypes.get_errno(), '')
try:
    open('/proc/1/mem', 'rb').close()
    mem = 'opened'
except OSError as exc:
    mem = type(exc).__name__
[traced, code, mem]
"""


async def test_the_kernel_keyring_is_refused(workdir: Path, mechanism: str) -> None:
    async with PythonSession(workdir, Limits(observe_seconds=5.0), mechanism=mechanism) as session:  # type: ignore[arg-type]
        result = await session.execute(source=KEYRING)
        assert result.value == ["EPERM", "EPERM", "EPERM"]


async def test_a_program_cannot_trace_what_started_it(workdir: Path, mechanism: str) -> None:
    async with PythonSession(workdir, Limits(observe_seconds=5.0), mechanism=mechanism) as session:  # type: ignore[arg-type]
        result = await session.execute(source=TRACE)
        assert result.status == "completed", result
        traced, code, mem = result.value
        assert traced == -1 and code == "EPERM"
        assert mem != "opened"


async def test_a_programs_total_writes_are_bounded(workdir: Path, mechanism: str) -> None:
    limits = Limits(observe_seconds=10.0, write_bytes=8 * 1024**2)
    async with PythonSession(workdir, limits, mechanism=mechanism) as session:  # type: ignore[arg-type]
        # under the limit, and printing (bounded by max_output_bytes) does not count
        small = await session.execute(
            source="open('a', 'wb').write(b'x' * 4_000_000)\nprint('y' * 9_000_000)"
        )
        assert small.status == "completed", small.error
        # three files, each far below the per-file limit
        many = await session.execute(
            source="for name in 'bcd':\n    open(name, 'wb').write(b'x' * 4_000_000)"
        )
        refused(many, "LimitExceeded")
        assert many.error is not None and many.error.limit == "write"
        assert "write_limit" in many.error.message
        # a process the program starts counts too
        shell = await session.execute(
            source="import subprocess\n"
            "subprocess.run(['sh', '-c', 'head -c 12000000 /dev/zero > e'], check=True)"
        )
        refused(shell, "LimitExceeded")
        # the limit is per program: the next one starts afresh
        assert (await session.execute(source="open('f', 'wb').write(b'x' * 1000)")).value == 1000


def test_protected_paths_are_mounted_after_the_working_folders_bind(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / ".git" / "hooks").mkdir(parents=True)
    state = work / ".local" / "state" / "tui"
    protected = protected_paths(
        work, tui_folders=[state], hidden=[tmp_path / "missing"], read_only=[work / "ro"]
    )
    assert state.is_dir()  # tui's folder, made so that it can be hidden
    assert protected.hidden == (state,)  # a missing path of the user's cannot be mounted on: left out
    assert work / ".git" in protected.read_only  # the whole of it
    assert protected.ancestors(work) == [work / ".local", work / ".local" / "state"]
    argv = bwrap_command(["true"], bwrap="bwrap", workdir=work, protected=protected)
    bind = argv.index("--bind")
    assert argv[bind + 1] == str(work)
    # the ancestors are bound onto themselves (not renamable), before what they hold is hidden
    ancestor = argv.index(str(work / ".local" / "state"))
    assert argv[ancestor - 1] == "--bind" and bind < ancestor < argv.index(str(state))
    assert argv.index(str(work / ".git")) > bind
    assert argv[argv.index("/dev/shm") - 3 : argv.index("/dev/shm")] == ["--size", str(SHM_BYTES), "--tmpfs"]
    assert "--share-net" not in argv
    with_net = bwrap_command(["true"], bwrap="bwrap", workdir=work, protected=protected, network=True)
    assert "--share-net" in with_net and with_net[-2:] == ["--", "true"]


def test_the_rule_for_one_path_is_the_rule_of_the_mounts(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    state = tmp_path / "state"
    (state / "sessions").mkdir(parents=True)
    token = work / ".tui-token"
    token.write_text("t")
    (work / "link").symlink_to(state)
    protected = protected_paths(work, tui_folders=[state], hidden=[token])
    assert protected.refuses(work / "notes.txt", write=True) is None
    assert protected.refuses(work / ".git" / "config", write=False) is None
    assert "read-only" in str(protected.refuses(work / ".git" / "hooks" / "x", write=True))
    assert "tui's own" in str(protected.refuses(work / "link" / "sessions", write=False))
    assert "tui's own" in str(protected.refuses(work / "sub" / ".." / ".tui-token", write=False))
    # a working folder inside a hidden folder is reachable, the rest of that folder is not
    inner = state / "work"
    inner.mkdir()
    around = protected_paths(inner, tui_folders=[state])
    assert around.refuses(inner / "x", write=True) is None
    assert around.refuses(state / "sessions", write=False) is not None


def test_an_agent_runs_without_capabilities_in_its_own_pid_namespace_under_seccomp(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    protected = protected_paths(work, tui_folders=[tmp_path / "config" / "tui"])
    argv = agent_command(["agent"], bwrap="bwrap", workdir=work, protected=protected)
    assert argv[:3] == ["/bin/sh", "-c", 'exec 9<"$0" && exec "$@"']
    with open(argv[3], "rb") as filter_file:
        assert filter_file.read() == seccomp_bytes(AGENT_REFUSED)
    joined = " ".join(argv)
    parts = (
        "--cap-drop ALL",
        "--unshare-pid",
        "--proc /proc",
        "--dev /dev",
        "--seccomp 9",
        "--ro-bind /etc /etc",
    )
    for part in (
        *parts,
        "--ro-bind-try /proc/sys /proc/sys",
        "--ro-bind-try /sys /sys",
        f"--bind {work} {work}",
    ):
        assert part in joined
    assert f"--bind {tmp_path / 'config'} {tmp_path / 'config'}" in joined
    assert argv[-2:] == ["--", "agent"]
    for name in ("mount", "umount2", "ptrace", "keyctl", "add_key", "request_key", "bpf", "perf_event_open"):
        assert name in AGENT_REFUSED and name in PROGRAM_REFUSED
    assert "socket" not in AGENT_REFUSED and "socket" in PROGRAM_REFUSED


def test_tui_paths_writable_leaves_the_installation_alone(tmp_path: Path) -> None:
    guarded = protected_paths(tmp_path)
    assert Path(sys.prefix).resolve() in guarded.read_only
    opened = protected_paths(tmp_path, tui_paths_writable=True)
    assert Path(sys.prefix).resolve() not in opened.read_only
    assert opened.tui_paths_writable


BPF_AND_PERF = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
numbers = {'x86_64': (321, 298), 'aarch64': (280, 241)}[os.uname().machine]
codes = []
for nr in numbers:
    libc.syscall(nr, 0, 0, 0, 0, 0)
    codes.append(errno.errorcode[ctypes.get_errno()])
codes
"""


async def test_bpf_and_perf_events_are_refused(workdir: Path, mechanism: str) -> None:
    async with PythonSession(workdir, Limits(observe_seconds=5.0), mechanism=mechanism) as session:  # type: ignore[arg-type]
        result = await session.execute(source=BPF_AND_PERF)
        assert result.value == ["EPERM", "EPERM"]


async def test_dev_shm_is_the_sandboxs_own_and_bounded(workdir: Path, mechanism: str) -> None:
    name = f"tui-left-behind-{workdir.parent.name}"
    async with PythonSession(workdir, Limits(observe_seconds=10.0), mechanism=mechanism) as session:  # type: ignore[arg-type]
        kept = await session.execute(source=f"open('/dev/shm/{name}', 'wb').write(b'x' * 1000)")
        assert kept.value == 1000
        assert name not in os.listdir("/dev/shm")
        grown = await session.execute(
            source=f"with open('/dev/shm/{name}-big', 'wb') as f:\n"
            "    for _ in range(100):\n"
            "        f.write(b'x' * 1024 * 1024)"
        )
        refused(grown, "OSError")
        assert "No space left" in grown.error.message  # type: ignore[union-attr]


async def test_no_sysctl_can_be_written(workdir: Path, mechanism: str) -> None:
    # root in the sandbox is the host's root to the kernel's sysctl check, capabilities or not:
    # kernel.core_pattern would run a command on the host at the next crash
    async with PythonSession(workdir, Limits(observe_seconds=5.0), mechanism=mechanism) as session:  # type: ignore[arg-type]
        # opened for writing, never written
        opened = await session.execute(
            source="import os\nos.close(os.open('/proc/sys/kernel/core_pattern', os.O_WRONLY))"
        )
        refused(opened, "OSError", "PermissionError", "FileNotFoundError")


async def test_a_working_folder_inside_the_state_dir_keeps_its_git_read_only(
    workdir: Path, mechanism: str
) -> None:
    # tui's state dir holds a token file tui knows of (hidden already with the folder) and the
    # session's working folder, whose .git stays read-only and cannot be renamed
    state = make_state_dir(workdir.parent / "state")
    (state / "owner.token").write_text("secret")
    inner = state / "work"
    (inner / ".git" / "hooks").mkdir(parents=True)
    (inner / ".venv" / "lib").mkdir(parents=True)
    protected = protected_paths(inner, tui_folders=[state], hidden=[state / "owner.token"])
    assert protected.hidden == (state,) and inner / ".git" in protected.read_only
    limits = Limits(observe_seconds=5.0)
    session = PythonSession(
        inner,
        limits,
        mechanism=mechanism,
        tui_folders=[state],
        hidden=[state / "owner.token"],
        read_only=[inner / ".venv" / "lib"],
    )  # type: ignore[arg-type]
    async with session:
        hook = await session.execute(source="open('.git/hooks/pre-commit', 'w').write('#!/bin/sh\\n')")
        refused(hook, "OSError", "PermissionError")
        renamed = await session.execute(source="import os\nos.rename('.venv', 'venv-old')")
        refused(renamed, "OSError", "PermissionError")
        token = await session.execute(source=f"open({str(state / 'owner.token')!r}).read()")
        refused(token, "OSError", "PermissionError", "FileNotFoundError")
    assert not (inner / ".git" / "hooks" / "pre-commit").exists() and (inner / ".venv").is_dir()
