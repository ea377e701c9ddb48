"""OpenAI Chat Completions for the model agent, its stream read in batches (`CoalescingChatModel`).

pydantic-ai's Chat Completions model turns every SDK chunk into part events through its parts
manager, which costs several times what the SDK spends parsing the chunk: a server sending one
token a chunk faster than that keeps the worker busy at about half the SDK's rate. Here a task
reads the SDK's stream as it arrives, and pydantic-ai gets, each time it asks, everything that
arrived meanwhile with consecutive text-only (or reasoning-only) chunks merged into one. A chunk
that arrives alone passes at once; anything else (a tool-call delta, a finish reason, usage,
logprobs, a refusal, a thinking tag, fields we do not know) passes as it came and ends a merge,
so nothing is reordered or lost. The merge is done on the chunks' JSON, before the SDK builds its
objects: the SDK builds one `ChatCompletionChunk` per merged chunk, not one per chunk received.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Literal, cast, overload

from openai import AsyncStream
from openai.types import chat
from openai.types.chat import ChatCompletionChunk
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIChatModelSettings
from pydantic_ai.profiles import DEFAULT_THINKING_TAGS

__all__ = ["SLICE", "CoalescedStream", "CoalescingChatModel"]

SLICE = 0.001
"""Seconds of reading a burst of chunks before the loop gets a turn (the worker's other tasks)."""


Data = dict[str, Any]
"""A chunk's JSON as the server sent it."""


def _delta(data: Data) -> Data | None:
    """The delta of `data`'s one choice, or None when it has no choice or several."""
    choices = data.get("choices")
    if type(choices) is not list or len(choices) != 1:
        return None
    choice = choices[0]
    if type(choice) is not dict:
        return None
    delta = choice.get("delta")
    return delta if type(delta) is dict else None


def _says_something(data: Data) -> bool:
    """Whether the chunk carries text, reasoning or a tool call (not only a role or nothing)."""
    choices = data.get("choices") if type(data) is dict else None
    for choice in choices if type(choices) is list else ():
        delta = choice.get("delta") if type(choice) is dict else None
        if type(delta) is dict and any(value for key, value in delta.items() if key != "role"):
            return True
    return False


class CoalescingChatModel(OpenAIChatModel):
    """pydantic-ai's Chat Completions model whose streamed chunks come merged (`CoalescedStream`)."""

    @overload
    async def _completions_create(
        self,
        messages: list[ModelMessage],
        stream: Literal[True],
        model_settings: OpenAIChatModelSettings,
        model_request_parameters: ModelRequestParameters,
    ) -> AsyncStream[ChatCompletionChunk] | ModelResponse: ...

    @overload
    async def _completions_create(
        self,
        messages: list[ModelMessage],
        stream: Literal[False],
        model_settings: OpenAIChatModelSettings,
        model_request_parameters: ModelRequestParameters,
    ) -> chat.ChatCompletion | ModelResponse: ...

    async def _completions_create(
        self,
        messages: list[ModelMessage],
        stream: bool,
        model_settings: OpenAIChatModelSettings,
        model_request_parameters: ModelRequestParameters,
    ) -> chat.ChatCompletion | AsyncStream[ChatCompletionChunk] | ModelResponse:
        parameters = model_request_parameters
        if not stream:
            return await super()._completions_create(messages, False, model_settings, parameters)
        response = await super()._completions_create(messages, True, model_settings, parameters)
        if not isinstance(response, AsyncStream):
            return response
        profile = self.profile
        fields = (profile.get("openai_chat_thinking_field"), "reasoning", "reasoning_content")
        merged = CoalescedStream(
            response,
            reasoning_fields=frozenset(f for f in fields if f),
            alone=frozenset(profile.get("thinking_tags", DEFAULT_THINKING_TAGS)),
            whitespace_alone=bool(profile.get("ignore_streamed_leading_whitespace", False)),
        )
        # pydantic-ai uses the stream as an async iterator and closes it (`close`, `async with`)
        return cast("AsyncStream[ChatCompletionChunk]", merged)


class CoalescedStream:
    """The chunks of an SDK stream, those that arrived together merged where nothing is lost by it.

    A task reads `source` into a queue; each `__anext__` takes the first chunk waiting and, when it
    carries only text (or only one field of reasoning), appends to it the text of the chunks
    after it that carry only the same, up to the first that does not. An error of the stream is
    raised after the chunks that came before it. `close` stops the task and closes `source`.

    Args:
        reasoning_fields: the delta fields read as reasoning (pydantic-ai's, and the profile's).
        alone: text that is never merged (the thinking tags pydantic-ai matches whole).
        whitespace_alone: whether whitespace-only text is never merged (a profile that drops it
            at the start of a part).
    """

    def __init__(
        self,
        source: AsyncStream[ChatCompletionChunk],
        *,
        reasoning_fields: frozenset[str] = frozenset({"reasoning", "reasoning_content"}),
        alone: frozenset[str] = frozenset(DEFAULT_THINKING_TAGS),
        whitespace_alone: bool = False,
    ) -> None:
        self.source = source
        self.reasoning_fields = reasoning_fields
        self.alone = alone
        self.whitespace_alone = whitespace_alone
        self.merged = 0
        """How many chunks were merged into others (for tests and figures)."""
        self._chunks: deque[Data] = deque()
        self._next, self._build = _reading(source)
        self._reader: asyncio.Task[None] | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._asked: asyncio.Future[None] | None = None
        """Set while the reader waits for pydantic-ai to take the first chunk that says something."""
        self._ended = False
        self._error: Exception | None = None

    # --- the reading task -------------------------------------------------------------------------
    async def _read(self) -> None:
        # The SDK parses chunks already received without handing the loop back: a burst of
        # thousands would all be parsed (tens of ms) before pydantic-ai saw the first. So nothing
        # more is read after the first chunk that says something until pydantic-ai has taken it
        # and asks for more (the model agent asks only once that text has left for every
        # follower), and later the loop gets a turn every SLICE seconds (merging goes on over
        # what each slice read).
        step = self._next
        loop = asyncio.get_running_loop()
        said = False
        turn_at = loop.time() + SLICE
        try:
            while True:
                try:
                    chunk = await step()
                except StopAsyncIteration:
                    break
                self._chunks.append(chunk)
                self._wake()
                if not said and _says_something(chunk):
                    said = True
                    self._asked = loop.create_future()
                    try:
                        await self._asked
                    finally:
                        self._asked = None
                    turn_at = loop.time() + SLICE
                elif loop.time() >= turn_at:
                    await asyncio.sleep(0)
                    turn_at = loop.time() + SLICE
        except Exception as exc:  # the SDK's own (APIError, a broken connection): raised in order
            self._error = exc
        finally:
            self._ended = True
            self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- the async iterator -----------------------------------------------------------------------
    def __aiter__(self) -> CoalescedStream:
        return self

    async def __anext__(self) -> ChatCompletionChunk:
        return self._build(await self._take())

    async def _take(self) -> Data:
        chunks = self._chunks
        if not chunks:
            asked = self._asked
            if asked is not None and not asked.done():
                asked.set_result(None)  # the reader goes on
            if self._reader is None:
                self._reader = asyncio.get_running_loop().create_task(self._read())
            while not chunks and not self._ended:
                self._waiter = asyncio.get_running_loop().create_future()
                try:
                    await self._waiter
                finally:
                    self._waiter = None
            if not chunks:
                error, self._error = self._error, None
                if error is not None:
                    raise error
                raise StopAsyncIteration
        head = chunks.popleft()
        if chunks and type(head) is dict:
            kind = self._kind(head)
            if kind is not None:
                self._merge(head, kind)
        return head

    def _kind(self, data: Data) -> str | None:
        """``content``, or the one reasoning field, that is all the chunk carries; else None."""
        if data.get("usage") is not None or data.get("moderation") is not None:
            return None
        delta = _delta(data)
        if delta is None:
            return None
        choice = data["choices"][0]
        if choice.get("finish_reason") is not None or choice.get("logprobs") is not None:
            return None
        said = [key for key, value in delta.items() if value is not None and key != "role"]
        if len(said) == 2 and delta.get("content") == "":
            said.remove("content")  # an empty text beside a reasoning field
        if len(said) != 1 or type(delta[said[0]]) is not str:
            return None  # nothing, several fields, or one that is not text (tool calls, audio)
        kind = said[0]
        if kind == "content":
            content = cast(str, delta[kind])
            if content in self.alone or (self.whitespace_alone and content.isspace()):
                return None
            return kind
        return kind if kind in self.reasoning_fields else None

    def _merge(self, head: Data, kind: str) -> None:
        """Append to `head`'s text that of the waiting chunks that carry only the same kind."""
        chunks = self._chunks
        first = head["choices"][0]
        delta = first["delta"]
        index, role = first.get("index"), delta.get("role")
        parts: list[str] = []
        while chunks:
            after = chunks[0]
            if self._kind(after) != kind or after.get("id") != head.get("id"):
                break
            choice = after["choices"][0]
            if after.get("model") != head.get("model") or choice.get("index") != index:
                break
            after_delta = choice["delta"]
            if after_delta.get("role") not in (None, role):
                break
            chunks.popleft()
            parts.append(after_delta[kind])
        if parts:
            self.merged += len(parts)
            delta[kind] = (delta.get(kind) or "") + "".join(parts)

    # --- closing ----------------------------------------------------------------------------------
    async def close(self) -> None:
        """Stop reading and close the SDK's stream (its HTTP response)."""
        reader = self._reader
        if reader is not None and not reader.done():
            reader.cancel()
            await asyncio.wait([reader])
        await self.source.close()

    async def __aenter__(self) -> CoalescedStream:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


def _reading(
    source: AsyncStream[ChatCompletionChunk],
) -> tuple[Callable[[], Awaitable[Data]], Callable[[Data], ChatCompletionChunk]]:
    """How to read `source`'s chunks as JSON, and how to build a chunk from its JSON.

    The SDK's stream builds each chunk's object from its JSON (`_process_response_data`, most of
    what reading a chunk costs); told its type is `object`, it hands the JSON over as parsed, and
    the merged chunks are built by the same call. Its own handling of the stream (``[DONE]``, an
    error sent in the stream, a broken connection) stays as it is. A stream that is not the SDK's
    as this version writes it gives its chunks as objects, read back as JSON.
    """
    client = getattr(source, "_client", None)
    response = getattr(source, "response", None)
    process = getattr(client, "_process_response_data", None)
    if getattr(source, "_cast_to", None) is ChatCompletionChunk and callable(process):
        cast(Any, source)._cast_to = object  # read when the stream's generator starts, at the first chunk

        def build(data: Data) -> ChatCompletionChunk:
            return cast(
                ChatCompletionChunk, process(data=data, cast_to=ChatCompletionChunk, response=response)
            )

        return cast("Callable[[], Awaitable[Data]]", source.__anext__), build

    async def step() -> Data:
        chunk = await source.__anext__()
        return chunk.model_dump(exclude_unset=True)

    def construct(data: Data) -> ChatCompletionChunk:
        return ChatCompletionChunk.construct(**data)

    return step, construct
