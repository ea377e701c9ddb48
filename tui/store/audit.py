"""A session's journal checked and read for who did what, where the journal is: `tui verify` and
`tui audit` on this machine, and the web bridge's ``…/verify`` and ``…/audit`` routes that answer
them for another machine (the same models, so both print the same)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tui.errors import InvalidRequest
from tui.protocol import (
    ChildStarted,
    Note,
    QuestionAsked,
    QuestionResolved,
    Status,
    ToolOutput,
    ToolStarted,
    ToolUpdated,
    TurnEnded,
    TurnStarted,
)
from tui.protocol.events import FilesChanged, Rewound, ShareChanged
from tui.protocol.web import AuditReport, ChainView, Verified
from tui.store.chain import Verdict, verify
from tui.store.journal import Journal

__all__ = ["audit_of", "head_hash", "verified"]


def _chain(verdict: Verdict) -> ChainView:
    return ChainView(
        chained=verdict.chained,
        intact=verdict.intact,
        head=f"{verdict.head_seq}:{verdict.head}" if verdict.intact else None,
        since_seq=verdict.since if verdict.chained else None,
        problem=verdict.problem or None,
        line=verdict.line or None,
    )


def head_hash(kept: str) -> str:
    """The hash of a chain head kept elsewhere (``SEQ:HASH``, or the hash alone).

    Raises:
        InvalidRequest: it is no such head (``field`` ``head``).
    """
    want = kept.rpartition(":")[2].strip().lower()
    if len(want) != 64 or any(c not in "0123456789abcdef" for c in want):
        raise InvalidRequest(
            f"--head {kept!r}: give the SEQ:HASH an export printed (`tui audit ID`)", field="head"
        )
    return want


def verified(journal: Path, session_id: str, head: str | None = None) -> Verified:
    """Recompute the journal's chain (`tui.store.chain.verify`) and, with `head`, whether that
    head kept elsewhere is one of its links.

    Raises:
        InvalidRequest: `head` is no ``SEQ:HASH``.
    """
    want = head_hash(head) if head is not None else None
    verdict = verify(journal)
    found = want is None or not verdict.intact or want in verdict.heads
    return Verified(
        session_id=session_id,
        **_chain(verdict).model_dump(),
        head_kept=head,
        head_found=found,
        says=verdict.says(head),
    )


def _by(by: Any) -> str:
    if by is None:
        return "agent"
    return f"{by.kind}:{by.name}" if by.name else by.kind


def audit_of(journal: Path, session_id: str, shares_now: list[dict[str, Any]]) -> AuditReport:
    """Who did what in the session: prompts, answers, commands and tool calls, files changed (the
    diffs of tool output, and each turn's checkpoints: `FilesChanged`), rewinds, notes, children,
    costs, shares; with the chain's head.

    Args:
        journal: the session's ``journal.jsonl``.
        session_id: its id.
        shares_now: its shares as the web bridge's store has them now (``id``, ``name``,
            ``kind``, ``made_at``, ``revoked_at``, ``state``): a share the journal does not say
            is listed from them, marked ``in_chain: false``.
    """
    verdict = verify(journal)
    entries: list[dict[str, Any]] = []
    questions: dict[str, str] = {}
    usage: dict[str, int] = {}
    cost = ""
    shares: dict[str, dict[str, Any]] = {}
    """Each share the journal says was made or revoked, by its id."""

    def add(seq: int, at: str, what: str, by: str, **more: Any) -> None:
        entries.append({"seq": seq, "at": at, "what": what, "by": by, **more})

    with Journal.open_for_reading(journal) as reading:
        for line in reading.iter_after(0):
            try:
                event = line.decode()
            except ValueError:
                continue
            at = event.at.isoformat()
            if isinstance(event, TurnStarted):
                add(event.seq, at, "prompt", _by(event.by), turn_id=event.turn_id, text=event.prompt)
            elif isinstance(event, QuestionAsked):
                questions[event.question_id] = event.text
            elif isinstance(event, QuestionResolved):
                add(
                    event.seq,
                    at,
                    "answer",
                    _by(event.by),
                    question=questions.get(event.question_id, ""),
                    how=event.how,
                    selected=event.selected,
                    text=event.freeform,
                )
            elif isinstance(event, ToolStarted):
                add(event.seq, at, "tool", "agent", name=event.name, title=event.title, args=event.args)
            elif isinstance(event, ToolOutput) and event.diff is not None:
                add(event.seq, at, "file", "agent", path=event.diff.path)
            elif isinstance(event, ToolUpdated) and event.diffs:
                for diff in event.diffs:
                    add(event.seq, at, "file", "agent", path=diff.path)
            elif isinstance(event, FilesChanged):
                for change in event.files:
                    add(
                        event.seq,
                        at,
                        "file",
                        "agent",
                        path=change.path,
                        change=change.status,
                        turn_id=event.turn_id,
                    )
            elif isinstance(event, Rewound):
                add(event.seq, at, "rewind", _by(event.by), to_turn=event.to_turn, files=event.files)
            elif isinstance(event, Note) and event.by is not None:
                add(event.seq, at, "note", _by(event.by), text=event.text)
            elif isinstance(event, ChildStarted):
                add(event.seq, at, "child", "agent", child_id=event.child_id, prompt=event.prompt)
            elif isinstance(event, TurnEnded):
                for k, v in event.usage.items():
                    usage[k] = usage.get(k, 0) + v
                add(event.seq, at, "turn_ended", "agent", turn_id=event.turn_id, outcome=event.outcome)
            elif isinstance(event, Status) and event.cost:
                cost = event.cost
            elif isinstance(event, ShareChanged):
                add(event.seq, at, f"share_{event.change}", _by(event.by), name=event.name, kind=event.kind)
                share = shares.setdefault(
                    event.participant,
                    {"name": event.name, "kind": event.kind, "made_at": None, "revoked_at": None},
                )
                share[f"{event.change}_at"] = at
                share["in_chain"] = True
    for now in shares_now:
        # A share the journal does not say (made before tui recorded shares there, or when the
        # session's worker could not be reached) is listed from the store, marked so.
        share = shares.setdefault(now["id"], {"name": now["name"], "kind": now["kind"], "in_chain": False})
        share.setdefault("made_at", None)
        share["made_at"] = share["made_at"] or now["made_at"]
        share["revoked_at"] = share.get("revoked_at") or now["revoked_at"]
        share["state"] = now["state"]
    return AuditReport(
        session_id=session_id,
        chain=_chain(verdict),
        entries=entries,
        costs={"usage": usage, "cost": cost or None},
        shares=[{"state": "revoked" if s["revoked_at"] else "unknown", **s} for s in shares.values()],
    )
