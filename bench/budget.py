"""What holding a session to its budget costs a model session (issue 43).

Run with ``.venv/bin/python bench/budget.py [REQUESTS]``: after each model request the worker
prices the turn's usage so far (`tui.worker.agents._pricing.price_of`, genai-prices' table) and
checks the limits (`tui.worker.budget.reached`). Timed per request beside a baseline of the same
run: decoding one ``turn_ended`` event (what every client does for each turn). A model request
itself takes hundreds of milliseconds; the figures say what the check adds to it.

The figures go into docs/performance.md, "Budgets".
"""

from __future__ import annotations

import statistics
import sys
import time

from pydantic_ai.usage import RunUsage

from tui.config import ModelProfile
from tui.protocol import Budget, BudgetView, TurnEnded, decode_event
from tui.worker.agents._pricing import price_of
from tui.worker.budget import reached


def _per_call(label: str, fn: object, n: int) -> float:
    assert callable(fn)
    fn()  # the first call builds what is built once (the price table, a validator)
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        rounds.append((time.perf_counter() - start) / n * 1e6)
    best = min(rounds)
    print(f"{label:<58} {best:8.1f} µs (median {statistics.median(rounds):.1f})")
    return best


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    ended = TurnEnded(turn_id="t-1", outcome="completed", reply="x" * 400, usage={"input": 1})
    line = ended.model_dump_json()
    profile = ModelProfile(provider="openai", model="gpt-4o")
    usage = RunUsage(input_tokens=20_000, output_tokens=1_000, cache_read_tokens=4_000, requests=3)
    budget = Budget(cost=0.05, tokens=100_000, turns=10, time=3600.0)

    def check() -> None:
        cost = price_of(profile, usage)
        view = BudgetView(budget=budget, cost=cost or 0.0, tokens=21_000, turns=3, time=12.0)
        reached(view)

    base = _per_call("baseline: decode one turn_ended event", lambda: decode_event(line), n)
    priced = _per_call("a request's usage priced (genai-prices) and the limits checked", check, n)
    print(f"ratio: {priced / base:.1f}x the decoding of one event, per model request")
    start = time.perf_counter()
    price_of(ModelProfile(provider="anthropic", model="claude-sonnet-4-5"), usage)
    print(f"another model's first price: {(time.perf_counter() - start) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
