"""The budget's numbers: what the reducer keeps of spend and limits, which limit is reached, and
how far "raise" lifts it (docs/agents.md, "Budgets")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tui.protocol import Budget, BudgetSet, BudgetView, ChildEnded, ChildStarted, TurnEnded, TurnStarted
from tui.protocol.state import SessionState
from tui.worker.budget import describe, raised, reached


def test_the_reducer_keeps_the_limits_and_what_turns_and_children_spent() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    state = SessionState()
    events = [
        BudgetSet(seq=1, budget=Budget(cost=0.05, turns=3)),
        TurnStarted(seq=2, turn_id="t1", prompt="go", at=start),
        TurnEnded(seq=3, turn_id="t1", outcome="completed", cost=0.02, at=start + timedelta(seconds=90)),
        TurnStarted(seq=4, turn_id="t2", prompt="", at=start + timedelta(seconds=100)),
        # a turn that waited an hour for the answer on raising the budget worked 2 s of it
        TurnEnded(
            seq=5, turn_id="t2", outcome="completed", cost=0.01, worked=2.0, at=start + timedelta(hours=1)
        ),
        ChildStarted(seq=6, child_id="c1"),
        ChildEnded(seq=7, child_id="c1", outcome="completed", cost=0.04, tokens_in=10, tokens_out=5),
    ]
    for event in events:
        state.apply(event)
    assert state.budget == Budget(cost=0.05, turns=3)
    assert round(state.spent, 6) == 0.07 and state.worked == 92.0
    assert (state.tokens_in, state.tokens_out) == (10, 5)
    restored = SessionState.model_validate_json(state.model_dump_json())  # a checkpoint keeps them
    assert restored.budget == state.budget and restored.spent == state.spent


def test_which_limit_is_reached_and_how_far_raise_lifts_it() -> None:
    view = BudgetView(budget=Budget(cost=0.05, turns=3, time=60.0), cost=0.06, turns=3, time=10.0)
    assert reached(view) == "cost $0.06 of $0.05"
    # every limit at its end is lifted (the turns too: the next turn would meet them), the rest kept
    assert raised(view) == Budget(cost=0.11, turns=6, time=60.0)
    at_turns = view.model_copy(update={"cost": 0.01})
    assert reached(at_turns) is None and reached(at_turns, starting=True) == "3 turns of 3"
    assert describe(raised(view)) == "$0.11, 6 turns, 60 s" and describe(Budget()) == "no limits"
    assert reached(view.model_copy(update={"cost": 0.0, "time": 61.0})) == "wall time 61 s of 60 s"


def test_a_child_followed_again_adds_only_what_it_spent_since_it_last_ended() -> None:
    # child_ended carries the child's totals: a child sent a second turn reports them again, whole
    state = SessionState()
    for event in [
        ChildStarted(seq=1, child_id="c1"),
        ChildEnded(seq=2, child_id="c1", outcome="completed", cost=0.04, tokens_in=10, tokens_out=5),
        ChildEnded(seq=3, child_id="c1", outcome="completed", cost=0.05, tokens_in=14, tokens_out=7),
    ]:
        state.apply(event)
    assert round(state.spent, 6) == 0.05
    assert (state.tokens_in, state.tokens_out) == (14, 7)
