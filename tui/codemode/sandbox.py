"""How the program's interpreter is confined: the bubblewrap command line and the pids cgroup.

The required level: the program cannot write outside its working folder and a private ``/tmp``,
cannot reach any network (the host's loopback included) and does not see the parent's
environment; tui's own files are out of its reach (`tui.codemode.confine`). bubblewrap gives all
of it with namespaces (``--unshare-all``), a read-only view of the system, mounts over tui's
folders, ``--clearenv`` and ``--cap-drop ALL`` (without it a program run as root could remount
``/`` read-write). Inside, the runner adds a seccomp filter that refuses sockets (``socketpair``
aside), so a network attempt fails at once with a clear PermissionError, mounts, the kernel
keyring, eBPF, perf events and tracing other processes (`tui.codemode.confine.PROGRAM_REFUSED`);
and resource limits.

Processes are bounded by a pids cgroup when one can be made (as root); otherwise, for a user
other than root, by RLIMIT_NPROC, which the kernel counts per user namespace.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tui.codemode.confine import (
    ETC_FILES,
    PROGRAM_REFUSED,
    SHM_BYTES,
    SYSTEM,
    Protected,
    bwrap_command,
    interpreter_roots,
    mount_plan,
    seccomp_filter,
)
from tui.codemode.errors import SandboxError

__all__ = [
    "Mechanism",
    "PidsCgroup",
    "SandboxPlan",
    "cpu_seconds_of",
    "interpreter_pid",
    "landlock_abi",
    "open_io",
    "plan_sandbox",
    "written_bytes",
]

CHILD_SCRIPT = Path(__file__).with_name("_child.py")
CHILD_PATH = "/run/tui-codemode/child.py"
CONFINE_SCRIPT = CHILD_SCRIPT.with_name("_child_confine.py")
"""What the runner loads beside itself to confine itself (the seccomp filter, Landlock)."""
CONFINE_PATH = "/run/tui-codemode/_child_confine.py"
SITE_SCRIPT = CHILD_SCRIPT.with_name("_child_site.py")
"""What the runner loads beside itself to start as ``site`` would (`INTERPRETER_FLAGS`)."""
SITE_PATH = "/run/tui-codemode/_child_site.py"
INTERPRETER_FLAGS = ("-I", "-S", "-B", "-X", "utf8")
"""Isolated, no bytecode written, UTF-8; ``-S``: the runner does what ``site`` does at start-up itself
(`_child_site.start_site`), leaving out tui's own editable-install finder, which a program cannot use."""
_counter = itertools.count(1)


Mechanism = Literal["auto", "bubblewrap", "landlock"]


@dataclass(frozen=True)
class SandboxPlan:
    """How to start the sandboxed interpreter.

    Attributes:
        argv: the command that starts it (the child script's config JSON is appended).
        description: in words, how the required level is reached.
        config: what the runner must do to itself before running programs (seccomp filter,
            confinement, RLIMIT_NPROC).
        env: the environment of the started process.
        cwd: the folder it starts in.
        tmpdir: a private temporary folder to remove on close, when the plan made one.
    """

    argv: list[str]
    description: str
    config: dict[str, Any]
    env: dict[str, str]
    cwd: str
    tmpdir: Path | None = None


@functools.cache
def _bwrap_version(bwrap: str) -> str:
    try:
        done = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxError(
            f"bubblewrap at {bwrap} could not be run ({exc}); install it: apt install bubblewrap"
        ) from exc
    return done.stdout.strip() or "bubblewrap"


