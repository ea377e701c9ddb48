"""What a confined process must not reach, and the bubblewrap command that confines one.

One rule, for a program (the Code Mode sandbox), for an ACP agent's own process and for the files
the worker reads and writes on an agent's behalf: `protected_paths` says what is hidden and what
is read-only, and `Protected.refuses` applies the same rule to one path.

tui itself must be out of reach, wherever it lies: its state dir holds every session's journal and
bridge socket, its config dir the user's settings (an ``[agents]`` command the next ``tui`` runs),
the token files it knows of let anyone drive ``tui web``, and a ``.pth`` file written into the
installation running tui would run on the host at the next ``tui`` command. The working folder's
whole ``.git`` is read-only too: git runs what its hooks, config and ``commondir`` name. The caller
names tui's folders and token files (this package knows nothing of sessions' files).

A protected path inside a writable folder could be moved away with one of its ancestors (rename
``~/.config`` and make a new one): each ancestor between the writable folder and the protected
path is bound onto itself, and a mount point cannot be renamed. tui's folders are made before the
process starts, so that one not made yet (the config dir before the first ``config.toml``) is
hidden too.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import platform
import shutil
import site
import struct
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "AGENT_REFUSED",
    "PROGRAM_REFUSED",
    "Protected",
    "agent_command",
    "bwrap_command",
    "inside",
    "interpreter_roots",
    "mount_plan",
    "protected_paths",
    "seccomp_filter",
    "system_binds",
]

PACKAGE = Path(__file__).resolve().parents[1]
"""The folder of the ``tui`` package running now."""
ETC_FILES = (
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
ETC_NETWORK = ("resolv.conf", "gai.conf", "services", "protocols")
"""Read as well when the confined process has the network."""
SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
SHM_BYTES = 64 * 1024**2
"""The size of a confined process's own ``/dev/shm``: what it leaves there goes with it."""

SYSCALLS: dict[str, tuple[int, dict[str, int]]] = {
    # machine: (AUDIT_ARCH, {name: number})
    "x86_64": (
        0xC000003E,
        {
            "socket": 41,
            "connect": 42,
            "ptrace": 101,
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "perf_event_open": 298,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "bpf": 321,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "pidfd_getfd": 438,
            "process_madvise": 440,
            "mount_setattr": 442,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "socket": 198,
            "connect": 203,
            "ptrace": 117,
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "perf_event_open": 241,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "bpf": 280,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "pidfd_getfd": 438,
            "process_madvise": 440,
            "mount_setattr": 442,
        },
    ),
}
"""The system calls a seccomp filter may refuse, by machine."""
MOUNTS: tuple[str, ...] = ("mount", "umount2", "pivot_root", "open_tree", "move_mount", "mount_setattr")
MOUNTS += ("fsopen", "fsconfig", "fsmount", "fspick")
KERNEL = ("add_key", "request_key", "keyctl", "bpf", "perf_event_open")
OTHERS = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "process_madvise")
AGENT_REFUSED = (*MOUNTS, *KERNEL, *OTHERS)
"""An agent's process: no mount changes (its mounts keep tui's paths from it), no kernel keyring,
no eBPF, no perf events, no reaching into another process. Sockets stay: it needs the network."""
IO_URING = ("io_uring_setup", "io_uring_enter", "io_uring_register")
PROGRAM_REFUSED = (*AGENT_REFUSED, "socket", "connect", *IO_URING)
"""A program: as an agent, and no socket but ``socketpair`` (no network, no Unix socket by path),
and no ``io_uring``, which would go around the filter."""


