"""Escape attempts end as a clear `error` result (or stay inside the sandbox); the host is unharmed."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tui.codemode import Limits, PythonSession, SandboxError


def host_has(path: str) -> bool:
    return Path(path).exists()


def host_text(path: str) -> str:
    return Path(path).read_text()


def host_forks() -> bool:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    return os.waitpid(pid, 0)[1] == 0


@pytest.fixture
async def session(workdir: Path, mechanism: str) -> AsyncIterator[PythonSession]:
    """A session confined by each mechanism in turn: every attempt must fail under both."""
    async with PythonSession(workdir, Limits(observe_seconds=5.0), mechanism=mechanism) as started:  # type: ignore[arg-type]
        yield started


def refused(result: object, *types: str) -> None:
    assert getattr(result, "status", None) == "error", result
    error = result.error  # type: ignore[attr-defined]
    assert error.type in types, error


async def test_writing_etc_is_refused(session: PythonSession) -> None:
    result = await session.execute(source="open('/etc/tui-escape', 'w').write('pwned')")
    refused(result, "OSError", "PermissionError")
    assert not host_has("/etc/tui-escape")
    result = await session.execute(source="open('/etc/passwd', 'a').write('pwned::0:0::/:/bin/sh\\n')")
    refused(result, "OSError", "PermissionError")
    assert "pwned" not in host_text("/etc/passwd")


async def test_remounting_root_read_write_is_refused(session: PythonSession) -> None:
    source = "import subprocess\nsubprocess.run(['mount', '-o', 'remount,rw', '/'], check=True)"
    result = await session.execute(source=source)
    assert result.status == "error"


async def test_dot_dot_does_not_leave_the_working_folder(session: PythonSession, workdir: Path) -> None:
    outside = workdir.parent / "outside.txt"
    result = await session.execute(source="open('../outside.txt', 'w').write('escaped')")
    # the parent folder is inside the private /tmp here: writing there may succeed, but only in the sandbox
    assert result.status in ("completed", "error")
    assert not outside.exists()
    deeper = await session.execute(source="open('../../../../../../usr/tui-escape', 'w')")
    refused(deeper, "OSError", "PermissionError")
    assert not host_has("/usr/tui-escape")


async def test_host_files_outside_the_interpreter_are_unreadable(
    session: PythonSession, workdir: Path
) -> None:
    secret = workdir.parent / "secret.txt"
    secret.write_text("hunter2")
    source = (
        "import os, sys\n"
        "def readable(path):\n"
        "    try:\n"
        "        os.listdir(path) if os.path.isdir(path) else open(path, 'rb').read(1)\n"
        "        return True\n"
        "    except OSError:\n"
        "        return False\n"
        f"paths = [{str(secret)!r}, '/etc/shadow', '/root/.bashrc', '/var/log']\n"
        "[readable(p) for p in paths], readable(sys.executable)"
    )
    result = await session.execute(source=source)
    assert result.value == [[False, False, False, False], True]


@pytest.fixture
def host_listener() -> Iterator[int]:
    """A TCP server on the host's loopback that records whether anyone connected."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
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
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()
    assert accepted == []


@pytest.mark.parametrize(
    "source",
    [
        "import socket\ns = socket.socket()\ns.connect(('127.0.0.1', PORT))",
        "import socket\nsocket.create_connection(('localhost', PORT), timeout=1)",
        "import socket\ns = socket.socket(socket.AF_INET6)\ns.connect(('::1', PORT))",
        "import socket\ns = socket.socket(type=socket.SOCK_DGRAM)\ns.sendto(b'x', ('8.8.8.8', 53))",
        "import urllib.request\nurllib.request.urlopen('http://example.com', timeout=2)",
    ],
)
async def test_network_is_refused_loopback_included(
    session: PythonSession, host_listener: int, source: str
) -> None:
    result = await session.execute(source=source.replace("PORT", str(host_listener)))
    refused(result, "PermissionError", "OSError", "URLError", "gaierror")


async def test_unix_sockets_inside_the_sandbox_still_work(session: PythonSession) -> None:
    result = await session.execute(
        source="import socket\na, b = socket.socketpair()\na.send(b'hi')\nb.recv(2)"
    )
    assert result.value == "b'hi'"


async def test_the_parent_environment_is_not_visible(
    workdir: Path, mechanism: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUI_TEST_SECRET", "hunter2")
    async with PythonSession(workdir, mechanism=mechanism) as session:  # type: ignore[arg-type]
        result = await session.execute(source="import os\nsorted(os.environ)")
        assert "TUI_TEST_SECRET" not in result.value
        for pid in (1, os.getpid()):
            probe = await session.execute(source=f"open('/proc/{pid}/environ', 'rb').read()")
            assert "hunter2" not in str(probe.value) and "hunter2" not in probe.output


async def test_a_fork_bomb_is_contained(workdir: Path, mechanism: str) -> None:
    limits = Limits(observe_seconds=20.0, processes=32)
    async with PythonSession(workdir, limits, mechanism=mechanism) as session:  # type: ignore[arg-type]
        if not session.processes_limited:
            pytest.skip(f"processes cannot be limited on this host: {session.sandbox}")
        # bounded whatever happens: at most 200 children, each exits within 3 s
        source = (
            "import os, time\n"
            "children = 0\n"
            "for _ in range(200):\n"
            "    pid = os.fork()\n"
            "    if pid == 0:\n"
            "        time.sleep(3)\n"
            "        os._exit(0)\n"
            "    children += 1\n"
        )
        result = await session.execute(source=source)
        assert result.status == "error", result
        assert result.error is not None and result.error.type == "BlockingIOError"
        count = await session.execute(source="children")
        assert 0 < count.value < 32
    assert host_forks()


async def test_host_is_unharmed_after_escape_attempts(session: PythonSession, workdir: Path) -> None:
    source = (
        "import os, signal\n"
        f"for pid in [*range(1, 50), {os.getpid()}, {os.getppid()}]:\n"
        "    try:\n"
        "        os.kill(pid, signal.SIGKILL) if pid != os.getpid() else None\n"
        "    except OSError:\n"
        "        pass\n"
        "'survived'"
    )
    try:
        result = await session.execute(source=source)
        assert result.status in ("completed", "error")
    except SandboxError:
        pass  # it may kill its own sandbox: that is all it can reach
    assert host_has("/etc/passwd")
    assert os.getppid() > 0
    async with PythonSession(workdir) as again:
        assert (await again.execute(source="1 + 1")).value == 2
