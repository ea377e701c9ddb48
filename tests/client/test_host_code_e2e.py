"""Tried as an attacker would: files a program (or an agent) writes in its session's folder never
run on the host when tui starts a Python process.

The session's working folder and the folder above it hold a planted ``tui`` package, an ``idna``
package (a module the worker imports lazily), ``sitecustomize.py``, ``usercustomize.py`` and a
``.pth`` file, each writing a marker when Python runs it. Then every path that starts a worker
is taken, as a user would, from that folder: a program's own ``delegate(...)`` starting its
child's worker (and the parent's worker importing lazily while it does), ``tui send`` after
``tui stop``, ``tui restart``, and a collaborator limited to one turn waking the session through
a real ``tui web``. No marker may appear, every turn must complete, and each worker runs
isolated (``-I``) in its session's own state folder. As root and as a plain user (``setpriv``),
with tui installed in a venv and run by its ``tui`` command.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from helpers import TIMEOUT, stop_workers, wait_until

import tui
from tui.store import StatePaths, read_sidecar

NOBODY = 65534
DELEGATE = 'r = delegate("print(6*7)"); print("child said", r.strip())'
PLANTED = {
    "tui/__init__.py": "tui",
    "idna/__init__.py": "idna",
    "sitecustomize.py": "sitecustomize",
    "usercustomize.py": "usercustomize",
    "zz-evil.pth": "pth",
}


@dataclass
class Setup:
    """A user's installation of tui and a project folder holding the planted files."""

    user: str
    tui: Path
    state: Path
    config: Path
    work: Path
    marks: Path
    env: dict[str, str]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``tui ARGS`` run by the user from the project folder."""
        return subprocess.run(
            self.command(str(self.tui), *args),
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=3 * TIMEOUT,
            check=False,
        )

    def command(self, *argv: str) -> list[str]:
        if self.user == "root":
            return list(argv)
        return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv]

    def marked(self) -> list[str]:
        return sorted(p.name for p in self.marks.iterdir())


def _others_can_read(path: Path) -> bool:
    folders = [path, *path.parents]
    return bool(path.stat().st_mode & stat.S_IROTH) and all(f.stat().st_mode & stat.S_IXOTH for f in folders)


def _install(root: Path) -> Path:
    """A venv of this Python version a plain user may run, with this checkout of tui (and the
    project's site-packages) on its path, and the ``tui`` command pip would write."""
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    system = Path("/usr/bin") / version
    base = system if system.exists() else Path(sysconfig.get_config_var("BINDIR") or "/usr/bin") / version
    venv = root / "venv"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    here = [p for p in sys.path if p.endswith("site-packages")]
    (site / "tui-dev.pth").write_text("\n".join([str(Path(tui.__file__).parents[1]), *here]) + "\n")
    command = venv / "bin" / "tui"
    command.write_text(f"#!{venv}/bin/python\nimport sys\nfrom tui.cli import main\nsys.exit(main())\n")
    command.chmod(0o755)
    return command


def _plant(folder: Path, marks: Path) -> None:
    for name, mark in PLANTED.items():
        code = (
            f"import os; open(os.path.join({str(marks)!r}, {mark!r} + '-' + str(os.getpid())), 'w').close()\n"
        )
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code)


@pytest.fixture(params=["root", "plain user"])
def setup(request: pytest.FixtureRequest) -> Iterator[Setup]:
    user: str = request.param
    if os.geteuid() != 0:
        pytest.skip("as root and as a plain user: needs root")
    if user == "plain user" and shutil.which("setpriv") is None:
        pytest.skip("becoming a plain user needs setpriv")
    if user == "plain user" and not all(
        _others_can_read(p)
        for p in [Path(tui.__file__).parent, *(Path(p) for p in sys.path if p.endswith("site-packages"))]
    ):
        pytest.skip("a plain user cannot read this checkout of tui")
    with tempfile.TemporaryDirectory(prefix="tui-pl-", dir="/tmp") as d:
        root = Path(d)
        os.chmod(root, 0o755)
        command = Path(sys.executable).parent / "tui" if user == "root" else _install(root)
        state, config, marks = root / "state", root / "config", root / "marks"
        project = root / "project"
        work = project / "work"
        for folder in (state, config, marks, work):
            folder.mkdir(parents=True)
        marks.chmod(0o777)
        _plant(project, marks)
        _plant(work, marks)
        if user != "root":
            subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(root)], check=True)
        env = {
            "PATH": f"{command.parent}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(project),
            "TUI_STATE_DIR": str(state),
            "TUI_CONFIG_DIR": str(config),
            "LANG": "C.UTF-8",
        }
        yield Setup(user, command, state, config, work, marks, env)
        stop_workers(state)