@dataclass(frozen=True)
class Protected:
    """The paths a confined process must not see or must not change.

    Attributes:
        hidden: folders (or files) replaced by an empty one inside the sandbox; each exists.
        read_only: folders (or files) bound read-only over whatever would make them writable.
        tui_paths_writable: whether tui's installation was left writable on purpose
            (``[sandbox] tui_paths_writable``), to develop tui from inside a session.
        workdir: the writable working folder they were computed for (resolved).
    """

    hidden: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    tui_paths_writable: bool = False
    workdir: Path | None = None

    def within(self, folder: Path) -> list[Path]:
        """The protected paths inside `folder` (itself included), hidden ones first."""
        return [p for p in (*self.hidden, *self.read_only) if inside(p, folder)]

    def around(self) -> list[Path]:
        """The hidden folders holding the working folder (a session working in the state dir)."""
        return [h for h in self.hidden if self.workdir is not None and inside(self.workdir, h)]

    def refuses(self, path: str | os.PathLike[str], *, write: bool) -> str | None:
        """Why `path` (symlinks and ``..`` resolved) is out of reach, or None when it is not.

        The same rule the mounts apply: a hidden path cannot be read or written (but for the
        working folder itself inside a hidden one), a read-only one cannot be written.
        """
        target = Path(os.path.realpath(path))
        around = self.around()
        for hidden in self.hidden:
            if inside(target, hidden) and not (hidden in around and inside(target, self.workdir or hidden)):
                return f"{hidden} is tui's own (hidden from the agent and from programs)"
        if write:
            for kept in self.read_only:
                if inside(target, kept):
                    return f"{kept} is read-only for the agent and for programs"
        return None

    def ancestors(self, writable: Path) -> list[Path]:
        """The folders between `writable` and each protected path inside it, parents first.

        Each is bound onto itself, so that none can be renamed to move a protected path away;
        those inside a protected path need not be.
        """
        found: dict[Path, None] = {}
        for path in (*self.hidden, *self.read_only):
            if path == writable or not inside(path, writable):
                continue
            for parent in path.parents:
                if parent == writable or not inside(parent, writable):
                    break
                found.setdefault(parent, None)
        # a hidden folder holding the working folder shows that folder again: not guarded there
        around = self.around()
        guarded = [g for g in (*self.hidden, *self.read_only) if g not in around]
        kept = [p for p in found if not any(inside(p, g) for g in guarded)]
        return sorted(kept, key=lambda p: (len(p.parts), str(p)))


def inside(path: Path, folder: Path) -> bool:
    """Whether `path` is `folder` or lies beneath it (both resolved)."""
    return path == folder or folder in path.parents


def tui_installation() -> list[Path]:
    """The folders a ``.pth`` or a changed module would run from at the next ``tui`` command.

    The interpreter's prefixes (a venv included), its site-packages (the user's too), the ``tui``
    package's folder and, for an editable install, the checkout holding it; and the ``tui`` command
    found on PATH (``pip install --user``'s script), or, when that is a symlink (``pipx``), the
    folder holding it, since a symlink can be replaced whatever its target is.
    """
    found = [Path(sys.prefix), Path(sys.exec_prefix), Path(sys.base_prefix), PACKAGE]
    found += [Path(p) for p in site.getsitepackages()]
    found.append(Path(site.getusersitepackages()))
    checkout = PACKAGE.parent
    if (checkout / "pyproject.toml").is_file() and PACKAGE.name == "tui":
        found.append(checkout)
    command = shutil.which("tui")
    if command is not None:
        entry = Path(os.path.abspath(command))
        found.append(entry.parent if entry.is_symlink() else entry)
    return found


