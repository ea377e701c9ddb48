"""What changed in a folder since the last look, from Linux's inotify (docs/files.md).

A checkpoint asks `FolderWatch.seen` before it reads the folder: the kernel queues an event when a
file of a watched folder is written, created, removed, renamed or has its mode changed, at the
moment the call that changed it returns, so an empty queue means nothing changed and no ``git``
runs at all. Otherwise it names the paths events were about, and the checkpoint reads those alone;
when it cannot name them (a folder was made, removed or renamed, an ignore file changed, the
kernel's queue overflowed) it says so and the checkpoint reads the whole folder, after the watches
are set again (`watch`), so a change made while they are set is seen by one or the other.

Only the folders a checkpoint keeps are watched (the caller prunes ignored ones), on a local
filesystem: a network filesystem changed from another machine tells this one nothing. What
inotify never reports (a write through a shared memory map, or through a hard link from outside
the folder) is caught by the next checkpoint that reads the folder, as a rewind's always does.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import logging
import os
import struct
from collections.abc import Iterable
from pathlib import Path

__all__ = ["LOCAL_FILESYSTEMS", "FolderWatch", "filesystem_of"]

log = logging.getLogger("tui.store")

LOCAL_FILESYSTEMS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "zfs", "f2fs", "bcachefs", "jfs", "reiserfs", "overlay"}
)
"""Filesystems whose every change passes through this machine's kernel (inotify sees it)."""

_MODIFY, _ATTRIB, _CLOSE_WRITE = 0x2, 0x4, 0x8
_MOVED_FROM, _MOVED_TO, _CREATE, _DELETE = 0x40, 0x80, 0x100, 0x200
_DELETE_SELF, _MOVE_SELF = 0x400, 0x800
_OVERFLOW, _IGNORED, _ISDIR = 0x4000, 0x8000, 0x40000000
_ONLYDIR, _DONT_FOLLOW, _EXCL_UNLINK = 0x01000000, 0x02000000, 0x04000000
_MASK = (
    _MODIFY | _ATTRIB | _CLOSE_WRITE | _MOVED_FROM | _MOVED_TO | _CREATE | _DELETE | _DELETE_SELF | _MOVE_SELF
)
_FLAGS = _ONLYDIR | _DONT_FOLLOW | _EXCL_UNLINK
_HEAD = struct.Struct("iIII")
_IGNORE_FILES = {b".gitignore"}

_libc: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL | None:
    global _libc
    if _libc is None:
        with contextlib.suppress(OSError):
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    return _libc if _libc is not None and hasattr(_libc, "inotify_init1") else None


def filesystem_of(path: Path) -> str | None:
    """The type of the filesystem `path` is on (``ext4``), from ``/proc/self/mountinfo``."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
        where = str(path.resolve())
    except OSError:
        return None
    best, kind = -1, None
    for line in lines:
        fields = line.split(" ")
        try:
            point = fields[4].encode().decode("unicode_escape")
            kind_at = fields[fields.index("-") + 1]
        except (IndexError, ValueError):
            continue
        inside = where == point or where.startswith(point.rstrip("/") + "/")
        if inside and len(point) > best:
            best, kind = len(point), kind_at
    return kind


class FolderWatch:
    """The inotify watches on one folder's folders, and what their events named."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._fd = -1
        self._dirs: dict[int, bytes] = {}
        """Watch descriptor → its folder, relative to `folder` (``b""``: the folder itself)."""
        self.broken = ""
        """Why this folder cannot be watched (empty: it can)."""
        self.stale = True
        """The watches must be set again before the folder is read (`watch`)."""
        kind = filesystem_of(folder)
        if _lib() is None:
            self.broken = "inotify is not available here"
        elif kind not in LOCAL_FILESYSTEMS:
            self.broken = (
                f"the folder is on a {kind or 'unknown'} filesystem, whose changes inotify may not see"
            )

    @property
    def usable(self) -> bool:
        return not self.broken

    def watch(self, folders: Iterable[str]) -> bool:
        """Watch `folders` (relative to the folder, ``""`` for itself) from now on, dropping every
        earlier watch. False (and `broken` says why) when the kernel refuses."""
        self.close()
        lib = _lib()
        if lib is None or self.broken:
            return False
        fd = lib.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            return self._give_up(f"inotify_init1: {os.strerror(ctypes.get_errno())}")
        self._fd = fd
        for folder in folders:
            relative = os.fsencode(folder)
            wd = lib.inotify_add_watch(fd, os.fsencode(self.folder / folder), _MASK | _FLAGS)
            if wd < 0:
                said = ctypes.get_errno()
                if said in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
                    continue  # gone already, or unreadable (git cannot read it either)
                return self._give_up(f"inotify_add_watch: {os.strerror(said)}")
            self._dirs[wd] = relative
        self.stale = False
        return True

    def _give_up(self, why: str) -> bool:
        self.close()
        self.broken = f"{why} (raise fs.inotify.max_user_watches to watch big folders)"
        log.info("checkpoints read the whole folder each time: %s", self.broken)
        return False

    def seen(self) -> set[str] | None:
        """The paths events named since the last call (empty: nothing changed), or None when the
        whole folder must be read (then `stale` says whether to `watch` again first)."""
        if self._fd < 0 or self.stale:
            self.stale = True
            return None
        paths: set[str] = set()
        whole = False
        while True:
            try:
                data = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                break
            except OSError as exc:
                self._give_up(f"reading inotify: {exc.strerror or exc}")
                return None
            if not data:
                break
            at = 0
            while at + _HEAD.size <= len(data):
                wd, mask, _, length = _HEAD.unpack_from(data, at)
                name = data[at + _HEAD.size : at + _HEAD.size + length].rstrip(b"\0")
                at += _HEAD.size + length
                if (
                    mask & (_OVERFLOW | _IGNORED | _DELETE_SELF | _MOVE_SELF | _ISDIR)
                    or name in _IGNORE_FILES
                ):
                    # the folders watched are not what they were: set them again
                    whole = True
                    continue
                folder = self._dirs.get(wd)
                if folder is None or not name:
                    whole = True
                    continue
                paths.add(os.fsdecode(folder + b"/" + name if folder else name))
        if whole:
            self.stale = True
            return None
        return paths

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd = -1
        self._dirs = {}
        self.stale = True

    def __del__(self) -> None:
        self.close()
