"""The owner lock: ``owner.lock`` is flock()ed by the session's one worker while it lives.

The file is never unlinked (unlinking would let a second worker lock a fresh inode while the first
still holds the old one). Asking "is a worker live" takes a shared lock without blocking and lets
go at once; a worker starting in that instant retries for a few milliseconds before giving up.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

from tui.errors import Locked
from tui.store._atomic import write_atomic
from tui.summary import lock_held

__all__ = ["EpochFence", "OwnerLock", "is_live"]


class OwnerLock:
    """The exclusive lock a worker holds for its whole life."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or refuse at once.

        Raises:
            Conflict: another worker holds it (code ``locked``).
        """
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        # A liveness probe holds a shared lock for microseconds: a few short retries ride it out.
        for attempt in range(5):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if attempt == 4:
                    os.close(fd)
                    raise Locked(
                        f"another worker holds this session ({self.path}); attach to it instead"
                    ) from None
                time.sleep(0.003)
            else:
                break
        self._fd = fd

    def release(self) -> None:
        """Let go (closing the descriptor releases the flock)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> OwnerLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def is_live(path: Path) -> bool:
    """Whether a worker holds the lock at `path` (asked without blocking)."""
    return lock_held(os.fspath(path))


class EpochFence:
    """``sessions/ID/epoch``: the epoch of the newest worker that took the session, written by
    each worker as it starts, before its ``worker_started``; a worker whose epoch is older may
    not append (`newer` says so). The owner lock already keeps a second worker out where the
    storage honours ``flock``; the fence also holds where it does not, or where a machine cut
    off from the others comes back with its worker still running.

    Args:
        path: the epoch file.
        epoch: this worker's epoch.
    """

    def __init__(self, path: Path, epoch: int) -> None:
        self.path = path
        self.epoch = epoch
        self._seen: tuple[int, int, int] | None = None

    def claim(self) -> None:
        """Write this worker's epoch (atomically: a reader sees the old number or the new)."""
        write_atomic(self.path, f"{self.epoch}\n")
        st = os.stat(self.path)
        self._seen = (st.st_ino, st.st_mtime_ns, st.st_size)

    def newer(self) -> int | None:
        """The epoch of a newer worker of the session, None while there is none: one `stat`
        while the file is unchanged, a read when it changed."""
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if key == self._seen:
            return None
        try:
            found = int(self.path.read_text(encoding="ascii").strip() or 0)
        except (OSError, ValueError):
            return None
        if found > self.epoch:
            return found
        self._seen = key
        return None
