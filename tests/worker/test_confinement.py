"""Tried as an attacker would: nothing a program or an ACP agent does reaches tui's own files, or
gets code run by the next host ``tui`` or ``git``.

The setup is both common ones at once: the session works in the home folder, which holds tui's
state dir and config dir, a token file tui knows of (a remote's), and is a git repository with
the ``.venv`` that runs tui. Each attack runs as root and as a plain user (``setpriv``), through a
real worker (a program of the python agent; a real ACP agent subprocess) and, for the Landlock
fallback, through a `PythonSession` opened as the worker opens it.
"""

from __future__ import annotations

import hashlib
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
from typing import Any

import pytest
from acp_agent import configure
from helpers import TIMEOUT

import tui
from tui.codemode.sandbox import landlock_abi
from tui.store import StatePaths, create_session
from tui.store.remotes import Remote, add_remote

TESTS = Path(__file__).resolve().parents[1]
DRIVER = TESTS / "confine_driver.py"
HAVE_BWRAP = shutil.which("bwrap") is not None
NOBODY = 65534
TOKEN = "secret-token-0123456789abcdef"
JOURNAL_LINE = '{"type":"user_message","text":"another session\'s secret"}\n'


@dataclass
class Home:
    """The home folder a session works in, as described above."""

    root: Path
    state: Path
    config: Path
    site: Path
    python: Path
    journal: Path
    token: Path

    def snapshot(self) -> dict[str, str]:
        """Every file and folder of the home folder (the private files of the workers, the
        sessions' summary they keep and the state dir's forking process aside) and each file's
        digest."""
        seen: dict[str, str] = {}
        for path in sorted(self.root.rglob("*")):
            relative = str(path.relative_to(self.root))
            if (
                relative.startswith(
                    (
                        ".local/state/tui/sessions/",
                        ".local/state/tui/index.sqlite",
                        ".local/state/tui/summary.sqlite",
                        ".local/state/tui/forker.",
                        "agent-state",
                    )
                )
                and self.journal != path
            ):
                continue
            if path.is_symlink():
                seen[relative] = "-> " + os.readlink(path)
            elif path.is_file():
                seen[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                seen[relative] = "dir"
        return seen


def make_home(root: Path, *, with_config: bool) -> Home:
    home = root / "home"
    subprocess.run(["git", "init", "-q", str(home)], check=True)
    # an interpreter of this version a plain user may run too (this one may live in root's home)
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    system = Path("/usr/bin") / version
    base = system if system.exists() else Path(sysconfig.get_config_var("BINDIR") or "/usr/bin") / version
    venv = home / ".venv"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    # tui (this checkout) and its dependencies, run from the project's own .venv
    here = [p for p in sys.path if p.endswith("site-packages")]
    (site / "tui-dev.pth").write_text("\n".join([str(Path(tui.__file__).parents[1]), *here]) + "\n")
    state = home / ".local" / "state" / "tui"
    config = home / ".config" / "tui"
    # the `tui` command the user runs, as `pip install --user` leaves it
    command = home / ".local" / "bin" / "tui"
    command.parent.mkdir(parents=True)
    command.write_text(f'#!/bin/sh\nexec {venv}/bin/python -I -m tui "$@"\n')
    command.chmod(0o755)
    token = home / ".tui-token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    paths = StatePaths(state)
    other = create_session(paths, working_directory=home)
    journal = paths.session(other.id).journal
    journal.write_text(JOURNAL_LINE)
    add_remote(paths, Remote("box", "http://192.0.2.1:7433", str(token)))
    if with_config:
        config.mkdir(parents=True)
        configure(config, home / "agent-state", python=str(venv / "bin" / "python"))
    return Home(home, state, config, site, venv / "bin" / "python", journal, token)


@pytest.fixture(params=["root", "plain user"])
def user(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    if name == "root" and os.geteuid() != 0:
        pytest.skip("not running as root")
    if name == "plain user" and (os.geteuid() != 0 or shutil.which("setpriv") is None):
        pytest.skip("becoming a plain user needs root and setpriv")
    if name == "plain user":
        hidden = [p for p in _what_tui_runs_from() if not _others_can_read(p)]
        if hidden:
            pytest.skip(
                f"a plain user cannot read {hidden[0]} (a folder above it is private), so cannot run tui"
            )
    return name


def _what_tui_runs_from() -> list[Path]:
    """This checkout's tui package, the tests' driver and the site-packages tui imports from."""
    return [Path(tui.__file__).parent, TESTS, *(Path(p) for p in sys.path if p.endswith("site-packages"))]


def _others_can_read(path: Path) -> bool:
    """Whether a user who is neither the owner nor in the group may read `path` and pass every
    folder above it."""
    folders = [path, *path.parents]
    return bool(path.stat().st_mode & stat.S_IROTH) and all(f.stat().st_mode & stat.S_IXOTH for f in folders)


@pytest.fixture
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="tui-atk-", dir="/tmp") as root:
        os.chmod(root, 0o755)
        yield Path(root)


def drive(home: Home, user: str, **spec: Any) -> dict[str, Any]:
    """Run the driver as `user`, from the home folder's .venv, with HOME and tui's dirs in it."""
    if user != "root":
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(home.root)], check=True)
    env = {
        "PATH": f"{home.root}/.local/bin:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home.root),
        "TUI_STATE_DIR": str(home.state),
        "TUI_CONFIG_DIR": str(home.config),
        "PYTHONPATH": str(TESTS),
        "LANG": "C.UTF-8",
    }
    spec = {"state": str(home.state), "workdir": str(home.root), **spec}
    command = [str(home.python), str(DRIVER), json.dumps(spec)]
    if user != "root":
        command = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *command]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=6 * TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


