"""The confinement the program runner puts itself under inside the sandbox: without bubblewrap,
namespaces, capabilities dropped and Landlock (`confine_self`); in every sandbox, the seccomp filter
`tui.codemode.confine` built (`install_filter`).

Like ``_child.py``, which loads it by its path beside itself (the interpreter runs isolated, with no
script folder on ``sys.path``), it runs in the sandboxed interpreter with the standard library
only and never imports ``tui``.
"""

from __future__ import annotations

import ctypes
import os

TYPE_CHECKING = False  # typing stays out of the sandbox's interpreter (its memory, every session)
if TYPE_CHECKING:
    from typing import Any

# confinement without bubblewrap: namespaces, capabilities, Landlock --------------------------

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | (1 << 14) | (1 << 15)
SCOPE_ABSTRACT_UNIX = 1 << 0
SCOPE_SIGNAL = 1 << 1


def libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def fail(what: str) -> None:
    err = ctypes.get_errno()
    raise OSError(err, f"{what}: {os.strerror(err)}")


def confine_self(confine: dict[str, Any]) -> None:
    """Reach the required level without bubblewrap; raise when it cannot be reached."""
    c = libc()
    uid, gid = os.getuid(), os.getgid()
    mounts = confine.get("mounts", [])
    if uid == 0:
        if c.unshare(CLONE_NEWNET | CLONE_NEWNS) != 0:
            fail("unshare(CLONE_NEWNET | CLONE_NEWNS)")
    elif c.unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS) == 0:
        # a user namespace of our own: RLIMIT_NPROC is counted in it, and the network is ours
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"{gid} {gid} 1")
    elif mounts:
        fail("unshare(CLONE_NEWUSER) (tui's paths inside the working folder need a mount namespace)")
    else:
        # no namespace of our own: no private /dev/shm either, so none is writable
        drop_capabilities(c)
        landlock(c, confine["read"], confine["write"], confine["devices"])
        return
    make_mounts(c, mounts, confine.get("shm"))
    drop_capabilities(c)
    landlock(c, confine["read"], [*confine["write"], "/dev/shm"], confine["devices"])


def _mount(c: Any, source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    def b(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    if c.mount(b(source), b(target), b(fstype), ctypes.c_ulong(flags), b(data)) != 0:
        fail(f"mount {target}")


def _locked_flags(path: str) -> int:
    """The flags of the mount holding `path` that a remount in a user namespace must keep."""
    st = os.statvfs(path).f_flag
    flags = 0
    for st_flag, ms_flag in ((2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC), (1024, MS_NOATIME)):
        if st & st_flag:
            flags |= ms_flag
    if st & 2048:
        flags |= MS_NODIRATIME
    if st & 4096:
        flags |= MS_RELATIME
    return flags


def make_mounts(c: Any, mounts: list[list[str]], shm: int | None) -> None:
    """In our own mount namespace: ancestors bound onto themselves (not renamable), read-only
    binds, hidden folders under an empty read-only tmpfs, and a private ``/dev/shm``."""
    _mount(c, None, "/", None, MS_REC | MS_PRIVATE, None)
    for kind, path in mounts:
        if kind == "bind":
            _mount(c, path, path, None, MS_BIND | MS_REC, None)
        elif kind == "ro":
            _mount(c, path, path, None, MS_BIND | MS_REC, None)
            _mount(c, None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _locked_flags(path), None)
        elif os.path.isdir(path):
            _mount(c, "tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4096,mode=0755")
        else:
            _mount(c, "/dev/null", path, None, MS_BIND, None)
            _mount(c, None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _locked_flags(path), None)
    if shm and os.path.isdir("/dev/shm"):
        _mount(c, "tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={shm},mode=1777")


def drop_capabilities(c: Any) -> None:
    for cap in range(64):
        if c.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP; EINVAL past the last capability
            break

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [
            ("effective", ctypes.c_uint32),
            ("permitted", ctypes.c_uint32),
            ("inheritable", ctypes.c_uint32),
        ]

    header = Header(0x20080522, 0)
    data = (Data * 2)()
    if c.capset(ctypes.byref(header), ctypes.byref(data)) != 0:
        fail("capset")
    c.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL


def landlock(c: Any, read: list[str], write: list[str], devices: list[str]) -> None:
    """Allow reading the given folders, writing the workdir and tmp, and nothing else."""
    abi = c.syscall(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, VERSION)
    if abi < 1:
        fail("Landlock is not available")
    handled = (1 << 13) - 1
    if abi >= 2:
        handled |= 1 << 13  # REFER
    if abi >= 3:
        handled |= 1 << 14  # TRUNCATE
    if abi >= 5:
        handled |= 1 << 15  # IOCTL_DEV

    class Ruleset(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    ruleset = Ruleset(handled, 0, 0)
    size = 8
    if abi >= 4:
        ruleset.net = 0b11  # BIND_TCP, CONNECT_TCP: no TCP at all
        size = 16
    if abi >= 6:
        ruleset.scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL  # no signals to the parent, no abstract sockets
        size = 24
    fd = c.syscall(444, ctypes.byref(ruleset), size, 0)
    if fd < 0:
        fail("landlock_create_ruleset")
    reading = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
    rules = [(p, reading) for p in read] + [(p, handled) for p in write]
    rules += [(p, FS_READ_FILE | FS_WRITE_FILE) for p in devices]
    for path, allowed in rules:
        try:
            target = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            if not os.path.isdir(path):
                allowed &= FS_FILE_RIGHTS
            rule = PathBeneath(allowed & handled, target)
            if c.syscall(445, fd, 1, ctypes.byref(rule), 0) != 0:  # landlock_add_rule
                fail(f"landlock_add_rule({path})")
        finally:
            os.close(target)
    if c.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        fail("prctl(PR_SET_NO_NEW_PRIVS)")
    if c.syscall(446, fd, 0) != 0:  # landlock_restrict_self
        fail("landlock_restrict_self")
    os.close(fd)


# seccomp: the filter tui.codemode.confine built ---------------------------------------------


def install_filter(program: list[list[int]]) -> None:
    """Load the seccomp filter (``tui.codemode.confine.seccomp_filter``): the refused system calls
    fail with EPERM."""

    class Filter(ctypes.Structure):
        _fields_ = [
            ("code", ctypes.c_ushort),
            ("jt", ctypes.c_ubyte),
            ("jf", ctypes.c_ubyte),
            ("k", ctypes.c_uint),
        ]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]

    filters = (Filter * len(program))(*[Filter(*f) for f in program])
    prog = Program(len(program), filters)
    c = libc()
    if c.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        fail("prctl(PR_SET_NO_NEW_PRIVS)")
    if c.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        fail("prctl(PR_SET_SECCOMP)")
