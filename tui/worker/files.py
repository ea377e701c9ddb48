"""The session's folder at each turn's start and end, and putting it back (docs/files.md).

`TurnFiles` takes a checkpoint (`tui.store.files.FileCheckpoints`, git in a thread, one at a time)
when a turn starts and when it ends, whatever changed the files, and writes what the turn did as
a `files_changed` event just before the turn's `turn_ended`. `rewind` puts back the paths the turns
from one on changed, as they were before it, and the conversation with them (`Agent.rewound`),
refusing to overwrite a path someone else changed since unless forced; it writes `rewound`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from tui.config import CheckpointSettings
from tui.errors import Busy, Conflict, InvalidRequest, TuiError, UnknownTurn
from tui.protocol import (
    By,
    FileChange,
    FilesChanged,
    Note,
    RewindDone,
    RewindRequest,
    Rewound,
)
from tui.protocol.wording import files_line
from tui.store.files import FileCheckpoints, FileHistory, FilesError, Snapshot, file_history
from tui.store.journal import Journal

__all__ = ["LISTED", "SOURCE", "TurnFiles", "keep_files"]

log = logging.getLogger("tui.worker")

LISTED = 500
"""The most paths an event lists (the rest are counted)."""
SOURCE = "files"
"""The source of the notes checkpoints write."""

T = TypeVar("T")


class TurnFiles:
    """The checkpoints of one session's folder, taken at its turns' starts and ends."""

    def __init__(
        self,
        store: FileCheckpoints,
        emit: Callable[[Note | FilesChanged | Rewound], object],
        journal: Journal,
    ) -> None:
        self.store = store
        self.emit = emit
        self.journal = journal
        self.off = ""
        """Why this session keeps no checkpoints (empty: it keeps them)."""
        self._lock = asyncio.Lock()
        self._prepared: asyncio.Task[None] | None = None

    async def _run(self, call: Callable[[], T]) -> T:
        async with self._lock:
            return await asyncio.to_thread(call)

    async def _snapshot(self) -> Snapshot:
        """A checkpoint now: the last one, without a thread, when inotify says nothing changed."""
        async with self._lock:
            same = self.store.unchanged()
            return same if same is not None else await asyncio.to_thread(self.store.snapshot)

    def start(self) -> None:
        """Get the store ready in the background (its first checkpoint reads every file)."""
        self._prepared = asyncio.create_task(self._prepare(), name="file checkpoints")

    async def _prepare(self) -> None:
        store = self.store
        try:
            too_many = await self._run(store.too_big)
            if too_many is not None:
                self.off = (
                    f"this session's folder ({store.folder}) holds over {store.max_files:,} files, "
                    "so no checkpoints of its files are kept and /rewind cannot put them back; "
                    "raise [checkpoints] max_files in config.toml, or start the session in a project's folder"
                )
            else:
                await self._run(store.snapshot)
        except TuiError as exc:
            self.off = f"no checkpoints of this session's files are kept: {exc}"
        if self.off:
            log.warning("%s", self.off)
            with contextlib.suppress(TuiError):
                self.emit(Note(text=self.off, source=SOURCE))

    async def _ready(self) -> bool:
        if self._prepared is not None:
            await asyncio.shield(self._prepared)
        return not self.off

    # --- turns ---------------------------------------------------------------------------------
    async def turn_started(self) -> Snapshot | None:
        """The checkpoint at a turn's start (None: none is kept)."""
        if not await self._ready():
            return None
        try:
            return await self._snapshot()
        except FilesError as exc:
            log.warning("no checkpoint at the turn's start: %s", exc)
            return None

    async def turn_ended(self, turn_id: str, before: Snapshot) -> None:
        """The checkpoint at a turn's end, and what the turn changed: a `files_changed` event."""
        try:
            after = await self._snapshot()
            changes = (
                []
                if after.tree == before.tree
                else await self._run(lambda: self.store.changes(before.tree, after.tree, LISTED + 1))
            )
        except FilesError as exc:
            log.warning("no checkpoint at the turn's end: %s", exc)
            return
        files = [
            FileChange(
                path=c.path,
                status=c.status,  # type: ignore[arg-type]
                added=c.added,
                removed=c.removed,
                old_path=c.old_path,
                binary=c.binary,
            )
            for c in changes
        ]
        more = 0
        if len(files) > LISTED:
            paths = await self._run(lambda: self.store.changed_paths(before.tree, after.tree))
            more, files = max(0, len(paths) - LISTED), files[:LISTED]
        skipped = sorted({*before.skipped, *after.skipped})
        self.emit(
            FilesChanged(
                turn_id=turn_id, before=before.tree, after=after.tree, files=files, more=more, skipped=skipped
            )
        )

    async def turn_diff(self, turn_id: str, *, stat: bool = False) -> str:
        """What turn `turn_id` did to the files, as ``tui diff --turn N`` prints it.

        Raises:
            UnknownTurn: no such turn.
            InvalidRequest: no checkpoints are kept.
        """
        if not await self._ready():
            raise InvalidRequest(self.off)
        history = file_history(self.journal)
        number = history.numbers.get(turn_id)
        if number is None:
            raise UnknownTurn(f"no turn {turn_id!r} in this session", turn_id=turn_id)
        changed = history.changed.get(turn_id)
        if changed is None:
            return (
                f"turn {number} has no checkpoint of the files (it ran before they were kept, or it runs)\n"
            )
        line = files_line(changed) or "files: none changed"
        diff = await self._run(lambda: self.store.diff(changed.before, changed.after, stat=stat))
        return f"# turn {number}: {line}\n{diff}"

    # --- rewinding -----------------------------------------------------------------------------
    async def rewind(
        self,
        request: RewindRequest,
        *,
        running: bool,
        by: By,
        told: Callable[[int, list[int]], str],
        rewound: list[tuple[int, int]],
    ) -> RewindDone:
        """Put the files back as they were before turn `request.to_turn` (or undo the last rewind).

        Args:
            running: a turn runs (refused).
            told: the agent's side (`Agent.rewound`), called once the files are back.
            rewound: the ranges of turns earlier rewinds undid.

        Raises:
            Busy: a turn runs.
            InvalidRequest: no checkpoints, or no such turn.
            Conflict: paths someone else changed since, named (``--force`` overwrites them).
        """
        if running:
            raise Busy("a turn is running; interrupt it (Esc, or tui interrupt) or wait, then rewind")
        if not await self._ready():
            raise InvalidRequest(self.off)
        history = file_history(self.journal)
        if request.undo:
            return await self._undo(history, by)
        to_turn = request.to_turn
        if to_turn is None:
            raise InvalidRequest("say which turn to rewind to: --to N (the first turn undone)")
        last_turn = max(history.turns, default=0)
        if to_turn > last_turn:
            if not last_turn:
                raise InvalidRequest(f"this session has no turn {to_turn}: no turn has run yet")
            raise InvalidRequest(f"this session has no turn {to_turn}; its last is turn {last_turn}")
        first = history.changed.get(history.turns[to_turn])
        if first is None:
            raise InvalidRequest(
                f"turn {to_turn} has no checkpoint of the files (it ran before checkpoints were kept, "
                "or its worker stopped before it ended); rewind to a later turn"
            )
        target = first.before
        start = next(k for k, step in enumerate(history.steps) if step[0] == "turn" and step[1] == to_turn)
        steps = history.steps[start:]
        undone = [n for n in range(to_turn, last_turn + 1) if not any(a <= n <= b for a, b in rewound)]
        store = self.store

        def plan() -> tuple[Snapshot, set[str], set[str]]:
            now = store.snapshot(whole=True)
            ours: set[str] = set()
            theirs: set[str] = set()
            previous: str | None = None
            for _, _, before, after in steps:
                if previous is not None:
                    theirs |= store.changed_paths(previous, before)
                ours |= store.changed_paths(before, after)
                previous = after
            if previous is not None:
                theirs |= store.changed_paths(previous, now.tree)
            return now, ours, ours & theirs

        now, paths, conflicts = await self._run(plan)
        if conflicts and not request.force:
            named = ", ".join(sorted(conflicts)[:20]) + (" …" if len(conflicts) > 20 else "")
            raise Conflict(
                f"not rewound: {len(conflicts)} path{'s' if len(conflicts) != 1 else ''} changed since by "
                f"someone else: {named}; `tui rewind ID --to {to_turn} --force` overwrites them "
                "(a checkpoint of them is kept first, and `tui rewind ID --undo` puts them back)",
                paths=sorted(conflicts),
            )

        def put_back() -> str:
            store.restore(target, paths)
            return store.snapshot(whole=True).tree

        after = await self._run(put_back)
        agent_said = told(to_turn, undone) if undone else ""
        listed = sorted(paths)
        event = Rewound(
            to_turn=to_turn,
            last_turn=last_turn,
            turns=[history.turns[n] for n in undone],
            files=listed[:LISTED],
            more=max(0, len(listed) - LISTED),
            forced=sorted(conflicts)[:LISTED],
            saved=now.tree,
            after=after,
            agent_said=agent_said,
            by=by,
        )
        written = self.emit(event)
        return RewindDone(
            seq=getattr(written, "seq", 0),
            to_turn=to_turn,
            files=listed[:LISTED],
            more=event.more,
            forced=event.forced,
            saved=now.tree,
        )

    async def _undo(self, history: FileHistory, by: By) -> RewindDone:
        last = history.last_rewind
        if last is None or not last.saved or not last.after:
            raise InvalidRequest("this session was never rewound: there is nothing to undo")
        store = self.store
        saved, after = last.saved, last.after

        def plan() -> tuple[set[str], set[str]]:
            now = store.snapshot(whole=True)
            paths = store.changed_paths(after, saved)
            return paths, paths & store.changed_paths(after, now.tree)

        paths, conflicts = await self._run(plan)
        if conflicts:
            listed = ", ".join(sorted(conflicts)[:20])
            raise Conflict(
                f"not undone: {len(conflicts)} path{'s' if len(conflicts) != 1 else ''} changed since the "
                f"rewind: {listed}",
                paths=sorted(conflicts),
            )

        def put_back() -> None:
            store.restore(saved, paths)
            store.snapshot(whole=True)

        await self._run(put_back)
        self.emit(
            Note(
                text=f"the files of the last rewind are back as they were before it ({len(paths)} paths); "
                "the conversation stays rewound",
                source=SOURCE,
                by=None,
            )
        )
        return RewindDone(seq=0, to_turn=last.to_turn, files=sorted(paths)[:LISTED], saved=saved)


