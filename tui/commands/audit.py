"""``tui verify ID`` and ``tui audit ID``: whether a session's journal was changed since it was
written (`tui.store.chain`), and who did what in it; on this machine, or with ``--remote NAME``
on the machine the journal is on (its web bridge checks it there: `tui.store.audit`), printed
the same."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING

from tui.errors import InvalidRequest, UsageError
from tui.protocol.ids import short_id
from tui.protocol.web import AuditReport, Verified
from tui.store import StatePaths, resolve_id
from tui.store.audit import audit_of, head_hash, verified

if TYPE_CHECKING:
    from tui.access.remote import RemoteAccess

__all__ = ["run_audit", "run_verify"]


def _state(args: argparse.Namespace) -> StatePaths:
    return StatePaths.resolve(getattr(args, "state_dir", None))


async def _remote(args: argparse.Namespace, ask: str) -> Verified | AuditReport:
    """`ask` (``verify`` or ``audit``) of the remote the arguments name, for the session they name."""
    from tui.access.remote import open_access

    access: RemoteAccess = open_access(args.remote, getattr(args, "state_dir", None))
    try:
        sid = await access.resolve(args.id)
        return await (access.verify(sid, args.head) if ask == "verify" else access.audit(sid))
    finally:
        await access.web.close()


def run_verify(args: argparse.Namespace) -> int:
    """``tui verify ID [--head SEQ:HASH] [--json]``: recompute the journal's chain; name the first
    line changed, removed or reordered. Exit 0 intact, 1 not (or no chain to verify)."""
    kept: str | None = args.head
    if kept is not None:
        try:
            head_hash(kept)  # a head that is none is refused before anything is asked
        except InvalidRequest as exc:
            raise UsageError(str(exc)) from None
    if getattr(args, "remote", None):
        said = asyncio.run(_remote(args, "verify"))
        assert isinstance(said, Verified)
    else:
        state = _state(args)
        sid = resolve_id(state, args.id)
        said = verified(state.session(sid).journal, sid, kept)
    ok = said.intact and said.head_found
    if args.json:
        print(json.dumps(said.model_dump(exclude={"says"})))
    elif said.intact and not said.head_found:
        print(
            f"tui: session {short_id(said.session_id)}: the head {kept} kept elsewhere is not in the "
            "journal's chain: the journal was changed before it (or it is another session's)",
            file=sys.stderr,
        )
    else:
        print(f"session {short_id(said.session_id)}: {said.says}", file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


def run_audit(args: argparse.Namespace) -> int:
    """``tui audit ID [--json]``: who did what, and the chain's head (keep it elsewhere)."""
    if getattr(args, "remote", None):
        report = asyncio.run(_remote(args, "audit"))
        assert isinstance(report, AuditReport)
    else:
        from tui.web.participants import ParticipantStore, shares_now
        from tui.web.paths import WebPaths

        state = _state(args)
        sid = resolve_id(state, args.id)
        shares = shares_now(ParticipantStore(WebPaths.of(state.root)), sid)
        report = audit_of(state.session(sid).journal, sid, shares)
    if args.json:
        print(json.dumps(report.model_dump(mode="json"), ensure_ascii=False, indent=1))
        return 0
    chain = report.chain
    sid = report.session_id
    out = sys.stdout
    if chain.intact:
        out.write(f"session {short_id(sid)} · chain head {chain.head} (keep it: `tui verify ID --head` it)\n")
    elif not chain.chained:
        out.write(f"session {short_id(sid)} · no chain (an older tui wrote it): not verifiable\n")
    else:
        out.write(f"session {short_id(sid)} · CHAIN BROKEN: {chain.problem}\n")
    for e in report.entries:
        detail = {
            k: v for k, v in e.items() if k not in ("seq", "at", "what", "by") and v not in (None, [], {})
        }
        words = " ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in detail.items())
        out.write(f"{e['seq']:>6} {e['at'][:19]} {e['by']:<18} {e['what']:<10} {words[:200]}\n")
    costs = report.costs
    out.write(_costs_line(costs["cost"], costs["usage"]))
    for s in report.shares:
        made = (s["made_at"] or "")[:19]
        kept = "" if s["in_chain"] else " (not in the journal's chain: web/participants.json only)"
        out.write(f"share: {s['name']} ({s['kind']}) made {made}, {s['state']}{kept}\n")
    return 0


def _costs_line(cost: str | None, usage: dict[str, int]) -> str:
    """``costs: $0.12; tokens: 1,200 input, 300 output``, or that none was reported (a python
    session spends none; an agent may not say)."""
    tokens = ", ".join(f"{n:,} {kind.removesuffix('_tokens')}" for kind, n in usage.items() if n)
    if not cost and not tokens:
        return "costs: none reported\n"
    return f"costs: {cost or 'not reported'}; tokens: {tokens or 'none reported'}\n"
