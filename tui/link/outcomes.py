"""How a scripted turn ends: its exit code and the line stderr gets (cli.md, "Exit codes").

``tui send --wait`` and the piped surface both end a turn through `turn_ending`, so a turn means
the same exit code on either. The codes that do not come from a turn's outcome belong to the
errors that cause them (`Unanswered` 3, `WorkerGoneError` 4) and are named here from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tui.errors import BudgetReached
from tui.link.watch import TurnResult, Unanswered, WorkerGoneError
from tui.protocol.wording import stop_said

__all__ = [
    "BUDGET",
    "COMPLETED",
    "EMPTY_REPLY",
    "FAILED",
    "UNANSWERED",
    "WORKER_GONE",
    "TurnEnding",
    "turn_ending",
]

COMPLETED = 0
"""Every turn completed."""
FAILED = 1
"""A turn failed or was interrupted (and any other error)."""
UNANSWERED = Unanswered.exit_code
"""A question was left unanswered (3)."""
WORKER_GONE = WorkerGoneError.exit_code
"""The session's worker went away and did not come back (4)."""
EMPTY_REPLY = 5
"""A turn of a model-backed session completed with no reply at all (never a program's)."""
BUDGET = BudgetReached.exit_code
"""A turn stopped at the session's budget, or was refused for it (7)."""


@dataclass(frozen=True)
class TurnEnding:
    """A turn's exit code and the sentence that says how it ended."""

    code: int
    line: str


def turn_ending(
    result: TurnResult,
    reply_format: Literal["verbatim", "markdown"],
    *,
    attach: str,
    turn: str = "the turn",
) -> TurnEnding:
    """The exit code of a turn that ended as `result` says, and the line for stderr.

    Args:
        result: how the turn ended.
        reply_format: the session's (``/info``): an empty reply is exit 5 only when replies are
            a model's prose (``markdown``); a program that printed nothing completed.
        attach: the command that attaches to the session, as the user must type it.
        turn: how the line names the turn (``turn 3`` in a script).
    """
    look = f"; `{attach}` to look"
    if result.held:
        why = "the queue is held after an interrupt"
        return TurnEnding(FAILED, f"{turn} did not run: {why}; `{attach}` and /resume runs it")
    if result.outcome == "completed" and result.stop_reason == "budget":
        return TurnEnding(BUDGET, f"{turn} stopped at the session's budget; `{attach}` to raise it and go on")
    if result.outcome == "completed":
        if not result.reply and reply_format != "verbatim":
            return TurnEnding(EMPTY_REPLY, f"{turn} completed with no reply at all{look}")
        cut = stop_said(result.stop_reason)
        return TurnEnding(COMPLETED, f"{turn} completed" + (f"; {cut}" if cut else ""))
    if result.outcome == "interrupted":
        return TurnEnding(FAILED, f"{turn} was interrupted{look}")
    lines = (result.error or "failed").strip().splitlines()
    return TurnEnding(FAILED, f"{turn} failed: {lines[-1] if lines else 'failed'}{look}")
