"""The broker on its own: validation, eager answers, suspended handlers and cancellation."""

from __future__ import annotations

import asyncio
from typing import Any

from tui.codemode import Broker, Tool, ToolError

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


async def test_a_handler_that_does_not_suspend_is_answered_at_once() -> None:
    answers: list[dict[str, Any]] = []

    async def double(n: int) -> int:
        return 2 * n

    broker = Broker([Tool("double", "doubles", SCHEMA, double)], answers.append)
    broker.call(1, "double", {"n": 21})
    assert answers == [{"id": 1, "value": 42}]
    assert broker.in_flight == 0
    assert broker.describe() == [{"name": "double", "description": "doubles", "properties": ["n"]}]


async def test_bad_arguments_unknown_tools_and_tool_errors_are_answered_as_errors() -> None:
    answers: list[dict[str, Any]] = []

    async def refuse(n: int) -> int:
        raise ToolError("dismissed")

    broker = Broker([Tool("refuse", "refuses", SCHEMA, refuse)], answers.append)
    broker.call(1, "refuse", {"n": "x"})
    broker.call(2, "missing", {})
    broker.call(3, "refuse", {"n": 1})
    assert answers == [
        {"id": 1, "error": "'n' must be an integer, not string", "kind": "arguments"},
        {"id": 2, "error": "there is no tool named 'missing'"},
        {"id": 3, "error": "dismissed"},
    ]


async def test_a_suspended_handler_answers_later_and_cancel_all_stops_it() -> None:
    answers: list[dict[str, Any]] = []
    release = asyncio.Event()
    cancelled = asyncio.Event()

    async def slow(n: int) -> int:
        try:
            await release.wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return n

    answered = asyncio.Event()

    def reply(answer: dict[str, Any]) -> None:
        answers.append(answer)
        answered.set()

    broker = Broker([Tool("slow", "waits", SCHEMA, slow)], reply)
    broker.call(1, "slow", {"n": 5})
    assert broker.in_flight == 1 and answers == []
    release.set()
    await asyncio.wait_for(answered.wait(), 1)
    assert answers == [{"id": 1, "value": 5}]
    release.clear()
    broker.call(2, "slow", {"n": 6})
    broker.cancel_all()
    await asyncio.wait_for(cancelled.wait(), 1)
    assert answers == [{"id": 1, "value": 5}]
