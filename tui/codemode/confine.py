"""What a confined process must not reach, and the bubblewrap command that confines one.

tui itself must be out of reach of a program, wherever it lies: its state dir holds every
session's journal and bridge socket, its config dir the user's settings and remotes, and a
``.pth`` file written into the installation running tui would run on the host at the next ``tui``
command. The caller names tui's folders (this package knows nothing of sessions' files);
`protected_paths` adds the installation and the working folder's git hooks and config, and
`bwrap_command` mounts them, after the working folder's writable bind so that it cannot hide them.

`bwrap_command` confines any command, with or without the network, so an agent's process can be
confined by the same rules as a program.
"""

from __future__ import annotations

import os
import site
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Protected",
    "agent_command",
    "bwrap_command",
    "inside",
    "interpreter_roots",
    "protected_paths",
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
GIT_PROTECTED = (".git/hooks", ".git/config")
"""Run or read by git on the host without asking: hooks, and ``core.hooksPath``/``core.fsmonitor``."""


@dataclass(frozen=True)
class Protected:
    """The paths a confined process must not see or must not change.

    Attributes:
        hidden: folders (or files) replaced by an empty one inside the sandbox; each exists.
        read_only: folders (or files) bound read-only over whatever would make them writable.
        tui_paths_writable: whether tui's installation was left writable on purpose
            (``[sandbox] tui_paths_writable``), to develop tui from inside a session.
    """

    hidden: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    tui_paths_writable: bool = False

    def within(self, folder: Path) -> list[Path]:
        """The protected paths inside `folder` (itself included), hidden ones first."""
        return [p for p in (*self.hidden, *self.read_only) if inside(p, folder)]


def inside(path: Path, folder: Path) -> bool:
    """Whether `path` is `folder` or lies beneath it (both resolved)."""
    return path == folder or folder in path.parents


def tui_installation() -> list[Path]:
    """The folders a ``.pth`` or a changed module would run from at the next ``tui`` command.

    The interpreter's prefixes (a venv included), its site-packages (the user's too), the ``tui``
    package's folder and, for an editable install, the checkout holding it.
    """
    found = [Path(sys.prefix), Path(sys.exec_prefix), Path(sys.base_prefix), PACKAGE]
    found += [Path(p) for p in site.getsitepackages()]
    found.append(Path(site.getusersitepackages()))
    checkout = PACKAGE.parent
    if (checkout / "pyproject.toml").is_file() and PACKAGE.name == "tui":
        found.append(checkout)
    return found


def _existing(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Each path resolved, once, when it exists; a path beneath another kept too (it may be re-exposed)."""
    seen: dict[Path, None] = {}
    for raw in paths:
        path = Path(os.path.realpath(Path(raw).expanduser()))
        if path.exists():
            seen.setdefault(path, None)
    return sorted(seen, key=lambda p: (len(p.parts), str(p)))


def protected_paths(
    workdir: Path,
    *,
    hidden: Iterable[str | os.PathLike[str]] = (),
    read_only: Iterable[str | os.PathLike[str]] = (),
    tui_paths_writable: bool = False,
) -> Protected:
    """The paths to hide and to keep read-only for a process working in `workdir`, computed now.

    Args:
        workdir: the folder the process may write.
        hidden: tui's state dir, config dir and socket fallback folder, and the user's own
            additions; those that do not exist now are left out (nothing can be mounted on them).
        read_only: the user's own additions; tui's installation and the working folder's
            ``.git/hooks`` and ``.git/config`` are added here.
        tui_paths_writable: leave tui's installation writable (to develop tui inside a session).

    Returns:
        The paths, resolved, parents before children.
    """
    kept = list(read_only) + [workdir / name for name in GIT_PROTECTED]
    if not tui_paths_writable:
        kept += tui_installation()
    hide = _existing(hidden)
    # a hidden folder is empty inside: nothing beneath it needs binding read-only
    shown = [p for p in _existing(kept) if not any(inside(p, h) for h in hide)]
    return Protected(hidden=tuple(hide), read_only=tuple(shown), tui_paths_writable=tui_paths_writable)


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

    Returns:
        The argument list, `command` last.
    """
    argv = [bwrap, "--unshare-all", *(["--share-net"] if network else [])]
    argv += ["--die-with-parent", "--cap-drop", "ALL", "--new-session", "--clearenv"]
    argv += system_binds(network)
    # The private /tmp comes before the interpreter's binds: a later mount hides an earlier one,
    # and the interpreter (a venv, a checkout) may itself live under /tmp.
    argv += ["--proc", "/proc", "--tmpfs", "/proc/1", "--dev", "/dev"]
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
    return [*argv, "--", *command]


def agent_command(command: Sequence[str], *, bwrap: str, workdir: Path, protected: Protected) -> list[str]:
    """The bubblewrap command line that runs a coding agent with tui's own paths kept from it.

    An agent needs what its user has (its credentials, its caches, the network, the tools it
    runs), so unlike a program it sees the whole file system as it is, with the user's rights and
    the network; only `protected`'s paths change: hidden ones covered by an empty folder (or
    ``/dev/null`` for a file), read-only ones bound read-only. A hidden folder holding `workdir` is
    emptied first and `workdir` bound back, so the agent works there and sees nothing else of it.

    Args:
        command: the agent's command line.
        bwrap: the bubblewrap executable.
        workdir: the session's working folder.
        protected: what to hide and keep read-only (see `protected_paths`).

    Returns:
        The argument list, `command` last.
    """
    argv = [bwrap, "--dev-bind", "/", "/", "--die-with-parent"]
    for path in protected.hidden:
        if path.is_dir():
            argv += ["--size", "4096", "--tmpfs", str(path)]
        else:
            argv += ["--ro-bind", "/dev/null", str(path)]
        if inside(workdir, path):
            argv += ["--bind", str(workdir), str(workdir)]
    for path in protected.read_only:
        argv += ["--ro-bind", str(path), str(path)]
    return [*argv, "--chdir", str(workdir), "--", *command]
