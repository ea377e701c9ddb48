"""The Chat Completions stream read in batches (`tui.worker.agents._chat.CoalescedStream`): chunks
that wait together are merged where nothing is lost, a lone chunk passes at once, an error comes
after the chunks before it, and closing leaves no task behind."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, cast

import pytest
from helpers import TIMEOUT
from openai import AsyncStream
from openai.types.chat import ChatCompletionChunk

from tui.worker.agents import _chat
from tui.worker.agents._chat import CoalescedStream

HANG = object()


def chunk(
    delta: dict[str, Any] | None = None, *, finish: str | None = None, **top: Any
) -> ChatCompletionChunk:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    data = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": choices,
        **top,
    }
    return ChatCompletionChunk.model_validate(data)


class Source:
    """An SDK stream whose chunks are all there at once (then, with `HANG`, nothing more)."""

    def __init__(self, *items: object) -> None:
        self.items: deque[object] = deque(items)
        self.closed = False
        self.hanging = asyncio.Event()

    async def __anext__(self) -> ChatCompletionChunk:
        if not self.items:
            raise StopAsyncIteration
        item = self.items.popleft()
        if item is HANG:
            self.hanging.set()
            await asyncio.Event().wait()
        if isinstance(item, Exception):
            raise item
        return cast(ChatCompletionChunk, item)

    async def close(self) -> None:
        self.closed = True


def coalesced(source: Source) -> CoalescedStream:
    return CoalescedStream(cast("AsyncStream[ChatCompletionChunk]", source))


def described(c: ChatCompletionChunk) -> tuple[str, object]:
    if c.usage is not None:
        return ("usage", c.usage.completion_tokens)
    choice = c.choices[0]
    if choice.finish_reason:
        return ("finish", choice.finish_reason)
    delta = choice.delta
    if delta.tool_calls:
        call = delta.tool_calls[0].function
        assert call is not None
        return ("tool", (call.name, call.arguments))
    if delta.model_extra:
        return next(iter(delta.model_extra.items()))
    return ("content", delta.content)


@pytest.fixture(autouse=True)
def _no_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop gets a turn only after the first text, whatever the machine's speed."""
    monkeypatch.setattr(_chat, "SLICE", 3600.0)


