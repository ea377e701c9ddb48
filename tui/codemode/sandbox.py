"""How the program's interpreter is confined: the bubblewrap command line and the pids cgroup.

The required level: the program cannot write outside its working folder and a private ``/tmp``,
cannot reach any network (the host's loopback included) and does not see the parent's
environment. bubblewrap gives all three with namespaces (``--unshare-all``), a read-only view of
the system, ``--clearenv`` and ``--cap-drop ALL`` (without it a program run as root could remount
``/`` read-write). Inside, the runner adds a seccomp filter that refuses every socket but a Unix
one, so a network attempt fails at once with a clear PermissionError, and resource limits.

Processes are bounded by a pids cgroup when one can be made (as root); otherwise, for a user
other than root, by RLIMIT_NPROC, which the kernel counts per user namespace.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tui.codemode.errors import SandboxError

__all__ = ["PidsCgroup", "SandboxPlan", "plan_sandbox"]

CHILD_SCRIPT = Path(__file__).with_name("_child.py")
CHILD_PATH = "/run/tui-codemode/child.py"
_ETC_FILES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "nsswitch.conf",
    "passwd",
    "group",
    "hosts",
    "ssl",
    "ca-certificates",
    "mime.types",
)
_counter = itertools.count(1)


@dataclass(frozen=True)
class SandboxPlan:
    """How to start the sandboxed interpreter.

    Attributes:
        argv: the command that starts it (the child script's config JSON is appended).
        description: in words, how the required level is reached.
        seccomp: whether the runner loads its socket filter.
        nproc: whether the runner limits processes with RLIMIT_NPROC.
    """

    argv: list[str]
    description: str
    seccomp: bool
    nproc: bool


@functools.cache
def _bwrap_version(bwrap: str) -> str:
    try:
        done = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxError(
            f"bubblewrap at {bwrap} could not be run ({exc}); install it: apt install bubblewrap"
        ) from exc
    return done.stdout.strip() or "bubblewrap"


def _system_binds() -> list[str]:
    args: list[str] = []
    for name in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for name in _ETC_FILES:
        path = Path("/etc") / name
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _interpreter_roots() -> list[str]:
    """The folders the interpreter needs, outside the system folders already bound."""
    roots = {sys.prefix, sys.base_prefix, str(Path(os.path.realpath(sys.executable)).parent.parent)}
    system = ("/usr", "/bin", "/lib", "/lib64", "/sbin")
    return sorted(r for r in roots if not any(r == s or r.startswith(s + "/") for s in system))


def plan_sandbox(workdir: Path, *, bwrap: str | None, cgroup: PidsCgroup | None) -> SandboxPlan:
    """Build the command that starts the sandboxed interpreter.

    Args:
        workdir: the folder the program may write; it is bound read-write at the same path.
        bwrap: the bubblewrap executable, or None to look for it on PATH.
        cgroup: the pids cgroup to start the sandbox in, if one could be made.

    Returns:
        The plan.

    Raises:
        SandboxError: when no mechanism reaching the required level is available.
    """
    found = bwrap or shutil.which("bwrap") or ("/usr/bin/bwrap" if Path("/usr/bin/bwrap").exists() else None)
    if found is None or not os.access(found, os.X_OK):
        raise SandboxError(
            "Code Mode needs bubblewrap to confine programs and it was not found; "
            "install it (apt install bubblewrap) and start the session again"
        )
    version = _bwrap_version(found)
    argv = [
        found,
        "--unshare-all",
        "--die-with-parent",
        "--cap-drop",
        "ALL",
        "--new-session",
        "--clearenv",
        *_system_binds(),
    ]
    for root in _interpreter_roots():
        argv += ["--ro-bind", root, root]
    argv += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(1024**3),
        "--tmpfs",
        "/tmp",
        "--ro-bind",
        str(CHILD_SCRIPT),
        CHILD_PATH,
        "--bind",
        str(workdir),
        str(workdir),
        "--remount-ro",
        "/",
        "--chdir",
        str(workdir),
        "--setenv",
        "PATH",
        "/usr/local/bin:/usr/bin:/bin",
        "--setenv",
        "HOME",
        str(workdir),
        "--setenv",
        "TMPDIR",
        "/tmp",
        "--setenv",
        "LANG",
        "C.UTF-8",
        "--",
        sys.executable,
        "-I",
        "-B",
        "-X",
        "utf8",
        CHILD_PATH,
    ]
    nproc = cgroup is None and os.geteuid() != 0
    if cgroup is not None:
        argv = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(cgroup.path / "cgroup.procs"), *argv]
        processes = f"at most {cgroup.limit} processes (pids cgroup)"
    elif nproc:
        processes = "processes limited by RLIMIT_NPROC"
    else:
        processes = (
            "processes not limited (no pids cgroup could be made, and RLIMIT_NPROC does not bind root)"
        )
    description = (
        f"{version}: own user, mount, pid, network and IPC namespaces, no capabilities; "
        f"system read-only, only {workdir} and a private /tmp writable; no network; empty environment; "
        f"seccomp refuses non-Unix sockets; {processes}"
    )
    return SandboxPlan(argv=argv, description=description, seccomp=True, nproc=nproc)


class PidsCgroup:
    """A pids cgroup holding the sandbox, so a fork bomb stops at ``limit`` processes.

    Attributes:
        path: the cgroup's folder.
        limit: its ``pids.max``.
    """

    def __init__(self, path: Path, limit: int) -> None:
        self.path = path
        self.limit = limit

    @classmethod
    def create(cls, limit: int) -> PidsCgroup | None:
        """Make a pids cgroup under this process's own, or return None when the host does not allow it."""
        name = f"tui-codemode-{os.getpid()}-{next(_counter)}"
        for parent in _pids_parents():
            _remove_stale(parent)
            path = parent / name
            try:
                path.mkdir()
            except OSError:
                continue
            try:
                (path / "pids.max").write_text(str(limit))
                if (path / "pids.max").read_text().strip() != str(limit):
                    raise OSError("pids.max did not take")
            except OSError:
                with contextlib.suppress(OSError):
                    path.rmdir()
                continue
            return cls(path, limit)
        return None

    def pids(self) -> list[int]:
        """The processes in the cgroup now."""
        try:
            text = (self.path / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def kill_all(self, timeout: float = 3.0) -> bool:
        """SIGKILL every process in the cgroup until it is empty; return whether it emptied in time."""
        deadline = time.monotonic() + timeout
        while True:
            pids = self.pids()
            if not pids:
                return True
            if time.monotonic() > deadline:
                return False
            kill = self.path / "cgroup.kill"
            if kill.exists():
                with contextlib.suppress(OSError):
                    kill.write_text("1")
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def remove(self) -> bool:
        """Remove the (empty) cgroup; return whether it is gone."""
        for _ in range(100):
            try:
                self.path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                time.sleep(0.01)
        return False


def _remove_stale(parent: Path) -> None:
    """Remove the empty cgroups left by sessions whose process died without closing them."""
    try:
        leftovers = list(parent.glob("tui-codemode-*"))
    except OSError:
        return
    for path in leftovers:
        try:
            owner = int(path.name.split("-")[2])
        except (IndexError, ValueError):
            continue
        if owner == os.getpid() or Path(f"/proc/{owner}").exists():
            continue
        with contextlib.suppress(OSError):
            path.rmdir()


def _pids_parents() -> list[Path]:
    """Folders where a pids cgroup could be made: under our own cgroup, v1 first, then v2."""
    parents: list[Path] = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return parents
    root = Path("/sys/fs/cgroup")
    for line in lines:
        _, controllers, path = line.split(":", 2)
        rel = path.lstrip("/")
        if "pids" in controllers.split(","):
            parents.append(root / "pids" / rel)
        elif controllers == "":
            for base in (root / "unified", root):
                if (base / "cgroup.controllers").exists():
                    here = base / rel
                    try:
                        if "pids" in (here / "cgroup.subtree_control").read_text().split():
                            parents.append(here)
                    except OSError:
                        pass
                    break
    return parents