def landlock_abi() -> int:
    """The Landlock ABI version of the running kernel, 0 when it has none."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        version = int(libc.syscall(444, None, 0, 1))
    except (OSError, AttributeError):
        return 0
    return max(version, 0)


def _processes(cgroup: PidsCgroup | None, nproc: bool) -> str:
    if cgroup is not None:
        memory = f", {cgroup.memory_limit // 1024**2} MiB of memory in all" if cgroup.memory else ""
        return f"at most {cgroup.limit} processes (pids cgroup){memory}"
    if nproc:
        return "processes limited by RLIMIT_NPROC"
    return "processes not limited (no pids cgroup could be made, and RLIMIT_NPROC does not bind root)"


def _in_cgroup(argv: list[str], cgroup: PidsCgroup | None) -> list[str]:
    """Start through a shell that first moves itself into the cgroups, then becomes the sandbox."""
    if cgroup is None:
        return argv
    files = [str(f) for f in cgroup.procs_files]
    moves = " && ".join(f'echo $$ > "${i}"' for i in range(len(files)))
    script = f'{moves} && shift {len(files) - 1} && exec "$@"'
    return ["/bin/sh", "-c", script, *files, *argv]


def plan_sandbox(
    workdir: Path,
    *,
    bwrap: str | None,
    cgroup: PidsCgroup | None,
    protected: Protected,
    mechanism: Mechanism = "auto",
) -> SandboxPlan:
    """Choose how to confine the interpreter and build the command that starts it.

    bubblewrap when it is installed; else (``auto`` or ``landlock``) Landlock, seccomp and a
    network namespace set up by the runner on itself.

    Args:
        workdir: the folder the program may write.
        bwrap: the bubblewrap executable, or None to look for it on PATH.
        cgroup: the pids cgroup to start the sandbox in, if one could be made.
        protected: the paths to hide and keep read-only (`tui.codemode.confine.protected_paths`).
        mechanism: ``auto``, or force ``bubblewrap`` or ``landlock``.

    Returns:
        The plan.

    Raises:
        SandboxError: when no mechanism reaching the required level is available.
    """
    found = None
    if mechanism != "landlock":
        found = (
            bwrap or shutil.which("bwrap") or ("/usr/bin/bwrap" if Path("/usr/bin/bwrap").exists() else None)
        )
        if found is not None and not os.access(found, os.X_OK):
            found = None
    if found is not None:
        return _bwrap_plan(workdir, found, cgroup, protected)
    abi = landlock_abi() if mechanism != "bubblewrap" else 0
    if abi < 1:
        raise SandboxError(
            "Code Mode needs bubblewrap (or a kernel with Landlock) to confine programs, and neither "
            "was found; install bubblewrap (apt install bubblewrap) and start the session again"
        )
    return _landlock_plan(workdir, abi, cgroup, protected)


def _bwrap_plan(workdir: Path, bwrap: str, cgroup: PidsCgroup | None, protected: Protected) -> SandboxPlan:
    version = _bwrap_version(bwrap)
    argv = bwrap_command(
        [sys.executable, *INTERPRETER_FLAGS, CHILD_PATH],
        bwrap=bwrap,
        workdir=workdir,
        protected=protected,
        files={str(CHILD_SCRIPT): CHILD_PATH, str(CONFINE_SCRIPT): CONFINE_PATH, str(SITE_SCRIPT): SITE_PATH},
        env=_program_env(workdir, "/tmp"),
    )
    nproc = cgroup is None and os.geteuid() != 0
    description = (
        f"{version}: own user, mount, pid, network and IPC namespaces, no capabilities; "
        f"system read-only, only {workdir}, a private /tmp and /dev/shm writable; "
        f"{_tui_out_of_reach(protected)}; no network; empty environment; seccomp refuses sockets, "
        f"mounts, keyrings, bpf, perf events and tracing; {_processes(cgroup, nproc)}"
    )
    return SandboxPlan(
        argv=_in_cgroup(argv, cgroup),
        description=description,
        config={"seccomp": seccomp_filter(PROGRAM_REFUSED), "nproc": nproc},
        # bwrap's own init stays visible inside (/proc/1/environ): give it nothing to leak
        env={"PATH": "/usr/bin:/bin"},
        cwd=str(workdir),
    )


def _tui_out_of_reach(protected: Protected) -> str:
    said = "tui's files hidden, .git read-only"
    if protected.tui_paths_writable:
        return said + ", tui's installation WRITABLE ([sandbox] tui_paths_writable)"
    return said + " and its installation read-only"


def _landlock_plan(workdir: Path, abi: int, cgroup: PidsCgroup | None, protected: Protected) -> SandboxPlan:
    read = [str(Path("/") / name) for name in SYSTEM]
    read += [str(Path("/etc") / name) for name in ETC_FILES]
    read += [*interpreter_roots(), str(CHILD_SCRIPT.parent)]
    mounts = mount_plan(protected, workdir, [Path(r) for r in read])
    if mounts and os.geteuid() != 0 and not _user_namespaces():
        raise SandboxError(_cannot_protect(Path(mounts[0][1]), workdir))
    tmpdir = Path(tempfile.mkdtemp(prefix="tui-codemode-tmp-"))
    confine = {
        "read": read,
        "write": [str(workdir), str(tmpdir)],
        "devices": ["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"],
        "mounts": mounts,
        "shm": SHM_BYTES,
    }
    nproc = cgroup is None and os.geteuid() != 0
    signals = "signals to other processes refused" if abi >= 6 else "signals not scoped (Landlock ABI < 6)"
    description = (
        f"Landlock ABI {abi}: only {workdir}, {tmpdir} and a private /dev/shm writable, only the system "
        f"and the interpreter readable; {_tui_out_of_reach(protected)} (mounts in a namespace of its "
        f"own); own network namespace and seccomp refusing every socket: no network; seccomp refuses "
        f"mounts, keyrings, bpf, perf events and tracing; no capabilities; {signals}; "
        f"empty environment; {_processes(cgroup, nproc)}"
    )
    argv = [sys.executable, *INTERPRETER_FLAGS, str(CHILD_SCRIPT)]
    return SandboxPlan(
        argv=_in_cgroup(argv, cgroup),
        description=description,
        config={"seccomp": seccomp_filter(PROGRAM_REFUSED), "nproc": nproc, "confine": confine},
        env=_program_env(workdir, str(tmpdir)),
        cwd=str(workdir),
        tmpdir=tmpdir,
    )


def _user_namespaces() -> bool:
    """Whether this user may make a user namespace (and so mount in one of its own)."""
    try:
        return Path("/proc/sys/user/max_user_namespaces").read_text().strip() != "0"
    except OSError:
        return True


def _cannot_protect(path: Path, workdir: Path) -> str:
    return (
        f"{path} (tui's own files, or a path of [sandbox] in config.toml) lies inside {workdir}, and "
        "without bubblewrap or user namespaces the sandbox cannot hide it or keep it read-only; install "
        "bubblewrap (apt install bubblewrap), or move it out of the working folder "
        "($TUI_STATE_DIR, $TUI_CONFIG_DIR, or tui installed elsewhere), or start the session in "
        "another folder"
    )


def _program_env(workdir: Path, tmp: str) -> dict[str, str]:
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(workdir), "TMPDIR": tmp, "LANG": "C.UTF-8"}


class PidsCgroup:
    """A pids cgroup holding the sandbox, so a fork bomb stops at ``limit`` processes.

    Attributes:
        path: the cgroup's folder.
        limit: its ``pids.max``.
    """

    def __init__(self, path: Path, limit: int) -> None:
        self.path = path
        self.limit = limit
        self.memory: Path | None = None
        """A memory cgroup (v1) the sandbox is also started in, when one could be made."""
        self.memory_limit = 0

    @property
    def procs_files(self) -> list[Path]:
        """The ``cgroup.procs`` files the sandbox's first process writes its pid into."""
        files = [self.path / "cgroup.procs"]
        if self.memory is not None and self.memory != self.path:
            files.append(self.memory / "cgroup.procs")
        return files

    @classmethod
    def create(cls, limit: int, memory_bytes: int | None = None) -> PidsCgroup | None:
        """Make a pids cgroup under this process's own, or return None when the host does not allow it.

        With ``memory_bytes``, the memory of the whole sandbox is bounded too where the host
        allows it (the interpreter's own is bounded by RLIMIT_AS in any case).
        """
        name = f"tui-codemode-{os.getpid()}-{next(_counter)}"
        made = cls._create_pids(name, limit)
        if made is not None and memory_bytes is not None:
            made._bound_memory(name, memory_bytes)
        return made

    def _bound_memory(self, name: str, memory_bytes: int) -> None:
        # cgroup v2: the same folder holds both controllers
        if (self.path / "memory.max").exists():
            with contextlib.suppress(OSError):
                (self.path / "memory.max").write_text(str(memory_bytes))
                self.memory, self.memory_limit = self.path, memory_bytes
            return
        for parent in _controller_parents("memory"):
            _remove_stale(parent)
            path = parent / name
            try:
                path.mkdir()
            except OSError:
                continue
            try:
                (path / "memory.limit_in_bytes").write_text(str(memory_bytes))
            except OSError:
                with contextlib.suppress(OSError):
                    path.rmdir()
                continue
            self.memory, self.memory_limit = path, memory_bytes
            return

    @classmethod
    def _create_pids(cls, name: str, limit: int) -> PidsCgroup | None:
        for parent in _controller_parents("pids"):
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
        """Remove the (empty) cgroups; return whether they are gone."""
        gone = True
        for path in {self.path, self.memory or self.path}:
            gone = _remove_dir(path) and gone
        return gone


