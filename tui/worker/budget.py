"""A session's budget as the worker keeps it: what it spent, which limit it reached, and how
far an answer of "raise" lifts it (docs/agents.md, "Budgets").

Pure functions of the numbers: `tui.worker.control.TurnControl` reads the session's state and the
running turn, and decides when to stop a turn, refuse one, or ask to raise the limit.
"""

from __future__ import annotations

from tui.protocol import Budget, BudgetView

__all__ = ["describe", "money", "raised", "reached", "span"]


def money(usd: float) -> str:
    """``$0.05``, ``$0.0123`` for less than a cent: enough digits to tell a small spend."""
    return f"${usd:.2f}" if usd >= 0.1 or usd == 0 else f"${usd:.4f}".rstrip("0").rstrip(".")


def span(seconds: float) -> str:
    """``90 s``, ``12 min``, ``2 h 5 min``."""
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    hours, minutes = divmod(seconds // 60, 60)
    return f"{hours} h" + (f" {minutes} min" if minutes else "")


def describe(budget: Budget) -> str:
    """The limits in words (``$0.05, 3 turns``); ``no limits`` when none is set."""
    said = []
    if budget.cost is not None:
        said.append(money(budget.cost))
    if budget.tokens is not None:
        said.append(f"{budget.tokens:,} tokens")
    if budget.turns is not None:
        said.append(f"{budget.turns} turn{'s' if budget.turns != 1 else ''}")
    if budget.time is not None:
        said.append(span(budget.time))
    return ", ".join(said) or "no limits"


def reached(view: BudgetView, *, starting: bool = False) -> str | None:
    """Which limit `view` has reached, in a few words (``cost $0.06 of $0.05``); None: none.

    Args:
        starting: a new turn would start: its turns limit counts it (the limit's own turn runs).
    """
    budget = view.budget
    if budget.cost is not None and view.cost >= budget.cost:
        return f"cost {money(view.cost)} of {money(budget.cost)}"
    if budget.tokens is not None and view.tokens >= budget.tokens:
        return f"{view.tokens:,} tokens of {budget.tokens:,}"
    if starting and budget.turns is not None and view.turns >= budget.turns:
        return f"{view.turns} turns of {budget.turns}"
    if budget.time is not None and view.time >= budget.time:
        return f"wall time {span(view.time)} of {span(budget.time)}"
    return None


def raised(view: BudgetView) -> Budget:
    """The limits with each one reached lifted by as much again as it allowed (past what was
    spent): what an answer of "raise" sets."""
    budget = view.budget
    update: dict[str, float | int] = {}
    if budget.cost is not None and view.cost >= budget.cost:
        update["cost"] = round(max(view.cost, budget.cost) + budget.cost, 4)
    if budget.tokens is not None and view.tokens >= budget.tokens:
        update["tokens"] = max(view.tokens, budget.tokens) + budget.tokens
    if budget.turns is not None and view.turns >= budget.turns:
        update["turns"] = view.turns + max(budget.turns, 1)
    if budget.time is not None and view.time >= budget.time:
        update["time"] = max(view.time, budget.time) + budget.time
    return budget.model_copy(update=update)
