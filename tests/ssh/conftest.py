"""A real OpenSSH server on 127.0.0.1, and two "machines" (state dirs) reached through it.

The server has its own host key, a generated user key and a config in a temporary folder; the
client's ``ssh`` is told about them with ``-F`` (through ``TUI_SSH_COMMAND``). The remote's tui is
this venv's, with the remote side's own ``TUI_STATE_DIR`` in the ``--tui`` command string.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import TIMEOUT, stop_workers, wait_until

from tui.cli import main
from tui.link import ssh as ssh_link

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)
TOOLS = [shutil.which("ssh"), shutil.which("ssh-keygen")]
TUI = str(Path(sys.executable).with_name("tui"))


@dataclass
class Sshd:
    """A running sshd and what a client needs to reach it."""

    port: int
    folder: Path
    config: Path
    """The client's ssh config (``ssh -F``)."""
    proc: subprocess.Popen[bytes]

    def url(self, user: str = "root") -> str:
        return f"ssh://{user}@127.0.0.1:{self.port}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _listening(proc: subprocess.Popen[bytes], log: Path) -> bool:
    """sshd said it listens, or it ended (a port someone took meanwhile)."""
    return proc.poll() is not None or "Server listening" in log.read_text(errors="replace")


def _start_sshd(folder: Path) -> Sshd:
    for name in ("host_key", "user_key"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(folder / name)], check=True
        )
    (folder / "authorized_keys").write_text((folder / "user_key.pub").read_text())
    if os.getuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation folder
    host_key = (folder / "host_key.pub").read_text().split()
    for _ in range(5):  # a port taken between choosing it and sshd binding it: another one
        port = _free_port()
        config = folder / "sshd_config"
        config.write_text(
            "\n".join(
                [
                    f"Port {port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {folder / 'host_key'}",
                    "PidFile none",
                    f"AuthorizedKeysFile {folder / 'authorized_keys'}",
                    "StrictModes no",
                    "PermitRootLogin prohibit-password",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "AllowStreamLocalForwarding yes",
                    "LogLevel INFO",
                    "",
                ]
            )
        )
        log = folder / "sshd.log"
        with open(log, "wb") as err:
            proc = subprocess.Popen([SSHD or "sshd", "-D", "-e", "-f", str(config)], stderr=err)
        wait_until(lambda p=proc, f=log: _listening(p, f), "sshd to listen")
        if proc.poll() is None:
            break
    else:
        raise AssertionError(f"sshd did not start: {log.read_text(errors='replace')}")
    (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    client = folder / "ssh_config"
    client.write_text(
        "\n".join(
            [
                "Host *",
                f"  IdentityFile {folder / 'user_key'}",
                "  IdentitiesOnly yes",
                f"  UserKnownHostsFile {folder / 'known_hosts'}",
                "  StrictHostKeyChecking yes",
                "  LogLevel ERROR",
                "",
            ]
        )
    )
    return Sshd(port, folder, client, proc)


@pytest.fixture(scope="module")
def sshd() -> Iterator[Sshd]:
    """One sshd on loopback for a module's tests (each test has its own state dirs)."""
    if SSHD is None or None in TOOLS:
        pytest.skip("OpenSSH's server and client are not installed (apt-get install openssh-server)")
    if os.getuid() != 0:
        pytest.skip("the test's sshd logs in as root on loopback; run as root (as .ci/run does)")
    with tempfile.TemporaryDirectory(prefix="tui-sshd-", dir="/tmp") as d:
        server = _start_sshd(Path(d))
        try:
            yield server
        finally:
            server.proc.terminate()
            server.proc.wait(10)


@dataclass
class Ran:
    code: int
    out: str
    err: str


@dataclass
class Machines:
    """This machine (`here`, a state dir) and another one (`there`) reached as remote `lab`."""

    sshd: Sshd
    here: Path
    there: Path
    work: Path
    """A folder for the remote's sessions (their programs see it)."""
    capfd: pytest.CaptureFixture[str]

    @property
    def tui_there(self) -> str:
        """The ``--tui`` command: this venv's tui with the remote's own state dir."""
        return f"env TUI_STATE_DIR={shlex.quote(str(self.there))} {shlex.quote(TUI)}"

    def run(self, *args: str) -> Ran:
        """A command on this machine, in this process."""
        self.capfd.readouterr()
        try:
            code = main(["--state-dir", str(self.here), *args])
        except SystemExit as exc:
            code = int(exc.code or 0)
        got = self.capfd.readouterr()
        return Ran(code, got.out, got.err)

    def add_lab(self) -> Ran:
        ran = self.run("remote", "add", "lab", self.sshd.url(), "--tui", self.tui_there)
        assert ran.code == 0, ran.err
        return ran

    def env(self) -> dict[str, str]:
        """The environment of a `tui` subprocess on this machine."""
        return {**os.environ, "TUI_STATE_DIR": str(self.here)}


@pytest.fixture
def machines(
    sshd: Sshd, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Machines]:
    monkeypatch.setenv(ssh_link.SSH_COMMAND, f"ssh -F {sshd.config}")
    with tempfile.TemporaryDirectory(prefix="tui-m-", dir="/tmp") as d:
        root = Path(d)
        here, there, work = root / "here", root / "there", root / "work"
        for folder in (here, there, work):
            folder.mkdir()
        try:
            yield Machines(sshd, here, there, work, capfd)
        finally:
            ssh_link.close_all()
            # The relays there end with their connections; their folder goes only once they did.
            wait_until(lambda: not list((there / "relay").glob("*.sock")), "the relays to end")
            stop_workers(there)
            stop_workers(here)


def ssh_children(pid: int) -> list[int]:
    """The ``ssh`` processes process `pid` started."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if ppid == pid and comm == "ssh":
            found.append(int(entry.name))
    return found


__all__ = ["TIMEOUT", "Machines", "Ran", "Sshd", "ssh_children"]