PROGRAM = """
import ctypes, json, os
H, SITE, JOURNAL, TOKEN = {home!r}, {site!r}, {journal!r}, {token!r}
results = {{}}
def attempt(name, action):
    try:
        value = action()
        results[name] = "done" if value is None else "read: " + str(value)
    except OSError as exc:
        results[name] = type(exc).__name__
def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
def read(path):
    with open(path) as f:
        return f.read()
def call(number):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, 0, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "refused")
attempt("rename ~/.config", lambda: os.rename(H + "/.config", H + "/.config-old"))
attempt("rename ~/.local/state", lambda: os.rename(H + "/.local/state", H + "/.local/state-old"))
attempt("rename ~/.local", lambda: os.rename(H + "/.local", H + "/.local-old"))
attempt("create config.toml", lambda: write(H + "/.config/tui/config.toml", 'default_agent = "evil"\\n'))
attempt("write .git/commondir", lambda: write(H + "/.git/commondir", "/tmp/evil\\n"))
attempt("write .git/config", lambda: write(H + "/.git/config", "[core]\\n\\tfsmonitor = touch /tmp/pwned\\n"))
attempt("write .git/hooks/x", lambda: write(H + "/.git/hooks/x", "#!/bin/sh\\n"))
attempt("rename .git", lambda: os.rename(H + "/.git", H + "/.git-old"))
attempt("write .pth", lambda: write(SITE + "/evil.pth", "import os\\n"))
attempt("rename .venv", lambda: os.rename(H + "/.venv", H + "/.venv-old"))
attempt("rename .venv/lib", lambda: os.rename(H + "/.venv/lib", H + "/.venv/lib-old"))
attempt("read journal", lambda: read(JOURNAL))
attempt("read token", lambda: read(TOKEN))
attempt("replace token", lambda: os.rename(TOKEN, H + "/token-old"))
attempt("write the tui command", lambda: write(H + "/.local/bin/tui", "#!/bin/sh\\ntouch /tmp/pwned\\n"))
attempt("replace the tui command", lambda: os.rename(H + "/.local/bin/tui", H + "/.local/bin/tui-old"))
attempt("bpf", lambda: call({{"x86_64": 321, "aarch64": 280}}[os.uname().machine]))
attempt("perf_event_open", lambda: call({{"x86_64": 298, "aarch64": 241}}[os.uname().machine]))
attempt("fill /dev/shm", lambda: write("/dev/shm/left-behind", "x" * 1_000_000))
print("RESULTS " + json.dumps(results))
"""

WRITES = [
    "rename ~/.config",
    "rename ~/.local/state",
    "rename ~/.local",
    "create config.toml",
    "write .git/commondir",
    "write .git/config",
    "write .git/hooks/x",
    "rename .git",
    "write .pth",
    "rename .venv",
    "rename .venv/lib",
    "replace token",
    "write the tui command",
    "replace the tui command",
    "bpf",
    "perf_event_open",
]


def attack_results(reply: str, marker: str) -> dict[str, str]:
    line = next(line for line in reply.splitlines() if line.startswith(marker))
    results: dict[str, str] = json.loads(line.removeprefix(marker))
    return results


def assert_program_refused(home: Home, before: dict[str, str], reply: str) -> None:
    results = attack_results(reply, "RESULTS ")
    worked = {name: results[name] for name in WRITES if results[name].startswith("done")}
    assert not worked, worked
    assert "secret" not in results["read journal"], results
    assert TOKEN not in results["read token"], results
    assert home.snapshot() == before
    assert not home.config.joinpath("config.toml").exists()
    assert not Path("/dev/shm/left-behind").exists()


