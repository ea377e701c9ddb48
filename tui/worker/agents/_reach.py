"""What an ACP agent reaches: the rule that keeps tui's files from it (`protected_of`), the
bubblewrap command that confines its process (`confinement`), what its first screen says of
both (`reach`), and the files the worker reads and writes for it by the same rule (`AgentFiles`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import acp

from tui.codemode.confine import Protected, agent_command, protected_paths
from tui.worker.agent import AgentContext
from tui.worker.agents._sandbox import tui_folders_of, tui_token_files

__all__ = ["AgentFiles", "confinement", "protected_of", "reach"]


def protected_of(context: AgentContext) -> Protected:
    """What the agent may not reach, by the rule programs follow (`protected_paths`): tui's state
    dir, config dir, socket folders and token files hidden, its installation and the working
    folder's ``.git`` read-only."""
    settings = context.config.sandbox
    folders = tui_folders_of(context)
    return protected_paths(
        context.working_directory,
        hidden=[*tui_token_files(folders), *settings.hidden],
        read_only=settings.read_only,
        tui_paths_writable=settings.tui_paths_writable,
        tui_folders=folders,
    )


def confinement(context: AgentContext, protected: Protected) -> Callable[[Sequence[str]], list[str]] | None:
    """How an agent's command is confined (`agent_command`): `protected` kept from it, no
    capabilities, its own pid namespace, a seccomp filter; everything else as the user has it (the
    agent needs its credentials and the network). None without bubblewrap, or when config.toml's
    ``[sandbox] tui_paths_writable`` asks to develop tui from inside."""
    bwrap = shutil.which("bwrap")
    if bwrap is None or context.config.sandbox.tui_paths_writable:
        return None
    workdir = context.working_directory
    return lambda command: agent_command(command, bwrap=bwrap, workdir=workdir, protected=protected)


def reach(confined: bool, writable: bool) -> str:
    """What the first screen says the agent can reach."""
    if confined:
        return (
            "This agent runs as you, with your files, your credentials and the network. Kept from it, "
            "and from the files it asks tui to read or write: tui's sessions, config, sockets and the "
            "token files tui knows of are hidden; tui's installation and this folder's .git are "
            "read-only. It runs with no capabilities, sees no other process and cannot mount, trace "
            "or use bpf: it cannot read or drive other sessions, nor make the next tui or git command "
            "run its code."
        )
    why = "[sandbox] tui_paths_writable is on" if writable else "bubblewrap is not installed"
    return (
        f"This agent runs as you and reaches everything you reach, tui's own folders included "
        f"({why}); only the files it asks tui to read or write keep to tui's rule. Run only an agent "
        f"you would run in your own shell."
    )


class AgentFiles:
    """The files an agent asks the worker to read and write (``fs/read_text_file``,
    ``fs/write_text_file``): only inside the working folder, never what `protected` keeps from
    the agent's own process; each refusal is said through `note`."""

    def __init__(self, workdir: Path, protected: Protected, note: Callable[[str], None]) -> None:
        self.workdir = workdir
        self.protected = protected
        self.note = note

    def inside(self, path: str, doing: str) -> Path:
        """`path` when it is inside the working directory; else refused, and the transcript says so.

        Raises:
            RequestError: the path is outside the working directory (``..``, absolute, a symlink out).
        """
        root = self.workdir.resolve()
        target = (root / path).resolve()
        if not target.is_relative_to(root):
            self.note(f"refused the agent's {doing} of {path}: it is outside the working directory {root}")
            raise acp.RequestError.invalid_params(
                {"path": path, "reason": f"outside the session's working directory {root}"}
            )
        why = self.protected.refuses(target, write=doing == "write")
        if why is not None:
            self.note(f"refused the agent's {doing} of {path}: {why}")
            raise acp.RequestError.invalid_params({"path": path, "reason": why})
        return target

    def open_beneath(self, target: Path, write: bool) -> int:
        """Open `target` (checked by `inside`) walking down from the working folder without following
        a symlink, then check again what was opened: a folder swapped for a symlink meanwhile
        cannot lead the write elsewhere.

        Raises:
            OSError: a symlink on the way, or what was opened is out of reach.
        """
        root = self.workdir.resolve()
        parts = target.relative_to(root).parts
        if not parts:
            raise IsADirectoryError(21, "the working folder itself is not a file")
        folder = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for part in parts[:-1]:
                if write:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, dir_fd=folder)
                flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
                inner = os.open(part, flags, dir_fd=folder)
                os.close(folder)
                folder = inner
            self._check_opened(folder, root, write)
            flags = (os.O_WRONLY | os.O_CREAT) if write else os.O_RDONLY
            opened = os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=folder)
        finally:
            os.close(folder)
        try:
            self._check_opened(opened, root, write)
        except OSError:
            os.close(opened)
            raise
        return opened

    def _check_opened(self, fd: int, root: Path, write: bool) -> None:
        real = Path(os.readlink(f"/proc/self/fd/{fd}"))
        if not real.is_relative_to(root) or self.protected.refuses(real, write=write) is not None:
            raise PermissionError(13, f"{real} is out of the agent's reach")

    def read(self, path: str, line: int | None, limit: int | None) -> str:
        target = self.inside(path, "read")
        try:
            with open(self.open_beneath(target, write=False), encoding="utf-8") as file:
                text = file.read()
        except FileNotFoundError:
            # As Zed answers (a missing file opens as a new, empty buffer): agents read a path
            # before writing it, and some (Gemini CLI) fail the write on an error here.
            text = ""
        except (OSError, UnicodeDecodeError) as exc:
            raise acp.RequestError.resource_not_found(path) from exc
        if line is None and limit is None:
            return text
        lines = text.splitlines(keepends=True)
        start = max((line or 1) - 1, 0)
        return "".join(lines[start : start + limit if limit is not None else None])

    def write(self, path: str, content: str) -> None:
        target = self.inside(path, "write")
        try:
            with open(self.open_beneath(target, write=True), "w", encoding="utf-8") as file:
                file.truncate()
                file.write(content)
        except OSError as exc:
            raise acp.RequestError.internal_error({"path": path, "reason": exc.strerror or str(exc)}) from exc
