"""SSH remote figures, against a real sshd on 127.0.0.1 (the one tests/ssh start).

- a fresh `tui --remote lab sessions` beside `tui sessions` here (medians of 5);
- `tui send ID PROMPT --wait`, 20 in a row in one process (one SSH connection), beside local;
- a killed connection: from SIGKILL of `ssh` to the next request answered (median of 5).

Run as root (sshd logs in as root on loopback): ``.venv/bin/python bench/ssh.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers import stop_workers
from ssh.conftest import TUI, _start_sshd

from tui.access.remote import RemoteAccess
from tui.cli import main as tui_main
from tui.link import ssh as ssh_link
from tui.store.remotes import Remote


def _fresh(args: list[str], env: dict[str, str], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([TUI, *args], env=env, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _turns_per_second(state: Path, remote: list[str], sid: str, count: int = 20) -> float:
    start = time.perf_counter()
    for i in range(count):
        quiet = io.TextIOWrapper(io.BytesIO())
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(io.StringIO()):
            code = tui_main(["--state-dir", str(state), *remote, "send", sid, f"print({i})", "--wait"])
        assert code == 0
    return count / (time.perf_counter() - start)


async def _reconnects(remote: Remote, runs: int = 5) -> float:
    access = RemoteAccess(remote)
    assert isinstance(access.web, ssh_link.SshWebClient)
    times = []
    try:
        await access.list_sessions()
        for _ in range(runs):
            pid = access.web.tunnel.pid
            assert pid is not None
            start = time.perf_counter()
            os.kill(pid, signal.SIGKILL)
            while True:
                try:
                    await access.list_sessions()
                    break
                except Exception:  # the request that found the connection gone; the next makes one
                    await asyncio.sleep(0.01)
            times.append(time.perf_counter() - start)
    finally:
        await access.web.close()
    return statistics.median(times)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tui-bssh-", dir="/tmp") as d:
        root = Path(d)
        server = _start_sshd(root)
        here, there, work = root / "here", root / "there", root / "work"
        for folder in (here, there, work):
            folder.mkdir()
        os.environ["TUI_SSH_COMMAND"] = f"ssh -F {server.config}"
        env = {**os.environ, "TUI_STATE_DIR": str(here)}
        tui_there = f"env TUI_STATE_DIR={there} {TUI}"
        try:
            subprocess.run(
                [TUI, "remote", "add", "lab", server.url(), "--tui", tui_there], env=env, check=True
            )
            print(f"load average {os.getloadavg()[0]:.1f}")
            print(f"tui sessions here, fresh process: {_fresh(['sessions'], env):.2f} s")
            remote_sessions = _fresh(["--remote", "lab", "sessions"], env)
            print(f"tui --remote lab sessions, fresh process: {remote_sessions:.2f} s")
            made = subprocess.run(
                [TUI, "--remote", "lab", "send", "--new", "--dir", str(work), "n = 1", "--wait"],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            remote_sid = made.stderr.splitlines()[0].strip()
            made = subprocess.run(
                [TUI, "send", "--new", "--dir", str(work), "n = 1", "--wait"],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            local_sid = made.stderr.splitlines()[0].strip()
            local = _turns_per_second(here, [], local_sid)
            remote = _turns_per_second(here, ["--remote", "lab"], remote_sid)
            print(f"send --wait, 20 in a row in one process: {local:.1f} turns/s here, {remote:.1f} over ssh")
            again = asyncio.run(_reconnects(Remote("lab", server.url(), "", tui_there)))
            print(f"a killed ssh connection to the next answer: median {again:.2f} s")
            print(f"load average {os.getloadavg()[0]:.1f}")
        finally:
            ssh_link.close_all()
            stop_workers(there)
            stop_workers(here)
            server.proc.terminate()
            server.proc.wait(10)


if __name__ == "__main__":
    main()
