"""A session's whole transcript, read from its journal as it streams: text, Markdown or JSON lines.

The journal is read from the first event to the last, each ended turn rendered once it ends (the
one reducer, `tui.protocol.state`, keeps only the turn in progress), so memory stays bounded by
one turn whatever the session's length; ``jsonl`` is the journal's lines as they are stored.
It needs no worker: a stopped session exports the same.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from tui.protocol import (
    ChildEnded,
    ChildStarted,
    Note,
    Rewound,
    ShareChanged,
    ToolRecord,
    TurnRecord,
    WorkerLeaving,
    WorkerStarted,
)
from tui.protocol.state import SessionState, child_line, note_line, rewound_line, steps, who
from tui.protocol.wording import share_line, worker_lines
from tui.store.chain import verify
from tui.store.journal import Journal
from tui.store.sessions import SessionRecord

__all__ = ["FORMATS", "Format", "chain_head", "export"]

Format = Literal["text", "markdown", "jsonl"]
FORMATS: tuple[Format, ...] = ("text", "markdown", "jsonl")


def _why(record: TurnRecord) -> str:
    """How the turn ended, in one line (a traceback's last line: the reply has the whole of it)."""
    last = (record.error or "").strip().splitlines()[-1:] or [""]
    return f"{record.outcome}: {last[0]}" if last[0] else str(record.outcome)


def _when(at: str | None) -> str:
    return at.replace("T", " ")[:19] + " UTC" if at else ""


def _call(tool: ToolRecord) -> str:
    """A call as the transcript names it: its title, else its name (``ask`` with its question)."""
    question = tool.args.get("question")
    if not tool.title and tool.name == "ask" and isinstance(question, str) and question.strip():
        first = question.strip().splitlines()[0]
        return f"ask: {first if len(first) <= 100 else first[:99] + '…'}"
    return tool.title or tool.name


def _header(record: SessionRecord) -> str:
    """The Markdown export's head: which session, where, and what ran it."""
    agent = record.agent + (f" ({record.model})" if record.model else "")
    title = f" · {record.title}" if record.title else ""
    return (
        f"# Session {record.id[:8]}{title}\n\n"
        f"- id: `{record.id}`\n- folder: `{record.working_directory}`\n- agent: {agent}\n"
        f"- made: {record.created_at.strftime('%Y-%m-%d %H:%M:%S')} UTC\n\n"
    )


MARK = "\u276f"
"""What stands before a prompt, as in the app."""


def _text(record: TurnRecord, number: int) -> str:
    lines = [
        f"{MARK} " + record.prompt.replace("\n", "\n  "),
        f"  · turn {number} · {who(record.by)} · {_when(record.started_at)}"
        + (" · rewound" if record.rewound else ""),
    ]
    for kind, value in steps(record):  # in the order they came
        if isinstance(value, ToolRecord):
            lines.append(f"  ▸ {_call(value)} · {value.status}")
        elif kind == "line":
            lines.append(f"  {value}")
        elif value.rstrip("\n"):
            lines.append(value.rstrip("\n"))
    if record.outcome in ("failed", "interrupted"):
        lines.append(f"✗ {_why(record)}")
    elif record.outcome is None:
        lines.append("… still running")
    return "\n".join(lines) + "\n\n"


def _markdown(record: TurnRecord, number: int, program: bool) -> str:
    rewound = " · rewound" if record.rewound else ""
    parts = [f"## Turn {number} · {who(record.by)} · {_when(record.started_at)}{rewound}\n"]
    parts.append(
        f"```python\n{record.prompt}\n```\n"
        if program
        else f"> {record.prompt.replace(chr(10), chr(10) + '> ')}\n"
    )
    for kind, value in steps(record):  # in the order they came
        if isinstance(value, ToolRecord):
            parts.append(f"- `{_call(value)}` · {value.status}\n")
        elif kind == "line":
            parts.append(f"- {value}\n")
        elif value.rstrip("\n"):
            text = value.rstrip("\n")
            parts.append(f"```\n{text}\n```\n" if program else text + "\n")
    if record.outcome in ("failed", "interrupted"):
        parts.append(f"\n**{_why(record)}**\n")
    elif record.outcome is None:
        parts.append("\n*still running*\n")
    return "\n".join(parts) + "\n"


def export(
    journal_path: Path, fmt: Format, session: SessionRecord | None = None, *, shares: bool = True
) -> Iterator[str]:
    """The session's transcript in `fmt`, piece by piece (each piece a whole line or turn).

    Args:
        journal_path: the session's ``journal.jsonl``.
        fmt: ``text`` (as the terminal shows it), ``markdown``, or ``jsonl`` (the events).
        session: the session's record: Markdown starts with its id, folder and agent.
        shares: whether the shares made and revoked are in it (False: a participant's export,
            which says nothing of the other participants).
    """
    with Journal.open_for_reading(journal_path) as journal:
        if fmt == "jsonl":  # the events as stored: the chain can be recomputed from them
            for line in journal.iter_after(0):
                if shares or line.type != "share_changed":
                    yield line.raw.decode("utf-8", "replace") + "\n"
            return
        if fmt == "markdown" and session is not None:
            yield _header(session)
        state = SessionState(keep_turns=1)
        # The rewinds first: a turn a later rewind undid says so where it is shown.
        for position, _, typ in list(journal.heads_after(0)):
            if typ == "rewound":
                with contextlib.suppress(ValueError):
                    rewind = journal.line_at(position).decode()
                    if isinstance(rewind, Rewound):
                        state.rewound.append((rewind.to_turn, rewind.last_turn))
        number = 0
        program = True
        shown: set[str] = set()
        for line in journal.iter_after(0):
            try:
                event = line.decode()
            except ValueError:
                continue  # a line this version cannot read: the jsonl export still has it
            if isinstance(event, ShareChanged) and not shares:
                continue
            state.apply(event)
            if isinstance(event, WorkerStarted):
                program = event.prompt_syntax == "python"
            ended = state.ended_by(event)
            if ended is not None and ended.turn_id not in shown:
                shown.add(ended.turn_id)
                number += 1
                if state.is_rewound(ended.number or number):
                    ended = ended.model_copy(update={"rewound": True})
                yield _text(ended, number) if fmt == "text" else _markdown(ended, number, program)
            said: list[str] = []
            if state.current is not None:
                pass  # in its turn: the turn says it
            elif isinstance(event, Note):  # between turns
                said = [note_line(event) if event.by is not None else event.text]
            elif isinstance(event, WorkerStarted | WorkerLeaving):  # a worker's boundary
                said = worker_lines(event, state.turns_started)
            elif isinstance(event, ChildStarted | ChildEnded):  # a child made to an idle session
                said = [child_line(event)]
            elif isinstance(event, Rewound):
                said = [rewound_line(event)]
            elif isinstance(event, ShareChanged):
                said = [share_line(event)]
            for line_said in said:
                yield f"· {line_said}\n\n" if fmt == "text" else f"*{line_said}*\n\n"
        if state.current is not None:
            record = state.current.record()
            yield _text(record, number + 1) if fmt == "text" else _markdown(record, number + 1, program)


def chain_head(journal_path: Path) -> str:
    """The journal's chain head in words, said beside every export (`tui transcript` on stderr,
    the web bridge's export in ``X-Tui-Chain-Head``), so a copy kept elsewhere shows later that
    nothing before it changed (`tui verify ID --head`, `tui.store.chain`)."""
    verdict = verify(journal_path)
    if verdict.intact:
        return f"chain head {verdict.head_seq}:{verdict.head}"
    if not verdict.chained:
        return "no chain: an older tui wrote this journal"
    return f"the journal's chain is broken: {verdict.problem}"