@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap is not installed: the worker would use Landlock")
def test_a_program_in_the_worker_reaches_nothing_of_tui(scratch: Path, user: str) -> None:
    home = make_home(scratch, with_config=False)
    program = PROGRAM.format(
        home=str(home.root), site=str(home.site), journal=str(home.journal), token=str(home.token)
    )
    before = home.snapshot()
    ran = drive(home, user, mode="worker", agent="python", prompt=program)
    assert ran["outcome"] == "completed", ran
    # the config dir tui had not made yet was made (empty) before the program started, and hidden
    before[".config"] = before[".config/tui"] = "dir"
    assert_program_refused(home, before, ran["reply"])


@pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock")
def test_a_program_under_the_landlock_fallback_reaches_nothing_of_tui(scratch: Path, user: str) -> None:
    home = make_home(scratch, with_config=False)
    program = PROGRAM.format(
        home=str(home.root), site=str(home.site), journal=str(home.journal), token=str(home.token)
    )
    before = home.snapshot()
    ran = drive(home, user, mode="session", mechanism="landlock", prompt=program)
    assert ran["outcome"] == "completed", ran
    assert "Landlock" in ran["notes"][0]
    before[".config"] = before[".config/tui"] = "dir"
    assert_program_refused(home, before, ran["reply"])


@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap is not installed: agents run unconfined")
def test_an_acp_agent_reaches_nothing_of_tui_through_the_worker_nor_by_itself(
    scratch: Path, user: str
) -> None:
    home = make_home(scratch, with_config=True)
    targets = {
        "home": str(home.root),
        "site": str(home.site),
        "config": str(home.config),
        "journal": str(home.journal),
        "token": str(home.token),
        "state": str(home.state),
        "worker_pid": "{worker_pid}",
    }
    before = home.snapshot()
    ran = drive(home, user, mode="worker", agent="tester", prompt="attack " + json.dumps(targets))
    assert ran["outcome"] == "completed", ran
    results = attack_results(ran["reply"], "attack results: ")
    assert results.pop("CapEff") == "0000000000000000"
    assert "secret" not in results["fs read journal"] and "secret" not in results["read journal"], results
    assert TOKEN not in results["fs read token"] and TOKEN not in results["read token"], results
    for name in ("read /proc/<worker>/root journal", "list /proc/<worker>/root state"):
        assert not results[name].startswith("read"), results
    worked = {name: outcome for name, outcome in results.items() if outcome == "done"}
    assert not worked, worked
    # the agent's own symlink is its own file; nothing else of the home folder changed
    after = home.snapshot()
    assert after.pop("link-to-config") == f"-> {home.config}"
    assert after == before
    # the first screen says what the agent can and cannot reach
    assert any(
        "tui's sessions, config, sockets and the token files tui knows of are hidden" in n
        for n in ran["notes"]
    ), ran["notes"]
    refusals = [n for n in ran["notes"] if n.startswith("refused the agent's")]
    assert len(refusals) >= 7, refusals


def test_a_folder_swapped_for_a_symlink_after_the_check_cannot_lead_a_write_into_tui(tmp_path: Path) -> None:
    # unit: the agent's write is checked, then (as a racing agent would) a folder on its way is
    # replaced by a symlink into tui's config dir before the file is opened
    from tui.codemode.confine import protected_paths
    from tui.config import AgentProfile
    from tui.worker.agents.acp import AcpAgent

    work = tmp_path / "home"
    config = work / ".config" / "tui"
    (work / "sub").mkdir(parents=True)
    protected = protected_paths(work, tui_folders=[config])
    agent = AcpAgent("tester", AgentProfile(command=["true"]), work, tmp_path, "sid", protected=protected)
    notes: list[str] = []
    agent.note = notes.append  # type: ignore[method-assign]
    target = agent.files.inside("sub/config.toml", "write")
    (work / "sub").rmdir()
    (work / "sub").symlink_to(config)
    with pytest.raises(OSError):
        agent.files.open_beneath(target, write=True)
    assert not (config / "config.toml").exists()
    # checked again, the same path is refused and said
    with pytest.raises(Exception, match="Invalid params"):
        agent.files.inside("sub/config.toml", "write")
    assert notes and "tui's own" in notes[-1]
    # the working folder itself is not a file
    with pytest.raises(Exception, match=r"not found|Resource"):
        agent.files.read(".", None, None)