def _remove_dir(path: Path) -> bool:
    for _ in range(100):
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(0.01)
    return False


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name may hold spaces and parentheses: the fields start after the last ")"
    return text[text.rfind(")") + 2 :].split()


def cpu_seconds_of(pid: int) -> float | None:
    """CPU time (user + system, its waited-for children included) of a host process, or None."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))
    return ticks / os.sysconf("SC_CLK_TCK")


def interpreter_pid(started: int, script: str) -> int | None:
    """The host pid of the sandboxed interpreter: ``started`` itself or a descendant running ``script``."""
    queue = [started]
    while queue:
        pid = queue.pop(0)
        try:
            runs_script = script.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
            if runs_script and not Path(f"/proc/{pid}/exe").resolve().name.startswith("bwrap"):
                return pid
        except OSError:
            pass
        queue.extend(_children(pid))
    return None


def _children(pid: int) -> list[int]:
    """The processes `pid` started: from ``/proc/PID/task/*/children``, else by reading all of ``/proc``."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        return [int(c) for t in tasks for c in (t / "children").read_text().split()]
    except FileNotFoundError:
        pass
    except OSError:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None and int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def open_io(pid: int) -> int | None:
    """An open ``/proc/PID/io`` of a host process, for `written_bytes`; None when unreadable."""
    try:
        return os.open(f"/proc/{pid}/io", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def written_bytes(io_fd: int) -> tuple[int, int] | None:
    """What a host process and its reaped children wrote: (bytes through write calls, bytes to storage).

    Read afresh from its ``/proc/PID/io`` (``wchar``, ``write_bytes``), which the process cannot
    change; None when it cannot be read (the process is gone).
    """
    try:
        text = os.pread(io_fd, 1024, 0)
    except OSError:
        return None
    fields = dict(line.split(b": ", 1) for line in text.splitlines() if b": " in line)
    try:
        return int(fields[b"wchar"]), int(fields[b"write_bytes"])
    except (KeyError, ValueError):
        return None


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


def _controller_parents(controller: str) -> list[Path]:
    """Folders where a cgroup with ``controller`` could be made: under our own, v1 first, then v2."""
    parents: list[Path] = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return parents
    root = Path("/sys/fs/cgroup")
    for line in lines:
        _, controllers, path = line.split(":", 2)
        rel = path.lstrip("/")
        if controller in controllers.split(","):
            parents.append(root / controller / rel)
        elif controllers == "":
            for base in (root / "unified", root):
                if (base / "cgroup.controllers").exists():
                    here = base / rel
                    try:
                        if controller in (here / "cgroup.subtree_control").read_text().split():
                            parents.append(here)
                    except OSError:
                        pass
                    break
    return parents