# What tui keeps at the top of its state dir (never a session's files, if a session runs there).
STATE_TOP = (
    "sessions/",
    "web/",
    "relay/",
    "index.sqlite*",
    "children.lock",
    "seen.json",
    "remotes.toml",
    "tokens",
)


def keep_files(
    settings: CheckpointSettings,
    folder: Path,
    git_dir: Path,
    state_root: Path,
    emit: Callable[[Note | FilesChanged | Rewound], object],
    journal: Journal,
) -> TurnFiles | None:
    """The checkpoints of a session's folder, getting ready in the background; None when
    config.toml turns them off."""
    if not settings.enabled:
        return None
    ignores = list(settings.ignore)
    # tui's own files are never checkpointed: the state dir inside the folder, or what tui keeps
    # at its top when the state dir is the folder (every worker writes the search index there).
    with contextlib.suppress(ValueError):
        inside = state_root.resolve().relative_to(folder.resolve())
        if str(inside) != ".":
            ignores.append(f"/{inside.as_posix()}/")
        else:
            ignores.extend(f"/{name}" for name in STATE_TOP)
    store = FileCheckpoints(
        git_dir,
        folder,
        max_files=settings.max_files,
        max_file_size=settings.max_file_size,
        ignores=ignores,
        watch=True,
    )
    files = TurnFiles(store, emit, journal)
    files.start()
    return files