async def test_chunks_waiting_together_are_merged_by_kind_in_order() -> None:
    def tool(**function: Any) -> ChatCompletionChunk:
        return chunk({"tool_calls": [{"index": 0, "function": function}]})

    source = Source(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hel"}),
        chunk({"content": "lo "}),
        chunk({"reasoning_content": "so "}),
        chunk({"reasoning_content": "then"}),
        chunk({"content": "<think>"}),  # a thinking tag pydantic-ai matches whole: never merged
        chunk({"content": "hm"}),
        chunk({"content": "m"}),
        chunk({"content": "</think>"}),
        chunk({"content": "wor"}),
        chunk({"content": "ld"}),
        tool(name="ask_user", arguments=""),
        tool(arguments='{"question": '),
        tool(arguments='"Go?"}'),
        chunk({"content": "af"}),
        chunk({"content": "ter"}),
        chunk({}, finish="stop"),
        chunk(None, usage={"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12}),
    )
    stream = coalesced(source)
    got = [described(c) async for c in stream]
    assert got == [
        ("content", "Hel"),  # the first text is handed over alone, before the rest is read
        ("content", "lo "),
        ("reasoning_content", "so then"),
        ("content", "<think>"),
        ("content", "hmm"),
        ("content", "</think>"),
        ("content", "world"),
        ("tool", ("ask_user", "")),
        ("tool", (None, '{"question": ')),
        ("tool", (None, '"Go?"}')),
        ("content", "after"),
        ("finish", "stop"),
        ("usage", 9),
    ]
    assert stream.merged == 5  # 18 chunks in, 13 out
    await stream.close()
    assert source.closed


async def test_the_first_text_of_a_burst_is_handed_over_before_the_rest_is_read() -> None:
    """5,000 chunks already received: pydantic-ai gets the first text alone while 4,999 are
    still unread, then the rest merged."""
    source = Source(chunk({"role": "assistant"}), *(chunk({"content": "tok "}) for _ in range(5000)))
    stream = coalesced(source)
    assert described(await anext(stream)) == ("content", None)  # the role alone
    first = await anext(stream)
    assert described(first) == ("content", "tok ") and len(source.items) == 4999
    rest = [described(c) async for c in stream]
    assert "".join(str(text) for _, text in rest) == "tok " * 4999 and len(rest) < 10


async def test_nothing_behind_the_first_text_is_read_until_it_was_taken_and_more_asked_for() -> None:
    """However many turns the loop takes between pydantic-ai taking the first text and asking for
    more (the model agent sends that text to every follower meanwhile), the burst behind it stays
    unread: the reader waits for the ask, not for a number of turns."""
    source = Source(chunk({"role": "assistant"}), *(chunk({"content": "tok "}) for _ in range(5000)))
    stream = coalesced(source)
    await anext(stream)  # the role alone
    assert described(await anext(stream)) == ("content", "tok ")
    for _ in range(100):  # a follower's stream task, the server's write, the journal …
        await asyncio.sleep(0)
    assert len(source.items) == 4999  # before: the reader had read on a slice at each turn
    rest = [described(c) async for c in stream]
    assert "".join(str(text) for _, text in rest) == "tok " * 4999


async def test_whitespace_stays_alone_for_a_profile_that_drops_it_at_a_part_start() -> None:
    source = Source(chunk({"content": "\n\n"}), chunk({"content": "Hi"}), chunk({"content": "!"}))
    stream = CoalescedStream(cast("AsyncStream[ChatCompletionChunk]", source), whitespace_alone=True)
    assert [described(c) async for c in stream] == [("content", "\n\n"), ("content", "Hi!")]


async def test_a_lone_chunk_passes_at_once_and_closing_stops_the_reading() -> None:
    before = asyncio.all_tasks()
    source = Source(chunk({"content": "first"}), HANG)
    stream = coalesced(source)
    first = await asyncio.wait_for(anext(stream), TIMEOUT)  # the stream hangs after it
    assert described(first) == ("content", "first")
    assert len(asyncio.all_tasks() - before) == 1  # the reading task, waiting for more
    await asyncio.wait_for(stream.close(), TIMEOUT)
    assert source.closed and asyncio.all_tasks() - before == set()


async def test_an_interrupted_reader_leaves_no_task() -> None:
    before = asyncio.all_tasks()
    source = Source(chunk({"content": "a"}), HANG)
    stream = coalesced(source)
    got: list[ChatCompletionChunk] = []

    async def consume() -> None:
        async with stream:
            async for c in stream:
                got.append(c)

    task = asyncio.create_task(consume())
    await asyncio.wait_for(source.hanging.wait(), TIMEOUT)  # mid-stream, the reader waiting
    task.cancel()  # as an interrupt cancels the turn
    done, _ = await asyncio.wait([task], timeout=TIMEOUT)
    assert task in done and task.cancelled()
    assert source.closed and asyncio.all_tasks() - before == set()


async def test_an_error_of_the_stream_comes_after_the_chunks_before_it() -> None:
    source = Source(chunk({"content": "half "}), chunk({"content": "an answer"}), RuntimeError("overloaded"))
    stream = coalesced(source)
    assert described(await anext(stream)) == ("content", "half ")  # the first text, alone
    assert described(await anext(stream)) == ("content", "an answer")
    try:
        await anext(stream)
    except RuntimeError as exc:
        assert str(exc) == "overloaded"
    else:
        raise AssertionError("the stream's error was lost")


async def test_the_sdk_builds_one_object_per_merged_chunk_and_its_errors_stay_in_order() -> None:
    """Through the real SDK on the loopback server: a burst of 2,000 text chunks after some
    reasoning comes whole and in order, the SDK building a chunk object for each merged chunk
    only (it built one for each of the 2,000 before), and an error the server sends mid-stream
    is raised after the text before it."""
    from fake_model_server import Broken, FakeModelServer, Text
    from openai import APIError, AsyncOpenAI

    with FakeModelServer() as server:
        server.script(
            Text(["tok "] * 2000, thinking=["so ", "then"], burst=True), Broken(["half ", "an answer"])
        )
        sdk = AsyncOpenAI(api_key="none", base_url=server.url, max_retries=0)
        process = sdk._process_response_data
        built: list[object] = []

        def counting(*, data: object, cast_to: type[Any], response: Any) -> Any:
            if cast_to is ChatCompletionChunk:
                built.append(data)
            return process(data=data, cast_to=cast_to, response=response)

        sdk._process_response_data = counting  # type: ignore[method-assign]
        messages: Any = [{"role": "user", "content": "hi"}]
        source = await sdk.chat.completions.create(model="m", messages=messages, stream=True)
        got = [described(c) async for c in coalesced(cast(Source, source))]
        reasoning = "".join(str(t) for kind, t in got if kind == "reasoning_content")
        text = "".join(str(t) for kind, t in got if kind == "content" and t)
        assert reasoning == "so then" and text == "tok " * 2000 and got[-1] == ("finish", "stop")
        assert len(built) == len(got) < 100

        source = await sdk.chat.completions.create(model="m", messages=messages, stream=True)
        stream = coalesced(cast(Source, source))
        texts: list[object] = []
        with pytest.raises(APIError, match="overloaded"):
            async for c in stream:
                texts.append(described(c)[1])
        assert "".join(str(t) for t in texts if t) == "half an answer"
        await sdk.close()
