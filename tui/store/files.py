"""Checkpoints of a session's folder: what its files were at each turn's start and end.

A checkpoint is a git tree in a bare repository of the session's own, ``sessions/ID/files.git``
in the state dir, made by the real ``git`` command with its own ``GIT_DIR``, ``GIT_WORK_TREE``
and index: the folder's own ``.git`` is never read or written, and several sessions in one folder
each keep their own. Nothing of the folder can make git run code: git runs with an environment of
ours alone (no system or global config, no hooks, no fsmonitor), and the repository's
``info/attributes`` (which wins over every ``.gitattributes`` of the folder) turns off filters,
end-of-line conversion and working-tree encodings, so each file is kept and put back as its
exact bytes.

A checkpoint honours the folder's ignore files (``.gitignore``) and `DEFAULT_IGNORES`, skips a
file over the size bound and a nested repository, and says what it skipped. Git's index keeps
each file's stat information, so a checkpoint reads the folder's metadata only (``git ls-files``)
and hashes what changed; the worker's also asks inotify first (`tui.store.watch`), so a checkpoint
of a folder where nothing changed runs no git at all, and one where a few files changed reads
those alone.

Everything here blocks (it runs ``git``): the worker calls it in a thread.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tui.errors import TuiError
from tui.protocol import FilesChanged, Rewound, TurnStarted
from tui.store.journal import Journal
from tui.store.watch import FolderWatch

__all__ = [
    "DEFAULT_IGNORES",
    "EMPTY_TREE",
    "MAX_FILES",
    "MAX_FILE_SIZE",
    "Change",
    "FileCheckpoints",
    "FileHistory",
    "FilesError",
    "Snapshot",
    "file_history",
    "git_available",
]

DEFAULT_IGNORES = (
    ".git/",
    ".venv/",
    "venv/",
    "node_modules/",
    "__pycache__/",
    "*.pyc",
    ".mypy_cache/",
    ".pytest_cache/",
    ".ruff_cache/",
    ".tox/",
    ".nox/",
    ".cache/",
    ".gradle/",
    ".DS_Store",
)
"""Ignored in every folder, beside the folder's own ignore files."""
MAX_FILES = 20_000
"""A folder with more files than this (not ignored) gets no checkpoints (``[checkpoints] max_files``)."""
MAX_FILE_SIZE = 10 * 1024 * 1024
"""A file larger than this is skipped (``[checkpoints] max_file_size``)."""
_NAMED = 200
"""Past this many paths named by inotify, a checkpoint reads the whole folder (one pass is cheaper
than matching that many paths against every file)."""
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
"""Git's tree of nothing (a folder with no file kept)."""

# Highest precedence of all attributes: no filter, no end-of-line or encoding conversion, no
# ident expansion; a diff driver the folder names falls back to git's own.
_ATTRIBUTES = "* -text -filter -ident -working-tree-encoding !eol !diff !merge\n"
# Settings given on every command line as well as in the repository's own config.
_SETTINGS = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.attributesFile", "/dev/null"),
    ("core.excludesFile", "/dev/null"),
    ("core.autocrlf", "false"),
    ("core.safecrlf", "false"),
    ("core.symlinks", "true"),
    ("core.fileMode", "true"),
    ("core.quotePath", "false"),
    ("core.untrackedCache", "true"),
    ("core.splitIndex", "false"),
    ("safe.directory", "*"),
    ("gc.auto", "0"),
    ("diff.renames", "true"),
    ("color.ui", "false"),
    ("advice.addEmbeddedRepo", "false"),
    ("advice.addIgnoredFile", "false"),
)


class FilesError(TuiError):
    """Git could not do what a checkpoint or a rewind asked (it says why)."""


def git_available() -> bool:
    """Whether the ``git`` command is on ``PATH``."""
    return shutil.which("git") is not None


@dataclass(frozen=True)
class Snapshot:
    """One checkpoint: the tree of the folder's files, and what was left out of it."""

    tree: str
    skipped: tuple[str, ...] = ()
    """Paths left out, each with why (``big.iso (over 10 MB)``)."""


