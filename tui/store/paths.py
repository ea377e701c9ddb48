"""Where each file of the state dir lives (spec README, "The state dir")."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from tui.config import state_dir as _config_state_dir

__all__ = [
    "MAX_SOCKET_PATH",
    "SessionPaths",
    "StatePaths",
    "is_session_id",
    "own_socket_dir",
    "socket_fallback_dirs",
    "socket_path_for",
]

MAX_SOCKET_PATH = 107
"""The longest Unix socket path the kernel takes, in bytes."""

_ID = re.compile(r"^[0-9a-f]{16}$")


def is_session_id(text: str) -> bool:
    """Whether `text` is a whole session id (16 lowercase hex characters)."""
    return bool(_ID.match(text))


@dataclass(frozen=True)
class SessionPaths:
    """The files of one session."""

    root: Path
    """``sessions/ID``."""
    session_id: str

    @property
    def record(self) -> Path:
        return self.root / "session.json"

    @property
    def journal(self) -> Path:
        return self.root / "journal.jsonl"

    @property
    def lock(self) -> Path:
        return self.root / "owner.lock"

    @property
    def sidecar(self) -> Path:
        return self.root / "worker.json"

    @property
    def turns(self) -> Path:
        return self.root / "turns"

    @property
    def checkpoint(self) -> Path:
        """The reducer's state as of one journal line (`tui.store.checkpoint`)."""
        return self.root / "checkpoint.json"

    @property
    def images(self) -> Path:
        return self.root / "images"

    @property
    def log(self) -> Path:
        return self.root / "worker.log"

    @property
    def epoch(self) -> Path:
        """The epoch of the newest worker that took the session (`tui.store.lock.EpochFence`)."""
        return self.root / "epoch"

    @property
    def secret(self) -> Path:
        """The bearer token (mode 0600) a worker's TCP bridge asks of every request, when the
        session's worker runs on a cluster (`tui.link.ray`)."""
        return self.root / "bridge.secret"

    @property
    def socket(self) -> Path:
        """Where this session's worker binds its bridge (see `socket_path_for`)."""
        return socket_path_for(self.root, self.session_id)


@dataclass(frozen=True)
class StatePaths:
    """The state dir and what is in it."""

    root: Path

    @classmethod
    def resolve(cls, override: str | os.PathLike[str] | None = None) -> StatePaths:
        """The state dir of `override`, ``$TUI_STATE_DIR`` or the platform's default (made if missing)."""
        return cls(_config_state_dir(override))

    @property
    def sessions(self) -> Path:
        return self.root / "sessions"

    def session(self, session_id: str) -> SessionPaths:
        """The paths of one session (nothing is made)."""
        return SessionPaths(self.sessions / session_id, session_id)


def socket_path_for(session_root: Path, session_id: str) -> Path:
    """The bridge socket of a session: ``sessions/ID/bridge.sock`` when that fits in 107 bytes.

    A deeper state dir puts it at ``$XDG_RUNTIME_DIR/tui/ID.sock``, else ``/tmp/tui-$UID/ID.sock``;
    that folder is made with mode 0700. `worker.json` always records the real path.
    """
    local = session_root / "bridge.sock"
    if len(os.fsencode(local)) <= MAX_SOCKET_PATH:
        return local
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    folder = socket_fallback_dirs()[0] if runtime and Path(runtime).is_dir() else socket_fallback_dirs()[-1]
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder / f"{session_id}.sock"


def socket_fallback_dirs() -> list[Path]:
    """Where bridge sockets go when ``sessions/ID/bridge.sock`` is too long: ``$XDG_RUNTIME_DIR/tui``
    (when set), then ``/tmp/tui-$UID``. Nothing is made."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    folders = [Path(runtime) / "tui"] if runtime else []
    return [*folders, Path(f"/tmp/tui-{os.getuid()}")]


def own_socket_dir() -> Path:
    """This user's folder for the sockets of tui's own connections (SSH's), made 0700 when missing:
    ``/tmp/tui-$UID``, the one socket folder every session's programs and agents have hidden
    whatever their environment says (`socket_fallback_dirs`; ``$XDG_RUNTIME_DIR`` may differ between
    a client and a worker another client started).

    Raises:
        PermissionError: the folder is not a private folder of this user's (another user made it
            first, or it is a symlink).
    """
    folder = socket_fallback_dirs()[-1]
    folder.mkdir(mode=0o700, exist_ok=True)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        said = f"{folder} is not a folder of yours (another user made it, or it is a symlink); remove it"
        raise PermissionError(13, said, str(folder))
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(folder, 0o700)
    return folder