def assert_worker_isolated(setup: Setup, sid: str) -> None:
    """The live worker of `sid` runs with ``-I``, in its session's state folder."""
    car = read_sidecar(StatePaths(setup.state).session(sid).sidecar)
    assert car is not None
    argv = Path(f"/proc/{car.pid}/cmdline").read_bytes().split(b"\0")
    assert b"-I" in argv, argv
    assert os.readlink(f"/proc/{car.pid}/cwd") == str(StatePaths(setup.state).session(sid).root)


def _last_turn(setup: Setup, sid: str) -> str | None:
    """The outcome of the turn sent through the web bridge, once it ended."""
    lines = StatePaths(setup.state).session(sid).journal.read_text().splitlines()
    events = [json.loads(line) for line in lines if line.strip()]
    sent = [i for i, e in enumerate(events) if e["type"] == "turn_started" and "from the web" in str(e)]
    ended = [e for e in events[sent[-1] :] if e["type"] == "turn_ended"] if sent else []
    return str(ended[0]["outcome"]) if ended else None


def test_files_planted_in_the_sessions_folder_never_run_on_the_host(setup: Setup) -> None:
    # (a) a program's own delegate(...) starts its child's worker
    out = setup.run("send", "--new", DELEGATE, "--wait")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "child said 42\n"
    sid = out.stderr.strip().splitlines()[0]
    assert_worker_isolated(setup, sid)
    assert setup.marked() == []

    # (b) tui send after tui stop
    assert setup.run("stop", sid).returncode == 0
    again = setup.run("send", sid, "print('again')", "--wait")
    assert again.returncode == 0, again.stderr
    assert again.stdout == "again\n"
    assert_worker_isolated(setup, sid)

    # (d) tui restart
    restarted = setup.run("restart", sid)
    assert restarted.returncode == 0, restarted.stderr
    assert_worker_isolated(setup, sid)
    assert setup.marked() == []

    # (c) a collaborator limited to one turn wakes the session through a real tui web
    assert setup.run("stop", sid).returncode == 0
    shared = setup.run("share", sid, "--name", "ana", "--kind", "collaborator", "--turns", "1")
    assert shared.returncode == 0, shared.stderr
    token = next(line for line in shared.stdout.splitlines() if line.startswith("token ")).split()[-1]
    web = subprocess.Popen(
        setup.command(str(setup.tui), "web", "--port", "0", "--token-file", str(setup.state / "owner.token")),
        cwd=setup.work,
        env=setup.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert web.stdout is not None
        line = web.stdout.readline()
        assert "serving" in line, line + (web.stderr.read() if web.stderr else "")
        url = line.split()[-1]
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, headers=headers, timeout=TIMEOUT) as c:
            woke = c.post(f"/api/sessions/{sid}/wake", json={"wait": TIMEOUT})
            assert woke.status_code == 200 and woke.json()["live"], woke.text
            sent = c.post(f"/api/sessions/{sid}/turn", json={"prompt": "print('from the web')"})
            assert sent.status_code in (200, 202), sent.text
            wait_until(lambda: _last_turn(setup, sid) is not None, "the collaborator's turn to end")
            assert _last_turn(setup, sid) == "completed"
        assert_worker_isolated(setup, sid)
    finally:
        web.terminate()
        web.communicate(timeout=TIMEOUT)
    assert setup.marked() == []