@dataclass(frozen=True)
class Change:
    """One path two checkpoints differ on."""

    path: str
    status: str
    """``added``, ``modified``, ``deleted``, ``renamed``, ``mode`` (only its executable bit) or
    ``type`` (a file became a link, or the other way)."""
    added: int = 0
    """Lines added (0 for a binary file)."""
    removed: int = 0
    old_path: str | None = None
    """Where a renamed file was."""
    binary: bool = False


@dataclass
class FileCheckpoints:
    """The checkpoints of one session's folder (`folder`), kept in `git_dir`."""

    git_dir: Path
    folder: Path
    max_files: int = MAX_FILES
    max_file_size: int = MAX_FILE_SIZE
    ignores: Sequence[str] = ()
    """More patterns to ignore (``[checkpoints] ignore``), after `DEFAULT_IGNORES`."""
    watch: bool = False
    """Ask inotify what changed before reading the folder (`tui.store.watch`; the worker's)."""
    last: str | None = field(default=None, init=False)
    """The tree of the last checkpoint this object took (None before the first)."""
    _made: bool = field(default=False, init=False, repr=False)
    _watch: FolderWatch | None = field(default=None, init=False, repr=False)
    _skipped: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _named: set[str] = field(default_factory=set, init=False, repr=False)
    """Paths inotify named to `unchanged`, for the next `snapshot` to read."""

    # --- running git ---------------------------------------------------------------------------
    def _env(self, index: Path | None = None, work_tree: Path | None = None) -> dict[str, str]:
        # Only what git needs: no GIT_* of the user's (GIT_EXTERNAL_DIFF would run a program), no
        # HOME or XDG_CONFIG_HOME where a config or an attributes file of theirs could be found.
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.git_dir),
            "XDG_CONFIG_HOME": str(self.git_dir),
            "LC_ALL": "C",
            "GIT_DIR": str(self.git_dir),
            "GIT_WORK_TREE": str(work_tree or self.folder),
            "GIT_INDEX_FILE": str(index or self.git_dir / "index"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_LITERAL_PATHSPECS": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_AUTHOR_NAME": "tui",
            "GIT_AUTHOR_EMAIL": "tui@localhost",
            "GIT_COMMITTER_NAME": "tui",
            "GIT_COMMITTER_EMAIL": "tui@localhost",
        }

    def _git(
        self,
        *args: str,
        stdin: bytes | None = None,
        index: Path | None = None,
        work_tree: Path | None = None,
        ok: Iterable[int] = (0,),
        bare: bool = False,
    ) -> bytes:
        command = [*_command(), *args]
        env = self._env(index, work_tree)
        if bare:
            del env["GIT_DIR"], env["GIT_WORK_TREE"], env["GIT_INDEX_FILE"]
        try:
            done = subprocess.run(
                command,
                input=stdin,
                capture_output=True,
                env=env,
                cwd=self.git_dir.parent if bare else work_tree or self.folder,
                check=False,
            )
        except OSError as exc:
            raise FilesError(
                f"git could not run ({exc.strerror or exc}); install git to keep checkpoints"
            ) from exc
        if done.returncode not in tuple(ok):
            said = done.stderr.decode(errors="replace").strip().splitlines()
            raise FilesError(f"git {args[0]} failed: {said[-1] if said else f'exit {done.returncode}'}")
        return done.stdout

    # --- setting up ----------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return (self.git_dir / "HEAD").is_file()

    def init(self) -> None:
        """Make the repository (once): bare, with its settings, attributes and ignore list."""
        if self._made:
            return
        if not self.ready:
            self.git_dir.parent.mkdir(parents=True, exist_ok=True)
            self._git("init", "-q", "--bare", str(self.git_dir), bare=True)
            for key, value in _SETTINGS:
                self._git("config", key, value)
            self._git("config", "core.bare", "false")
        info = self.git_dir / "info"
        info.mkdir(exist_ok=True)
        (info / "attributes").write_text(_ATTRIBUTES)
        (info / "exclude").write_text("\n".join([*DEFAULT_IGNORES, *self.ignores]) + "\n")
        self._made = True

    def too_big(self) -> int | None:
        """How many files the folder holds when that is more than `max_files` (counting stops
        there), else None. Ignored files are not counted."""
        self.init()
        process = subprocess.Popen(
            [*_command(), "ls-files", "-z", "--others", "--exclude-standard"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=self._env(self.git_dir / "count.index"),
            cwd=self.folder,
        )
        assert process.stdout is not None
        count = 0
        try:
            while chunk := process.stdout.read(65536):
                count += chunk.count(b"\0")
                if count > self.max_files:
                    return count
        finally:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()
            with contextlib.suppress(FileNotFoundError):
                (self.git_dir / "count.index").unlink()
        return None

    # --- checkpoints ---------------------------------------------------------------------------
    def snapshot(self, *, whole: bool = False) -> Snapshot:
        """A checkpoint of the folder as it is now.

        With `watch` on, inotify says first what changed since the last checkpoint: nothing (no
        git runs), the paths its events named (only those are read), or that the whole folder must
        be read. Reading it is one ``git ls-files`` (git's index keeps every file's stat
        information), then only the paths it found changed are hashed.

        Args:
            whole: read the whole folder whatever inotify says (a rewind's checks).

        Raises:
            FilesError: git failed (the folder is gone, the state dir's disk is full).
        """
        self.init()
        named: set[str] | None = None
        earlier, self._named = self._named, set()
        watch = self._watcher()
        if watch is not None and self.last is not None and not whole:
            named = watch.seen()
            if named is not None:
                named |= earlier
            if named is not None and not named:
                return Snapshot(self.last, tuple(self._skipped.values()))
            if named is not None and len(named) > _NAMED:
                named = None
        if watch is not None and watch.stale:
            self._watch_folders(watch)  # before the folder is read: a change from now on is seen
        # Modified, deleted and new files, in one pass over the folder's metadata (the index
        # keeps each file's stat information; `git status` would also compare it with a HEAD).
        listed_paths = sorted(named) if named is not None else []
        out = self._git(
            "ls-files", "-z", "--modified", "--deleted", "--others", "--exclude-standard",
            *(["--", *listed_paths] if named is not None else []),
        )  # fmt: skip
        if named is None:
            self._skipped = {}
        else:
            for path in named:
                self._skipped.pop(path, None)
        paths: list[str] = []
        bound = _size(self.max_file_size)
        for entry in dict.fromkeys(out.split(b"\0")):
            if not entry:
                continue
            path = os.fsdecode(entry)
            if path.endswith("/"):  # a nested repository: git would keep only a link to it
                self._skipped[path] = f"{path} (a git repository of its own)"
                continue
            with contextlib.suppress(OSError):
                st = os.lstat(self.folder / path)
                if st.st_size > self.max_file_size and not os.path.islink(self.folder / path):
                    self._skipped[path] = f"{path} (over {bound})"
                    continue
            paths.append(path)
        if paths:
            listed = b"".join(os.fsencode(p) + b"\0" for p in paths)
            # Each path named (no pathspec matching, which grows with paths times files).
            self._git("update-index", "--add", "--remove", "--replace", "-z", "--stdin", stdin=listed)
        if paths or self.last is None:
            self.last = self._git("write-tree").decode().strip()
        return Snapshot(self.last, tuple(sorted(self._skipped.values())))

    def unchanged(self) -> Snapshot | None:
        """The last checkpoint again when inotify says nothing in the folder changed since it was
        taken: no git runs and nothing blocks, so the event loop may ask (a turn that touched no
        file costs no thread). None when `snapshot` must look (what inotify named is kept for it)."""
        last = self.last
        watch = self._watcher() if self._made and last is not None else None
        if last is None or watch is None or watch.stale:
            return None
        named = watch.seen()
        if named is None:
            return None  # the whole folder is read next (`watch.stale` stays set until then)
        if named or self._named:
            self._named |= named
            return None
        return Snapshot(last, tuple(self._skipped.values()))

    def _watcher(self) -> FolderWatch | None:
        if not self.watch:
            return None
        if self._watch is None:
            self._watch = FolderWatch(self.folder)
        return self._watch if self._watch.usable else None

    def _watch_folders(self, watch: FolderWatch) -> None:
        """Watch every folder a checkpoint reads: not an ignored one, nor a repository of its own."""
        out = self._git("ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")
        ignored = {os.fsdecode(p).rstrip("/") for p in out.split(b"\0") if p.endswith(b"/")}
        folders: list[str] = []
        for top, dirs, names in os.walk(self.folder):
            relative = os.path.relpath(top, self.folder)
            relative = "" if relative == "." else relative
            if relative and ".git" in names + dirs:
                dirs[:] = []
                continue
            folders.append(relative)
            dirs[:] = [
                d
                for d in dirs
                if os.path.join(relative, d) not in ignored and not os.path.islink(os.path.join(top, d))
            ]
        watch.watch(folders)

    def close(self) -> None:
        """Stop watching the folder (its checkpoints then read it whole)."""
        if self._watch is not None:
            self._watch.close()
            self._watch = None

    def changes(self, before: str, after: str, limit: int = 500) -> list[Change]:
        """What differs from checkpoint `before` to `after`, path by path (renames found), at
        most `limit` paths."""
        if before == after:
            return []
        raw = self._git("diff-tree", "-r", "-z", "-M", "--raw", "--no-commit-id", before, after).split(b"\0")
        numbers = self._git("diff-tree", "-r", "-z", "-M", "--numstat", "--no-commit-id", before, after)
        lines = _numstat(numbers)
        out: list[Change] = []
        i = 0
        while i < len(raw) - 1 and len(out) < limit:
            head = raw[i].decode()
            if not head.startswith(":"):
                i += 1
                continue
            old_mode, new_mode, _, _, letter = head[1:].split(" ")
            if letter.startswith(("R", "C")):
                old, path = os.fsdecode(raw[i + 1]), os.fsdecode(raw[i + 2])
                i += 3
            else:
                old, path = None, os.fsdecode(raw[i + 1])
                i += 2
            status = {"A": "added", "D": "deleted", "M": "modified", "T": "type", "R": "renamed"}.get(
                letter[0], "modified"
            )
            if status == "modified" and old_mode != new_mode and lines.get(path, (0, 0, False))[:2] == (0, 0):
                status = "mode"
            added, removed, binary = lines.get(path, (0, 0, False))
            out.append(Change(path, status, added, removed, old, binary))
        return out

    def changed_paths(self, before: str, after: str) -> set[str]:
        """Every path that differs between two checkpoints (a rename is its two paths)."""
        if before == after:
            return set()
        out = self._git(
            "diff-tree", "-r", "-z", "--name-only", "--no-renames", "--no-commit-id", before, after
        )
        return {os.fsdecode(p) for p in out.split(b"\0") if p}

    def diff(self, before: str, after: str, *, stat: bool = False, paths: Sequence[str] = ()) -> str:
        """The unified diff (or ``--stat``) from checkpoint `before` to `after`."""
        how = ["--stat=100"] if stat else ["-p", "--binary"]
        out = self._git(
            "diff-tree", "-r", "-M", "--no-commit-id", "--no-textconv", "--no-ext-diff", *how, before, after,
            "--", *paths,
        )  # fmt: skip
        return out.decode(errors="replace")

    # --- putting files back --------------------------------------------------------------------
    def restore(self, tree: str, paths: Iterable[str]) -> None:
        """Put each of `paths` back as checkpoint `tree` has it: its bytes and mode, a link as a
        link; a path `tree` does not hold is removed (and folders it leaves empty)."""
        wanted = sorted(set(paths))
        if not wanted:
            return
        with _scratch_index(self.git_dir) as index:
            self._git("read-tree", tree, index=index)
            kept = {os.fsdecode(p) for p in self._git("ls-files", "-z", index=index).split(b"\0") if p}
            held = [p for p in wanted if p in kept]
            gone = [p for p in wanted if p not in kept]
            for path in sorted(gone, key=lambda p: -p.count("/")):
                if not self._within(path):
                    continue  # behind a link or a file now: nothing of the folder's is there to remove
                target = self.folder / path
                with contextlib.suppress(FileNotFoundError):
                    if stat.S_ISDIR(os.lstat(target).st_mode):
                        shutil.rmtree(target)  # it removes links, never what they point to
                    else:
                        os.unlink(target)
                parent = target.parent
                while parent != self.folder and not any(parent.iterdir()):
                    parent.rmdir()
                    parent = parent.parent
            for path in held:  # a folder now where a file goes back
                target = self.folder / path
                with contextlib.suppress(FileNotFoundError):
                    if self._within(path) and stat.S_ISDIR(os.lstat(target).st_mode):
                        shutil.rmtree(target)
            if held:
                listed = b"".join(os.fsencode(p) + b"\0" for p in held)
                self._git("checkout-index", "-f", "-z", "--stdin", stdin=listed, index=index)

    def _within(self, path: str) -> bool:
        """Whether every folder leading to `path` is a real folder of the session's folder (not a
        link a program made to somewhere else, which the worker, outside the sandbox, must not
        follow)."""
        here = self.folder
        for part in Path(path).parts[:-1]:
            here = here / part
            try:
                if not stat.S_ISDIR(os.lstat(here).st_mode):
                    return False
            except OSError:
                return False
        return True

    def materialize(self, tree: str, destination: Path) -> None:
        """Write every file of checkpoint `tree` into `destination` (a new folder)."""
        destination.mkdir(parents=True, exist_ok=True)
        with _scratch_index(self.git_dir) as index:
            self._git("read-tree", tree, index=index, work_tree=destination)
            self._git("checkout-index", "-a", "-f", index=index, work_tree=destination)

    def tree_of_folder(self) -> str:
        """The tree of the folder as it is now, as a checkpoint would keep it."""
        return self.snapshot(whole=True).tree


@dataclass
class FileHistory:
    """What a session's journal says of its files: each turn by number, and the checkpoints in
    the order they were taken (``turn``: a turn's start and end; ``rewind``: before and after one)."""

    turns: dict[int, str]
    """Turn number → turn id."""
    numbers: dict[str, int]
    steps: list[tuple[str, int, str, str]]
    """(kind, turn number, before, after), in journal order; a rewind's number is its `to_turn`."""
    changed: dict[str, FilesChanged]
    """A turn's `files_changed`, by turn id."""
    last_rewind: Rewound | None = None


def file_history(journal: Journal) -> FileHistory:
    """Read the turns, `files_changed` and `rewound` events of a journal (only those are decoded)."""
    turns: dict[int, str] = {}
    numbers: dict[str, int] = {}
    steps: list[tuple[str, int, str, str]] = []
    changed: dict[str, FilesChanged] = {}
    last: Rewound | None = None
    for position, _, typ in list(journal.heads_after(0)):
        if typ not in ("turn_started", "files_changed", "rewound"):
            continue
        try:
            event = journal.line_at(position).decode()
        except ValueError:
            continue
        if isinstance(event, TurnStarted) and event.turn_id not in numbers:
            numbers[event.turn_id] = len(numbers) + 1
            turns[numbers[event.turn_id]] = event.turn_id
        elif isinstance(event, FilesChanged) and event.turn_id in numbers:
            changed[event.turn_id] = event
            steps.append(("turn", numbers[event.turn_id], event.before, event.after))
        elif isinstance(event, Rewound):
            last = event
            if event.saved and event.after:
                steps.append(("rewind", event.to_turn, event.saved, event.after))
    return FileHistory(turns, numbers, steps, changed, last)


def _command() -> list[str]:
    """``git`` with our settings given on its command line (they win over any config file)."""
    command = ["git"]
    for key, value in _SETTINGS:
        command += ["-c", f"{key}={value}"]
    return command


@contextlib.contextmanager
def _scratch_index(git_dir: Path):  # type: ignore[no-untyped-def]
    fd, name = tempfile.mkstemp(prefix="index-", dir=git_dir)
    os.close(fd)
    os.unlink(name)  # git makes it; an empty file is not an index
    try:
        yield Path(name)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


def _numstat(data: bytes) -> dict[str, tuple[int, int, bool]]:
    """``--numstat -z`` read: path → (added, removed, binary)."""
    out: dict[str, tuple[int, int, bool]] = {}
    parts = data.split(b"\0")
    i = 0
    while i < len(parts):
        head = parts[i]
        if not head:
            i += 1
            continue
        fields = head.split(b"\t")
        if len(fields) < 3:
            i += 1
            continue
        added, removed = fields[0], fields[1]
        binary = added == b"-"
        if fields[2] == b"":  # a rename: old and new paths follow
            path = os.fsdecode(parts[i + 2]) if i + 2 < len(parts) else ""
            i += 3
        else:
            path = os.fsdecode(fields[2])
            i += 1
        out[path] = (0 if binary else int(added), 0 if binary else int(removed), binary)
    return out


def _size(size: int) -> str:
    for unit, step in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= step:
            return f"{size / step:g} {unit}"
    return f"{size} bytes"
