"""Commands: diff, rewind, fork (cli.md, docs/files.md): what a session's turns did to its folder,
putting the folder and the conversation back as they were before a turn, and a new session from
there.

``tui diff`` and ``tui fork`` read the session's checkpoints in this machine's state dir;
``tui rewind`` asks the session's worker (here or through ``--remote``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tui.commands.sessions import _run, _say, open_access
from tui.errors import InvalidRequest, UsageError
from tui.protocol.ids import short_id

if TYPE_CHECKING:
    from tui.access.local import LocalAccess
    from tui.store import SessionPaths
    from tui.store.files import FileCheckpoints, FileHistory
    from tui.store.sessions import SessionRecord

__all__ = ["run_diff", "run_fork", "run_rewind"]


def _local(args: argparse.Namespace, command: str) -> LocalAccess:
    """This machine's sessions: the checkpoints are read from its state dir."""
    from tui.access.local import LocalAccess
    from tui.store import StatePaths

    if getattr(args, "remote", None):
        raise UsageError(
            f"`tui {command}` reads the session's checkpoints in this machine's state dir; "
            f"run it on the machine of the session (`ssh HOST tui {command} …`)"
        )
    return LocalAccess(StatePaths.resolve(getattr(args, "state_dir", None)))


def _store(
    state_root: Path, session_id: str
) -> tuple[SessionRecord, SessionPaths, FileCheckpoints, FileHistory]:
    """The session's record, checkpoints and file history."""
    from tui.store import Journal, StatePaths, get_session
    from tui.store.files import FileCheckpoints, file_history

    state = StatePaths(state_root)
    record = get_session(state, session_id)
    paths = state.session(session_id)
    git_dir = paths.root / "files.git"
    if not (git_dir / "HEAD").is_file():
        raise InvalidRequest(
            f"session {short_id(session_id)} keeps no checkpoints of its files (it ran before they "
            "were kept, [checkpoints] is off in config.toml, or its folder was too big)"
        )
    store = FileCheckpoints(git_dir, Path(record.working_directory))
    with Journal.open_for_reading(paths.journal) as journal:
        history = file_history(journal)
    return record, paths, store, history


def run_diff(args: argparse.Namespace) -> int:
    """``tui diff ID [--turn N] [--stat]``: what each turn did to the session's files."""
    from tui.protocol.wording import files_line

    access = _local(args, "diff")

    async def body() -> int:
        sid = await access.resolve(args.id)
        _, _, store, history = _store(access.state.root, sid)
        numbers = sorted(history.turns)
        if args.turn is not None:
            if args.turn not in history.turns:
                raise UsageError(
                    f"session {short_id(sid)} has no turn {args.turn}; it has {len(numbers)} "
                    f"(`tui transcript {short_id(sid)}` numbers them)"
                )
            numbers = [args.turn]
        out = sys.stdout
        shown = 0
        for number in numbers:
            changed = history.changed.get(history.turns[number])
            if changed is None:
                if args.turn is not None:
                    _say(f"turn {number} has no checkpoint of the files (it ran before they were kept)")
                continue
            if not changed.files and args.turn is None:
                continue
            line = files_line(changed) or "files: none changed"
            out.write(f"# turn {number}: {line}\n")
            out.write(store.diff(changed.before, changed.after, stat=args.stat))
            out.write("\n" if args.stat else "")
            shown += 1
        if not shown and args.turn is None:
            _say(f"no turn of session {short_id(sid)} changed a file")
        out.flush()
        return 0

    return _run(body)


def run_rewind(args: argparse.Namespace) -> int:
    """``tui rewind ID --to N [--force] | --undo``: the files and the conversation as before turn N."""
    from tui.protocol.messages import RewindRequest

    if args.to is None and not args.undo:
        raise UsageError(
            "say which turn to rewind to: `tui rewind ID --to N` (turn N and those after are undone)"
        )
    if args.to is not None and args.to < 1:
        raise UsageError(
            f"--to {args.to}: turns count from 1; `tui rewind {args.id} --to N` undoes turn N and those "
            f"after (`tui transcript {args.id}` numbers them)"
        )
    access = open_access(args)

    async def body() -> int:
        sid = await access.resolve(args.id)
        short = short_id(sid)
        done = await access.rewind(sid, RewindRequest(to_turn=args.to, force=args.force, undo=args.undo))
        count = len(done.files) + done.more
        files = f"{count} file{'s' if count != 1 else ''} put back" if count else "no file to put back"
        if args.undo:
            _say(f"session {short}: the files of its last rewind are back as they were before it ({files})")
            return 0
        for path in done.files:
            print(path)
        forced = f"; {len(done.forced)} changed since by someone else were overwritten" if done.forced else ""
        undo = f"; `tui rewind {short} --undo` puts the files back as they were" if count else ""
        _say(f"session {short} rewound to before turn {done.to_turn}: {files}{forced}{undo}")
        return 0

    return _run(body)


