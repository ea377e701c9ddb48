"""Tools: plain functions in the program, answered by async handlers through the broker."""

from __future__ import annotations

import asyncio
from typing import Any

from tui.codemode import Limits, ProgramResult, PythonSession, Tool, ToolError

ASK_SCHEMA = {
    "type": "object",
    "properties": {
        "question": {"type": "string"},
        "options": {"type": ["array", "null"], "items": {"type": "string"}},
        "multiple": {"type": "boolean"},
    },
    "required": ["question"],
    "additionalProperties": False,
}


async def finished(session: PythonSession, result: ProgramResult) -> ProgramResult:
    """The program's last result: a loaded machine may need more than one observation."""
    while result.status == "still_working":
        result = await session.wait()
    return result


def ask_tool(calls: list[dict[str, Any]], answer: Any = "yes") -> Tool:
    async def handler(question: str, options: list[str] | None = None, multiple: bool = False) -> Any:
        calls.append({"question": question, "options": options, "multiple": multiple})
        if answer is ToolError:
            raise ToolError("dismissed")
        return answer

    return Tool("ask", "Ask the user a question.", ASK_SCHEMA, handler)


async def test_tool_is_a_plain_function_with_positional_binding(session: PythonSession) -> None:
    calls: list[dict[str, Any]] = []
    result = await session.execute(
        source="answer = ask('Deploy?', ['yes', 'no'])\nprint('got', answer)\nanswer",
        catalog=[ask_tool(calls)],
    )
    assert result.status == "completed", result.error
    assert result.value == "yes"
    assert result.output == "got yes\n"
    assert calls == [{"question": "Deploy?", "options": ["yes", "no"], "multiple": False}]


async def test_tool_keeps_its_description_as_docstring(session: PythonSession) -> None:
    result = await session.execute(source="ask.__doc__", catalog=[ask_tool([])])
    assert result.value == "Ask the user a question."


async def test_tool_returns_json_values(session: PythonSession) -> None:
    calls: list[dict[str, Any]] = []
    tool = ask_tool(calls, answer={"labels": ["a", "b"], "n": 2})
    result = await session.execute(
        source="r = ask('Pick', multiple=True)\nr['labels'][1], r['n']", catalog=[tool]
    )
    assert result.value == ["b", 2]


async def test_tool_error_is_raised_in_the_program(session: PythonSession) -> None:
    tool = ask_tool([], answer=ToolError)
    caught = await session.execute(
        source="try:\n    ask('Go?')\nexcept ToolError as e:\n    print('caught', e)\n", catalog=[tool]
    )
    assert caught.output == "caught dismissed\n"
    uncaught = await session.execute(source="ask('Go?')", catalog=[tool])
    assert uncaught.status == "error"
    assert uncaught.error is not None
    assert (uncaught.error.type, uncaught.error.message) == ("ToolError", "dismissed")
    assert "ask('Go?')" in uncaught.error.traceback
    assert "_child" not in uncaught.error.traceback


async def test_invalid_arguments_raise_with_the_schema_complaint(session: PythonSession) -> None:
    calls: list[dict[str, Any]] = []
    tool = ask_tool(calls)
    cases = {
        "ask(3)": "'question' must be a string, not integer",
        "ask()": "missing required argument 'question'",
        "ask('q', colour='red')": "unexpected argument 'colour'",
        "ask('q', ['a', 1])": "'options'[1] must be a string, not integer",
        "ask('q', None, True, 'extra')": "takes 3 positional arguments but 4 were given",
        "ask('q', question='again')": "multiple values for argument 'question'",
        "ask('q', options={1, 2})": "JSON values only",
    }
    for source, complaint in cases.items():
        result = await session.execute(source=source, catalog=[tool])
        assert result.status == "error", source
        assert result.error is not None
        assert result.error.type == "TypeError", source
        assert complaint in result.error.message, (source, result.error.message)
    assert calls == []


async def test_a_failing_handler_becomes_a_tool_error(session: PythonSession) -> None:
    async def broken(**_: Any) -> Any:
        raise KeyError("missing")

    async def odd(**_: Any) -> Any:
        return {1, 2}

    catalog = [
        Tool("broken", "fails", {"type": "object"}, broken),
        Tool("odd", "not JSON", {"type": "object"}, odd),
    ]
    failed = await session.execute(source="broken()", catalog=catalog)
    assert failed.error is not None and failed.error.type == "ToolError"
    assert "broken failed: KeyError" in failed.error.message
    strange = await session.execute(source="odd()", catalog=catalog)
    assert strange.error is not None and "not JSON" in strange.error.message


async def test_a_handler_that_suspends_is_awaited(session: PythonSession) -> None:
    async def slow(n: int) -> int:
        await asyncio.sleep(0.01)
        return n * 2

    tool = Tool("double", "doubles", {"type": "object", "properties": {"n": {"type": "integer"}}}, slow)
    result = await session.execute(source="[double(i) for i in range(5)]", catalog=[tool])
    assert result.value == [0, 2, 4, 6, 8]


async def test_many_calls_and_calls_from_threads(session: PythonSession) -> None:
    seen: list[int] = []

    async def note(n: int) -> int:
        seen.append(n)
        return n

    tool = Tool("note", "notes", {"type": "object", "properties": {"n": {"type": "integer"}}}, note)
    result = await session.execute(source="sum(note(i) for i in range(1000))", catalog=[tool])
    result = await finished(session, result)
    assert result.value == sum(range(1000))
    threaded = await session.execute(
        source=(
            "from concurrent.futures import ThreadPoolExecutor\n"
            "with ThreadPoolExecutor(4) as pool:\n"
            "    got = list(pool.map(note, range(40)))\n"
            "got == list(range(40))"
        ),
        catalog=[tool],
    )
    assert (await finished(session, threaded)).value is True
    assert sorted(seen[1000:]) == list(range(40))


async def test_tools_exist_only_for_the_program_that_lists_them(session: PythonSession) -> None:
    await session.execute(source="ask('first')", catalog=[ask_tool([])])
    result = await session.execute(source="ask('again')", catalog=[])
    assert result.status == "error"
    assert result.error is not None and "no tool named 'ask'" in result.error.message


async def test_stop_cancels_a_tool_call_in_flight(workdir: Any) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def forever(question: str) -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    schema = {"type": "object", "properties": {"question": {"type": "string"}}}
    async with PythonSession(workdir, Limits(observe_seconds=0.05)) as session:
        first = await session.execute(
            source="keep = 1\nprint('asking', flush=True)\nask('Deploy?')",
            catalog=[Tool("ask", "asks", schema, forever)],
        )
        await asyncio.wait_for(started.wait(), 5)
        stopped = await session.stop()
        assert stopped.status == "terminated"
        assert "asking\n" in first.output + stopped.output
        await asyncio.wait_for(cancelled.wait(), 5)
        assert (await session.execute(source="keep")).value == 1


async def test_cancelled_context_cancels_a_tool_call(workdir: Any) -> None:
    from tui.codemode import RunContext

    async def forever(**_: Any) -> None:
        await asyncio.Event().wait()

    context = RunContext()
    async with PythonSession(workdir, Limits(observe_seconds=5)) as session:
        asyncio.get_running_loop().call_later(0.1, context.cancel)
        result = await session.execute(
            source="wait_here()",
            catalog=[Tool("wait_here", "waits", {"type": "object"}, forever)],
            context=context,
        )
        assert result.status == "terminated"
        assert (await session.execute(source="'fine'")).value == "fine"
