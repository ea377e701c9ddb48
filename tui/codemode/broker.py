"""The broker: runs the program's tool calls in the parent process.

A call arrives from the sandbox as ``{"id", "tool", "args"}``; the broker checks the arguments
against the tool's JSON schema, awaits ``handler(**args)`` and answers ``{"id", "value"}`` or
``{"id", "error"}`` through ``reply``. A handler that finishes without suspending is answered
at once, in the same turn of the event loop, with no task: this keeps a round trip of a simple
tool near the cost of the pipe. One that suspends continues as a task that `cancel_all` cancels.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable
from typing import Any

from tui.codemode.errors import ToolError
from tui.codemode.schema import schema_complaint
from tui.codemode.types import Tool

__all__ = ["Broker"]

Reply = dict[str, Any]


class Broker:
    """Answers the tool calls of one program.

    Args:
        catalog: the tools the program may call.
        reply: sends one answer to the program; called at most once per call id.
    """

    def __init__(self, catalog: Iterable[Tool], reply: Callable[[Reply], None]) -> None:
        self.tools = {tool.name: tool for tool in catalog}
        self._reply = reply
        # each task with the handler's coroutine (when it was started here) and whether the task
        # has taken it over yet
        self._tasks: dict[asyncio.Task[None], tuple[Coroutine[Any, Any, Any] | None, list[bool]]] = {}
        self._closed = False

    @property
    def in_flight(self) -> int:
        """How many calls wait for a handler that suspended."""
        return len(self._tasks)

    def describe(self) -> list[dict[str, Any]]:
        """What the sandbox needs to make each tool a function: name, docstring, positional order."""
        return [
            {
                "name": tool.name,
                "description": tool.description,
                "properties": list((tool.parameters.get("properties") or {}).keys()),
            }
            for tool in self.tools.values()
        ]

    def call(self, call_id: Any, name: str, arguments: Any) -> None:
        """Serve one call: answer now if the handler does not suspend, else from a task.

        Args:
            call_id: the program's id of the call, echoed in the answer.
            name: the tool's name.
            arguments: the arguments by name, as decoded from JSON.
        """
        if self._closed:
            return
        tool = self.tools.get(name)
        if tool is None:
            self._answer({"id": call_id, "error": f"there is no tool named {name!r}"})
            return
        if not isinstance(arguments, dict):
            arguments = {}
        complaint = schema_complaint(arguments, tool.parameters)
        if complaint is not None:
            self._answer({"id": call_id, "error": complaint, "kind": "arguments"})
            return
        try:
            awaitable = tool.handler(**arguments)
        except Exception as exc:
            self._answer(_failure(call_id, tool, exc))
            return
        if not isinstance(awaitable, Coroutine):
            self._start(call_id, tool, awaitable, None)
            return
        coro = awaitable
        try:
            suspended = coro.send(None)
        except StopIteration as done:
            self._answer(_success(call_id, tool, done.value))
            return
        except ToolError as exc:
            self._answer({"id": call_id, "error": exc.detail})
            return
        except Exception as exc:
            self._answer(_failure(call_id, tool, exc))
            return
        self._start(call_id, tool, _resume(coro, suspended), coro)

    def _start(
        self, call_id: Any, tool: Tool, rest: Awaitable[Any], handler: Coroutine[Any, Any, Any] | None
    ) -> None:
        taken: list[bool] = [False]
        task = asyncio.get_running_loop().create_task(self._finish(call_id, tool, rest, taken))
        self._tasks[task] = (handler, taken)
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._tasks.pop(task, None)

    def cancel_all(self) -> None:
        """Cancel every call in flight and answer no more; nothing waits for the handlers."""
        self._closed = True
        for task, (handler, taken) in list(self._tasks.items()):
            if handler is not None and not taken[0]:
                # the task never ran, so cancelling it would not reach the handler, which already
                # started here: tell the handler itself (its cleanup runs, e.g. "tool ended")
                with contextlib.suppress(BaseException):
                    handler.throw(asyncio.CancelledError())
            task.cancel()

    async def _finish(self, call_id: Any, tool: Tool, rest: Awaitable[Any], taken: list[bool]) -> None:
        taken[0] = True
        try:
            value = await rest
        except ToolError as exc:
            self._answer({"id": call_id, "error": exc.detail})
        except Exception as exc:
            self._answer(_failure(call_id, tool, exc))
        else:
            self._answer(_success(call_id, tool, value))

    def _answer(self, reply: Reply) -> None:
        if not self._closed:
            self._reply(reply)


def _success(call_id: Any, tool: Tool, value: Any) -> Reply:
    if value is None or type(value) in (str, int, bool):
        return {"id": call_id, "value": value}
    try:
        return {"id": call_id, "value": json.loads(json.dumps(value, allow_nan=False))}
    except (TypeError, ValueError) as exc:
        return {"id": call_id, "error": f"{tool.name} returned a value that is not JSON ({exc})"}


def _failure(call_id: Any, tool: Tool, exc: Exception) -> Reply:
    if isinstance(exc, ToolError):
        return {"id": call_id, "error": exc.detail}
    return {"id": call_id, "error": f"{tool.name} failed: {type(exc).__name__}: {exc}"}


@types.coroutine
def _resume(coro: Coroutine[Any, Any, Any], suspended: Any) -> Generator[Any, Any, Any]:
    """Continue a coroutine that already ran up to its first suspension, inside a task."""
    while True:
        try:
            sent = yield suspended
        except BaseException as exc:
            try:
                suspended = coro.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                suspended = coro.send(sent)
            except StopIteration as done:
                return done.value