def _summary(paths_root: Path, turns: dict[int, str], before: int, rewound: list[tuple[int, int]]) -> str:
    """The turns before `before` in a few lines each: what a forked session is told came before."""
    from tui.store import TurnStore

    store = TurnStore(paths_root / "turns")
    lines: list[str] = []
    for number in sorted(turns):
        if number >= before or any(a <= number <= b for a, b in rewound):
            continue
        try:
            record = store.get(turns[number])
        except (KeyError, OSError, ValueError):
            continue
        prompt = record.prompt.strip()
        reply = record.reply.strip()
        cut = (prompt[:400] + " …") if len(prompt) > 400 else prompt
        said = (reply[:600] + " …") if len(reply) > 600 else reply
        lines.append(f"turn {number}: {cut}\n  replied: {said or '(nothing)'}")
    text = "\n".join(lines)
    return text[-12000:]


def _acp_session(session_root: Path) -> str | None:
    """The ACP session id of a session's agent (None: not an ACP session, or its agent never
    started)."""
    from tui.worker.agents.acp import STATE_FILE

    try:
        value = json.loads((session_root / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    found = value.get("session_id") if isinstance(value, dict) else None
    return found if isinstance(found, str) and found else None


def run_fork(args: argparse.Namespace) -> int:
    """``tui fork ID --at N [--dir PATH]``: a new session whose conversation is turns 1..N-1, in a
    new folder holding the files as they were before turn N."""
    from tui.protocol.messages import NoteRequest
    from tui.store import Journal, get_session

    access = _local(args, "fork")

    async def body() -> int:
        from tui.protocol import Rewound

        sid = await access.resolve(args.id)
        short = short_id(sid)
        record, paths, store, history = _store(access.state.root, sid)
        last = max(history.turns, default=0)
        at = args.at
        if at < 1 or at > last + 1:
            raise UsageError(f"--at takes a turn from 1 to {last + 1} (session {short} has {last} turns)")
        if at <= last:
            changed = history.changed.get(history.turns[at])
            if changed is None:
                raise InvalidRequest(f"turn {at} has no checkpoint of the files; fork at another turn")
            tree = changed.before
        elif history.steps:
            tree = history.steps[-1][3]
        else:
            raise InvalidRequest(f"session {short} has no checkpoint of its files yet")
        folder = Path(record.working_directory)
        target = Path(args.dir) if args.dir else folder.with_name(f"{folder.name}-fork-{short}-{at}")
        target = target.expanduser().absolute()
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise UsageError(f"{target} is not empty; name a new folder with --dir PATH")
        store.materialize(tree, target)
        rewound: list[tuple[int, int]] = []
        with Journal.open_for_reading(paths.journal) as journal:
            for position, _, typ in journal.heads_after(0):
                if typ == "rewound":
                    event = journal.line_at(position).decode()
                    if isinstance(event, Rewound):
                        rewound.append((event.to_turn, event.last_turn))
        said = (
            f"This session was forked from session {short} before its turn {at}: the files of this "
            f"folder ({target}) are as they were before that turn."
        )
        summary = _summary(paths.root, history.turns, at, rewound)
        # An ACP agent forks its own conversation where it offers session/fork (else it is told
        # the summary): its worker reads fork.json when the agent starts (worker/agents/acp.py).
        acp_session = _acp_session(paths.root)
        fork_asked = None
        if acp_session is not None:
            undone = [
                n for n in sorted(history.turns) if n >= at and not any(a <= n <= b for a, b in rewound)
            ]
            fork_asked = {
                "session_id": acp_session,
                "to_turn": at,
                "undone": undone,
                "summary": (said + " What came before, turn by turn:\n" + summary)[:60000]
                if summary
                else said,
            }

        def leave(new_id: str) -> None:
            if fork_asked is not None:
                from tui.store._atomic import write_atomic
                from tui.worker.agents.acp import FORK_FILE

                write_atomic(access.state.session(new_id).root / FORK_FILE, json.dumps(fork_asked).encode())

        new_id = await access.create(
            working_directory=str(target),
            agent=record.agent,
            model=record.model,
            parent_id=sid,
            before_start=leave,
        )
        new = get_session(access.state, new_id)
        carried = ""
        if record.agent == "model":
            from tui.worker.agents._history import MessageLog

            source = paths.root / "messages.jsonl"
            if source.is_file():
                MessageLog(source).keep_before(at, into=access.state.session(new.id).root / "messages.jsonl")
            carried = "the model's conversation of those turns is carried over"
        elif fork_asked is not None:
            carried = (
                "the agent forks its own conversation where it can (session/fork), "
                "else it is told what came before"
            )
        if not carried and summary:
            said += " What came before, turn by turn:\n" + summary
        await access.note(new_id, NoteRequest(text=said[:60000], source="fork"))
        print(new_id)
        _say(
            f"forked session {short} before turn {at} into session {short_id(new_id)} in {target}"
            f"{'; ' + carried if carried else ''}; `tui attach {short_id(new_id)}` to try another way"
        )
        return 0

    return _run(body)