def _existing(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Each path resolved, once, when it exists; a path beneath another kept too (it may be re-exposed)."""
    seen: dict[Path, None] = {}
    for raw in paths:
        path = Path(os.path.realpath(Path(raw).expanduser()))
        if path.exists():
            seen.setdefault(path, None)
    return sorted(seen, key=lambda p: (len(p.parts), str(p)))


def git_dirs(workdir: Path) -> list[Path]:
    """The working folder's ``.git`` and, when it is a file (a worktree), the folders it names: git
    on the host runs what their hooks and config (``core.fsmonitor``) and ``commondir`` name."""
    dot_git = workdir / ".git"
    found = [dot_git]
    with contextlib.suppress(OSError, UnicodeDecodeError):
        if dot_git.is_file():
            line = dot_git.read_text().strip()
            if line.startswith("gitdir:"):
                gitdir = (workdir / line.removeprefix("gitdir:").strip()).resolve()
                found.append(gitdir)
                common = gitdir / "commondir"
                if common.is_file():
                    found.append((gitdir / common.read_text().strip()).resolve())
    return found


def make_folders(folders: Iterable[str | os.PathLike[str]]) -> None:
    """Make tui's folders that do not exist yet (0700), so that they can be hidden before a
    confined process could make them itself."""
    for folder in folders:
        with contextlib.suppress(OSError):
            Path(folder).expanduser().mkdir(mode=0o700, parents=True, exist_ok=True)


def protected_paths(
    workdir: Path,
    *,
    hidden: Iterable[str | os.PathLike[str]] = (),
    read_only: Iterable[str | os.PathLike[str]] = (),
    tui_paths_writable: bool = False,
    tui_folders: Iterable[str | os.PathLike[str]] = (),
) -> Protected:
    """The paths to hide and to keep read-only for a process working in `workdir`, computed now.

    Args:
        workdir: the folder the process may write.
        hidden: tui's token files and the user's own additions; those that do not exist now are
            left out (nothing can be mounted on them).
        read_only: the user's own additions; tui's installation and the working folder's whole
            ``.git`` are added here.
        tui_paths_writable: leave tui's installation writable (to develop tui inside a session).
        tui_folders: tui's state dir, config dir and socket folders: made now when missing, and
            hidden.

    Returns:
        The paths, resolved, parents before children.
    """
    workdir = Path(os.path.realpath(workdir))
    folders = list(tui_folders)
    make_folders(folders)
    kept = list(read_only) + git_dirs(workdir)
    if not tui_paths_writable:
        kept += tui_installation()
    found = _existing([*folders, *hidden])

    def covered(path: Path) -> bool:
        # a hidden folder is empty inside: nothing beneath it needs a mount (nor could have one), but
        # for the working folder a hidden folder holds, which is shown again with what is in it
        shown_again = inside(path, workdir)
        return any(inside(path, h) and path != h and not (shown_again and inside(workdir, h)) for h in found)

    hide = [p for p in found if not covered(p)]
    shown = [p for p in _existing(kept) if not covered(p)]
    return Protected(
        hidden=tuple(hide), read_only=tuple(shown), tui_paths_writable=tui_paths_writable, workdir=workdir
    )


def seccomp_filter(refused: Iterable[str]) -> list[tuple[int, int, int, int]]:
    """A seccomp BPF program that makes the `refused` system calls fail with EPERM.

    Another architecture's calls (x32 on x86_64 too) are all refused. Returned as
    ``(code, jt, jf, k)`` instructions: the runner loads them itself, bubblewrap takes them packed
    (`seccomp_bytes`).

    Raises:
        OSError: no table of system calls for this machine.
    """
    arch = SYSCALLS.get(platform.machine())
    if arch is None:
        raise OSError(f"no seccomp filter for {platform.machine()}")
    audit, numbers = arch
    numbers_refused = sorted({numbers[name] for name in refused})
    ld_abs, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
    program = [
        (ld_abs, 0, 0, 4),  # arch
        (jeq, 1, 0, audit),
        (ret, 0, 0, deny),
        (ld_abs, 0, 0, 0),  # syscall number
        (jge, 0, 1, 0x40000000),  # x32 calls on x86_64
        (ret, 0, 0, deny),
    ]
    # each match jumps over the checks after it and the allow, onto the deny
    count = len(numbers_refused)
    program += [(jeq, count - i, 0, nr) for i, nr in enumerate(numbers_refused)]
    program += [(ret, 0, 0, allow), (ret, 0, 0, deny)]
    return program


def seccomp_bytes(refused: Iterable[str]) -> bytes:
    """`seccomp_filter` packed as the kernel's ``struct sock_filter`` array (bubblewrap's ``--seccomp``)."""
    return b"".join(struct.pack("=HBBI", *op) for op in seccomp_filter(refused))


@functools.cache
def _seccomp_memfd(refused: tuple[str, ...]) -> int:
    """A sealed memory file holding the packed filter: no one, the agent included, can change it."""
    fd = os.memfd_create("tui-seccomp", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.write(fd, seccomp_bytes(refused))
    seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


def _seccomp_file(refused: tuple[str, ...]) -> str:
    """Where bubblewrap's shell opens the filter: this process's sealed memory file, by its
    ``/proc`` path (the agent, in a pid namespace of its own, cannot see this process)."""
    return f"/proc/{os.getpid()}/fd/{_seccomp_memfd(refused)}"


def mount_plan(protected: Protected, workdir: Path, readable: Sequence[Path] = ()) -> list[tuple[str, str]]:
    """The mounts that keep `protected` from a process that may write `workdir` and read
    `readable`, in order; Landlock alone keeps it from everything else.

    For the confinement without bubblewrap (the runner makes them in a mount namespace of its
    own): ``bind`` a folder onto itself (an ancestor: it cannot be renamed), ``ro`` bind a path
    read-only onto itself, ``hide`` a folder under an empty read-only tmpfs (or a file under
    ``/dev/null``).
    """
    plan = [("bind", str(p)) for p in protected.ancestors(workdir)]
    plan += [("ro", str(p)) for p in protected.read_only if inside(p, workdir)]
    reach = [workdir, *readable]
    hide = [p for p in protected.hidden if any(inside(p, r) for r in reach) and not inside(workdir, p)]
    plan += [("hide", str(p)) for p in hide]
    return plan


def system_binds(network: bool = False) -> list[str]:
    """bubblewrap arguments binding the system folders and a few files of ``/etc``, read-only."""
    args: list[str] = []
    for name in SYSTEM:
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for name in ETC_FILES + (ETC_NETWORK if network else ()):
        path = Path("/etc") / name
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    return args


def interpreter_roots() -> list[str]:
    """The folders the interpreter needs, outside the system folders already bound."""
    roots = {sys.prefix, sys.base_prefix, str(Path(os.path.realpath(sys.executable)).parent.parent)}
    system = ("/usr", "/bin", "/lib", "/lib64", "/sbin")
    return sorted(r for r in roots if not any(r == s or r.startswith(s + "/") for s in system))


_KERNEL_READ_ONLY = ["--ro-bind-try", "/proc/sys", "/proc/sys"]
_KERNEL_READ_ONLY += ["--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger"]
"""Read-only over a fresh ``/proc``: root (uid 0, even in a user namespace mapping it to the host's
root) may write a sysctl root owns without any capability (``kernel.core_pattern`` would run a
command on the host); ``/sys`` likewise for an agent (cgroups)."""


def bwrap_command(
    command: Sequence[str],
    *,
    bwrap: str,
    workdir: Path,
    protected: Protected,
    network: bool = False,
    read: Sequence[str] = (),
    files: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    tmp_bytes: int = 1024**3,
    refused: tuple[str, ...] = (),
) -> list[str]:
    """The bubblewrap command line that runs `command` confined to `workdir`.

    Its own user, mount, pid, IPC and UTS namespaces (and network, unless `network`), no
    capabilities, an empty environment but `env`, the system read-only, a private ``/tmp``,
    `workdir` writable, then `protected`'s paths: read-only ones bound over the working folder's
    writable bind, hidden ones covered by an empty folder (or ``/dev/null`` for a file); a hidden
    folder holding `workdir` is emptied before `workdir` is bound, so only `workdir` shows in it. bwrap's
    own init process is hidden from ``/proc`` (it carries no seccomp filter: a program must not
    trace it).

    Args:
        command: the program and its arguments.
        bwrap: the bubblewrap executable.
        workdir: the folder the process may write; it starts there.
        protected: what to hide and keep read-only (see `protected_paths`).
        network: keep the host's network (for an agent that talks to its model).
        read: more folders to bind read-only (an agent's own installation).
        files: files to bind read-only, host path to path inside.
        env: the environment inside.
        tmp_bytes: the size of the private ``/tmp``.
        refused: system calls a seccomp filter refuses (`PROGRAM_REFUSED` for what runs as a
            program would); the filter reaches bubblewrap as a file on descriptor 9, opened by a
            shell that then becomes bubblewrap, as `agent_command`'s does.

    Returns:
        The argument list, `command` last.
    """
    argv = [bwrap, "--unshare-all", *(["--share-net"] if network else [])]
    if refused:
        argv += ["--seccomp", "9"]
    argv += ["--die-with-parent", "--cap-drop", "ALL", "--new-session", "--clearenv"]
    argv += system_binds(network)
    # The private /tmp comes before the interpreter's binds: a later mount hides an earlier one,
    # and the interpreter (a venv, a checkout) may itself live under /tmp.
    argv += ["--proc", "/proc", "--tmpfs", "/proc/1", *_KERNEL_READ_ONLY, "--dev", "/dev"]
    argv += ["--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"]
    argv += ["--size", str(tmp_bytes), "--tmpfs", "/tmp"]
    for root in [*interpreter_roots(), *read]:
        argv += ["--ro-bind", root, root]
    for source, target in (files or {}).items():
        argv += ["--ro-bind", source, target]
    # a hidden folder holding the working folder (a session working in the state dir) is emptied
    # first; the working folder's bind then shows that folder alone
    around = [path for path in protected.hidden if inside(workdir, path)]
    for path in around:
        argv += ["--size", "4096", "--tmpfs", str(path)]
    argv += ["--bind", str(workdir), str(workdir)]
    # each folder between the working folder and a protected path becomes a mount point, which
    # cannot be renamed: the protected path cannot be moved away and replaced
    for path in protected.ancestors(workdir):
        argv += ["--bind", str(path), str(path)]
    # after the writable bind, or it would hide them; elsewhere they are read-only or unseen already
    for path in protected.read_only:
        if inside(path, workdir):
            argv += ["--ro-bind", str(path), str(path)]
    for path in protected.hidden:
        if path in around:
            continue
        if path.is_dir():
            argv += ["--size", "4096", "--tmpfs", str(path), "--remount-ro", str(path)]
        else:
            argv += ["--ro-bind", "/dev/null", str(path)]
    argv += ["--remount-ro", "/", "--chdir", str(workdir)]
    for name, value in (env or {}).items():
        argv += ["--setenv", name, value]
    if refused:
        shell = ["/bin/sh", "-c", 'exec 9<"$0" && exec "$@"', _seccomp_file(refused)]
        return [*shell, *argv, "--", *command]
    return [*argv, "--", *command]


def _agent_system() -> list[Path]:
    """The system folders an agent gets read-only (those that are folders, not symlinks)."""
    names = (*SYSTEM, "etc", "boot")
    return [p for p in (Path("/") / n for n in names) if p.is_dir() and not p.is_symlink()]


def agent_command(command: Sequence[str], *, bwrap: str, workdir: Path, protected: Protected) -> list[str]:
    """The bubblewrap command line that runs a coding agent with tui's own paths kept from it.

    An agent needs what its user has (its credentials, its caches, the network, the tools it
    runs), so unlike a program it sees the whole file system as it is, with the user's rights and
    the network; only `protected`'s paths change: hidden ones covered by an empty folder (or
    ``/dev/null`` for a file), read-only ones bound read-only, and every folder above one bound
    onto itself (it cannot be renamed away). A hidden folder holding `workdir` is emptied first
    and `workdir` bound back, so the agent works there and sees nothing else of it.

    It runs with no capabilities (even as root), in its own pid namespace with its own ``/proc``
    (no other process, the worker's ``/proc/PID/root`` included, is in sight), its own ``/dev``
    and small ``/dev/shm``, and a seccomp filter refusing `AGENT_REFUSED` (no unmounting what
    hides tui's folders, no tracing, no keyring, bpf or perf events). The filter reaches
    bubblewrap as a file opened on descriptor 9 by a shell that then becomes bubblewrap.

    Args:
        command: the agent's command line.
        bwrap: the bubblewrap executable.
        workdir: the session's working folder.
        protected: what to hide and keep read-only (see `protected_paths`).

    Returns:
        The argument list, `command` last.
    """
    workdir = Path(os.path.realpath(workdir))
    argv = [bwrap, "--dev-bind", "/", "/", "--die-with-parent", "--unshare-pid", "--cap-drop", "ALL"]
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"]
    argv += [*_KERNEL_READ_ONLY, "--ro-bind-try", "/sys", "/sys", "--seccomp", "9"]
    # the system read-only, as it is for any user but root: root without capabilities could still
    # write /etc/ld.so.preload or /usr/bin, which the next tui would run
    system = _agent_system()
    for path in system:
        argv += ["--ro-bind", str(path), str(path)]
    # the folders above a protected path first: a later mount beneath one stays in sight
    for path in protected.ancestors(Path("/")):
        if not any(inside(path, s) for s in system) and not inside(path, workdir):
            argv += ["--bind", str(path), str(path)]
    around = protected.around()
    for path in around:
        argv += ["--size", "4096", "--tmpfs", str(path)]
    # the working folder writable (even inside a system folder), and a mount point: not renamable
    argv += ["--bind", str(workdir), str(workdir)]
    for path in protected.ancestors(workdir):
        argv += ["--bind", str(path), str(path)]
    for path in protected.read_only:
        argv += ["--ro-bind", str(path), str(path)]
    for path in protected.hidden:
        if path in around:
            continue
        if path.is_dir():
            argv += ["--size", "4096", "--tmpfs", str(path), "--remount-ro", str(path)]
        else:
            argv += ["--ro-bind", "/dev/null", str(path)]
    filter_file = _seccomp_file(AGENT_REFUSED)
    shell = ["/bin/sh", "-c", 'exec 9<"$0" && exec "$@"', filter_file]
    return [*shell, *argv, "--chdir", str(workdir), "--", *command]
