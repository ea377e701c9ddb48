"""``tui verify ID`` and ``tui audit ID``: whether a session's journal was changed since it was
written (`tui.store.chain`), and who did what in it."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tui.errors import UsageError
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
from tui.protocol.ids import short_id
from tui.store import Journal, StatePaths, resolve_id
from tui.store.chain import Verdict, verify

__all__ = ["audit_of", "run_audit", "run_verify"]


def _session(args: argparse.Namespace) -> tuple[StatePaths, str]:
    state = StatePaths.resolve(getattr(args, "state_dir", None))
    return state, resolve_id(state, args.id)


def _chain(verdict: Verdict) -> dict[str, Any]:
    return {
        "chained": verdict.chained,
        "intact": verdict.intact,
        "head": f"{verdict.head_seq}:{verdict.head}" if verdict.intact else None,
        "since_seq": verdict.since if verdict.chained else None,
        "problem": verdict.problem or None,
        "line": verdict.line or None,
    }


def run_verify(args: argparse.Namespace) -> int:
    """``tui verify ID [--head SEQ:HASH] [--json]``: recompute the journal's chain; name the first
    line changed, removed or reordered. Exit 0 intact, 1 not (or no chain to verify)."""
    state, sid = _session(args)
    verdict = verify(state.session(sid).journal)
    kept: str | None = args.head
    held = True
    if kept is not None and verdict.intact:
        want = kept.rpartition(":")[2].strip().lower()
        if len(want) != 64:
            raise UsageError(f"--head {kept!r}: give the SEQ:HASH an export printed (`tui audit ID`)")
        held = want in verdict.heads
    ok = verdict.intact and held
    if args.json:
        print(json.dumps({"session_id": sid, **_chain(verdict), "head_kept": kept, "head_found": held}))
    elif verdict.intact and not held:
        print(
            f"tui: session {short_id(sid)}: the head {kept} kept elsewhere is not in the journal's chain: "
            "the journal was changed before it (or it is another session's)",
            file=sys.stderr,
        )
    else:
        print(f"session {short_id(sid)}: {verdict.says(kept)}", file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


def _by(by: Any) -> str:
    if by is None:
        return "agent"
    return f"{by.kind}:{by.name}" if by.name else by.kind


def audit_of(state: StatePaths, sid: str) -> dict[str, Any]:
    """Who did what in the session: prompts, answers, commands and tool calls, files changed (the
    diffs of tool output, and each turn's checkpoints: `FilesChanged`), rewinds, notes, children,
    costs, shares; with the chain's head."""
    paths = state.session(sid)
    verdict = verify(paths.journal)
    entries: list[dict[str, Any]] = []
    questions: dict[str, str] = {}
    usage: dict[str, int] = {}
    cost = ""
    shares: dict[str, dict[str, Any]] = {}
    """Each share the journal says was made or revoked, by its id."""

    def add(seq: int, at: str, what: str, by: str, **more: Any) -> None:
        entries.append({"seq": seq, "at": at, "what": what, "by": by, **more})

    with Journal.open_for_reading(paths.journal) as journal:
        for line in journal.iter_after(0):
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
    from tui.web.participants import ParticipantStore
    from tui.web.paths import WebPaths

    for p in ParticipantStore(WebPaths.of(state.root)).of_session(sid):
        # A share the journal does not say (made before tui recorded shares there, or when the
        # session's worker could not be reached) is listed from web/participants.json, marked so.
        share = shares.setdefault(p.id, {"name": p.name, "kind": p.kind, "in_chain": False})
        share.setdefault("made_at", None)
        share["made_at"] = share["made_at"] or p.created_at.isoformat()
        share["revoked_at"] = share.get("revoked_at") or (p.revoked_at.isoformat() if p.revoked_at else None)
        share["state"] = p.state()
    return {
        "session_id": sid,
        "chain": _chain(verdict),
        "entries": entries,
        "costs": {"usage": usage, "cost": cost or None},
        "shares": [{"state": "revoked" if s["revoked_at"] else "unknown", **s} for s in shares.values()],
    }


def run_audit(args: argparse.Namespace) -> int:
    """``tui audit ID [--json]``: who did what, and the chain's head (keep it elsewhere)."""
    state, sid = _session(args)
    report = audit_of(state, sid)
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=1))
        return 0
    chain = report["chain"]
    out = sys.stdout
    if chain["intact"]:
        out.write(
            f"session {short_id(sid)} · chain head {chain['head']} (keep it: `tui verify ID --head` it)\n"
        )
    elif not chain["chained"]:
        out.write(f"session {short_id(sid)} · no chain (an older tui wrote it): not verifiable\n")
    else:
        out.write(f"session {short_id(sid)} · CHAIN BROKEN: {chain['problem']}\n")
    for e in report["entries"]:
        detail = {
            k: v for k, v in e.items() if k not in ("seq", "at", "what", "by") and v not in (None, [], {})
        }
        words = " ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in detail.items())
        out.write(f"{e['seq']:>6} {e['at'][:19]} {e['by']:<18} {e['what']:<10} {words[:200]}\n")
    costs = report["costs"]
    out.write(f"costs: {costs['cost'] or 'unknown'}; tokens {json.dumps(costs['usage'])}\n")
    for s in report["shares"]:
        made = (s["made_at"] or "")[:19]
        kept = "" if s["in_chain"] else " (not in the journal's chain: web/participants.json only)"
        out.write(f"share: {s['name']} ({s['kind']}) made {made}, {s['state']}{kept}\n")
    return 0
