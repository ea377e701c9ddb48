"""A loopback model server speaking the providers' real wire formats, for tests and for trying a
model session offline.

It serves OpenAI Chat Completions (``POST /v1/chat/completions``, SSE chunks as OpenAI sends them:
text deltas, tool-call deltas, a usage chunk, ``[DONE]``), OpenAI Responses (``POST /v1/responses``:
``response.created``, ``response.output_text.delta`` … ``response.completed``) and Anthropic
Messages (``POST /v1/messages``: ``message_start`` … ``message_stop``), so the providers' own SDKs
run against it through pydantic-ai. A test scripts the replies (`FakeModelServer.script`);
unscripted requests get the default responder's reply:

- a prompt starting with ``run `` makes a ``run_python`` call with the rest as the code;
- a prompt starting with ``ask `` makes an ``ask_user`` call with the rest as the question;
- after a tool result, the reply quotes it; otherwise the reply echoes the prompt.

By hand (docs/agents.md): ``python tests/fake_model_server.py --port 8765`` and a profile
``[models.fake]`` with ``provider = "openai"``, ``base_url = "http://127.0.0.1:8765/v1"``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass
class Text:
    """A streamed text reply, in these chunks."""

    chunks: list[str]
    thinking: list[str] = field(default_factory=list)
    usage: tuple[int, int] = (12, 5)
    delay: float = 0.0
    """Seconds between chunks."""
    burst: bool = False
    """Send the whole answer in one write (as a fast server's chunks arrive together)."""
    until: threading.Event | None = None
    """When given, the chunks go in one write and the reply's end waits until this is set (a burst
    behind the first text, held open until the client has seen it)."""
    finish: str = "stop"
    """Why it ended, in OpenAI's words (``length``, ``content_filter``); Anthropic's stream says
    it in its own (``max_tokens``, ``refusal``)."""


_ANTHROPIC_STOPS = {"stop": "end_turn", "length": "max_tokens", "content_filter": "refusal"}


@dataclass
class Call:
    """A tool call (its arguments streamed in a few deltas), optionally after some text."""

    name: str
    args: dict[str, Any]
    text: str = ""
    usage: tuple[int, int] = (20, 8)
    chunks: list[str] = field(default_factory=list)
    """The text before the call in these chunks (else `text` in one)."""
    burst: bool = False
    """Send the whole answer in one write."""


@dataclass
class Fail:
    """An HTTP error answer (a 429 with ``retry-after``, a 401 …)."""

    status: int
    message: str = "error"
    headers: dict[str, str] = field(default_factory=dict)
    kind: str = "api_error"


@dataclass
class Drop:
    """Some text chunks, then the connection is cut."""

    chunks: list[str]


@dataclass
class Hang:
    """Some text chunks, then nothing until the client goes away."""

    chunks: list[str]


@dataclass
class Broken:
    """Some text chunks, then an error in the stream (as a provider reports an overload mid-reply)."""

    chunks: list[str]
    message: str = "the server is overloaded"


Reply = Text | Call | Fail | Drop | Hang | Broken


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        for part in content or []:
            if isinstance(part, dict) and part.get("type") == "text":
                return str(part.get("text", ""))
    return ""


def _tool_result(messages: list[dict[str, Any]]) -> str | None:
    """The last message's tool result, when the last message is one (OpenAI or Anthropic form)."""
    if not messages:
        return None
    last = messages[-1]
    if last.get("role") == "tool":
        return str(last.get("content", ""))
    content = last.get("content")
    if last.get("role") == "user" and isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") == "tool_result":
                inner = part.get("content")
                if isinstance(inner, list):
                    return "".join(str(p.get("text", "")) for p in inner if isinstance(p, dict))
                return str(inner)
    return None


def default_reply(messages: list[dict[str, Any]]) -> Reply:
    """What the server answers when no reply was scripted (see the module's docstring)."""
    result = _tool_result(messages)
    if result is not None:
        return Text(["The tool ", "returned:\n\n", "```\n", result.rstrip("\n"), "\n```\n"], delay=0.01)
    prompt = _last_user_text(messages).strip()
    # a prompt may carry a note before the person's words; the words are the last paragraph
    words = prompt.split("\n\n")[-1]
    if words.startswith("run "):
        return Call("run_python", {"code": words[4:]}, text="Running it.\n")
    if words.startswith("ask "):
        return Call("ask_user", {"question": words[4:], "options": ["yes", "no"]})
    return Text(["You ", "said: ", words or "(nothing)"], delay=0.01)


class FakeModelServer:
    """The server in a thread of the test process, on 127.0.0.1 and a free port."""

    def __init__(self, responder: Callable[[list[dict[str, Any]]], Reply] = default_reply) -> None:
        self.responder = responder
        self.scripted: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        """Every request body, in order."""
        self.headers: list[dict[str, str]] = []
        self.port = 0
        self.first_byte_at: list[float] = []
        """`time.monotonic()` when each streamed answer's first chunk was sent."""
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai, methods=["POST"]),
                Route("/v1/messages", self._anthropic, methods=["POST"]),
                Route("/v1/responses", self._responses, methods=["POST"]),
            ]
        )

    @property
    def url(self) -> str:
        """The base URL an OpenAI profile names (``…/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root(self) -> str:
        """The base URL an Anthropic profile names."""
        return f"http://127.0.0.1:{self.port}"

    def script(self, *replies: Reply) -> None:
        """Answer the next requests with these replies, in order."""
        self.scripted.extend(replies)

    def _next(self, messages: list[dict[str, Any]]) -> Reply:
        return self.scripted.popleft() if self.scripted else self.responder(messages)

    def start(self, port: int = 0) -> FakeModelServer:
        config = uvicorn.Config(self.app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        started = threading.Event()

        def run() -> None:
            assert self._server is not None
            asyncio.run(self._serve(started))

        self._thread = threading.Thread(target=run, name="fake-model-server", daemon=True)
        self._thread.start()
        if not started.wait(20):
            raise RuntimeError("the fake model server did not start")
        return self

    async def _serve(self, started: threading.Event) -> None:
        assert self._server is not None
        server = self._server
        task = asyncio.create_task(server.serve())
        while not server.started:
            if task.done():
                task.result()
                return
            await asyncio.sleep(0.005)
        self.port = server.servers[0].sockets[0].getsockname()[1]
        started.set()
        await task

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- OpenAI Chat Completions ------------------------------------------------------------------
    async def _openai(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        reply = self._next(body.get("messages", []))
        if isinstance(reply, Fail):
            error = {"error": {"message": reply.message, "type": reply.kind, "code": None}}
            return JSONResponse(error, status_code=reply.status, headers=reply.headers)
        model = body.get("model", "fake")
        with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        stream = self._openai_stream(reply, model, with_usage)
        return StreamingResponse(self._burst(reply, stream), media_type="text/event-stream")

    def _burst(self, reply: Reply, stream: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """`stream` in one write when `reply` asks for a burst, its first chunk marked as sent then."""
        if isinstance(reply, Text | Call) and reply.burst:
            return self._in_one_write(stream)
        return stream

    async def _in_one_write(self, stream: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        whole = b"".join([piece async for piece in stream])
        self.first_byte_at[-1] = time.monotonic()
        yield whole

    async def _openai_stream(self, reply: Reply, model: str, with_usage: bool) -> AsyncIterator[bytes]:
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            data = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return f"data: {json.dumps(data)}\n\n".encode()

        first = True

        def mark() -> None:
            nonlocal first
            if first:
                self.first_byte_at.append(time.monotonic())
                first = False

        mark()
        yield chunk({"role": "assistant", "content": ""})
        usage = (0, 0)
        if isinstance(reply, Text):
            for text in reply.thinking:
                yield chunk({"reasoning_content": text})
            async for piece in _texts(reply, lambda text: chunk({"content": text})):
                yield piece
            yield chunk({}, reply.finish)
            usage = reply.usage
        elif isinstance(reply, Call):
            for text in reply.chunks or ([reply.text] if reply.text else []):
                yield chunk({"content": text})
            arguments = json.dumps(reply.args)
            third = max(1, len(arguments) // 3)
            head = {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": reply.name, "arguments": ""},
            }
            yield chunk({"tool_calls": [head]})
            for i in range(0, len(arguments), third):
                yield chunk(
                    {"tool_calls": [{"index": 0, "function": {"arguments": arguments[i : i + third]}}]}
                )
            yield chunk({}, "tool_calls")
            usage = reply.usage
        elif isinstance(reply, Drop):
            for text in reply.chunks:
                yield chunk({"content": text})
            raise ConnectionResetError("the fake server cut the connection")
        elif isinstance(reply, Hang):
            for text in reply.chunks:
                yield chunk({"content": text})
            await asyncio.sleep(3600)
        elif isinstance(reply, Broken):
            for text in reply.chunks:
                yield chunk({"content": text})
            error = {"error": {"message": reply.message, "type": "server_error", "code": None}}
            yield f"data: {json.dumps(error)}\n\n".encode()
            return
        if with_usage:
            data = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": {
                    "prompt_tokens": usage[0],
                    "completion_tokens": usage[1],
                    "total_tokens": sum(usage),
                },
            }
            yield f"data: {json.dumps(data)}\n\n".encode()
        yield b"data: [DONE]\n\n"

    # --- Anthropic Messages ----------------------------------------------------------------------------
    async def _anthropic(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        reply = self._next(body.get("messages", []))
        if isinstance(reply, Fail):
            error = {"type": "error", "error": {"type": reply.kind, "message": reply.message}}
            return JSONResponse(error, status_code=reply.status, headers=reply.headers)
        stream = self._anthropic_stream(reply, body.get("model", "fake"))
        return StreamingResponse(self._burst(reply, stream), media_type="text/event-stream")

    async def _anthropic_stream(self, reply: Reply, model: str) -> AsyncIterator[bytes]:
        def event(name: str, data: dict[str, Any]) -> bytes:
            return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

        usage = reply.usage if isinstance(reply, Text | Call) else (1, 0)
        self.first_byte_at.append(time.monotonic())
        yield event(
            "message_start",
            {
                "message": {
                    "id": "msg_fake",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": usage[0], "output_tokens": 1},
                }
            },
        )
        index = 0
        stop = "end_turn"
        texts: list[str] = []
        if isinstance(reply, Text):
            if reply.thinking:
                yield event(
                    "content_block_start",
                    {"index": index, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
                )
                for text in reply.thinking:
                    yield event(
                        "content_block_delta",
                        {"index": index, "delta": {"type": "thinking_delta", "thinking": text}},
                    )
                yield event(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "signature_delta", "signature": "sig"}},
                )
                yield event("content_block_stop", {"index": index})
                index += 1
            texts = reply.chunks
            stop = _ANTHROPIC_STOPS[reply.finish]
        elif isinstance(reply, Call):
            texts = reply.chunks or ([reply.text] if reply.text else [])
        elif isinstance(reply, Drop | Hang | Broken):
            texts = reply.chunks
        if texts:
            yield event(
                "content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}
            )

            def delta(text: str, index: int = index) -> bytes:
                return event(
                    "content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": text}}
                )

            async for piece in _texts(reply, delta, texts):
                yield piece
            if isinstance(reply, Drop):
                raise ConnectionResetError("the fake server cut the connection")
            if isinstance(reply, Hang):
                await asyncio.sleep(3600)
            if isinstance(reply, Broken):
                error = {"error": {"type": "overloaded_error", "message": reply.message}}
                yield event("error", error)
                return
            yield event("content_block_stop", {"index": index})
            index += 1
        if isinstance(reply, Call):
            stop = "tool_use"
            block = {"type": "tool_use", "id": "toolu_1", "name": reply.name, "input": {}}
            yield event("content_block_start", {"index": index, "content_block": block})
            arguments = json.dumps(reply.args)
            half = max(1, len(arguments) // 2)
            for i in range(0, len(arguments), half):
                delta = {"type": "input_json_delta", "partial_json": arguments[i : i + half]}
                yield event("content_block_delta", {"index": index, "delta": delta})
            yield event("content_block_stop", {"index": index})
        yield event(
            "message_delta",
            {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": usage[1]}},
        )
        yield event("message_stop", {})

    # --- OpenAI Responses --------------------------------------------------------------------------
    async def _responses(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        given = body.get("input")
        messages = [{"role": "user", "content": given}] if isinstance(given, str) else given or []
        reply = self._next([_as_message(item) for item in messages if isinstance(item, dict)])
        if isinstance(reply, Fail):
            error = {"error": {"message": reply.message, "type": reply.kind, "code": None}}
            return JSONResponse(error, status_code=reply.status, headers=reply.headers)
        stream = self._responses_stream(reply, body.get("model", "fake"))
        return StreamingResponse(self._burst(reply, stream), media_type="text/event-stream")

    async def _responses_stream(self, reply: Reply, model: str) -> AsyncIterator[bytes]:
        sequence = 0

        def event(name: str, data: dict[str, Any]) -> bytes:
            nonlocal sequence
            sequence += 1
            payload = {"type": name, "sequence_number": sequence, **data}
            return f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()

        def response(
            status: str, output: list[dict[str, Any]], usage: tuple[int, int] | None
        ) -> dict[str, Any]:
            return {
                "id": "resp_fake",
                "object": "response",
                "created_at": int(time.time()),
                "model": model,
                "status": status,
                "output": output,
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
                "error": None,
                "incomplete_details": None if status != "incomplete" else {"reason": "max_output_tokens"},
                "usage": None
                if usage is None
                else {
                    "input_tokens": usage[0],
                    "output_tokens": usage[1],
                    "total_tokens": sum(usage),
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens_details": {"reasoning_tokens": 0},
                },
            }

        self.first_byte_at.append(time.monotonic())
        yield event("response.created", {"response": response("in_progress", [], None)})
        output: list[dict[str, Any]] = []
        texts: list[str] = []
        if isinstance(reply, Text | Drop | Hang | Broken):
            texts = reply.chunks
        elif isinstance(reply, Call):
            texts = reply.chunks or ([reply.text] if reply.text else [])
        if texts:
            item = {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            at = {"item_id": "msg_fake", "output_index": 0, "content_index": 0}
            yield event("response.output_item.added", {"output_index": 0, "item": item})
            part = {"type": "output_text", "text": "", "annotations": []}
            yield event("response.content_part.added", {**at, "part": part})

            def delta(text: str) -> bytes:
                return event("response.output_text.delta", {**at, "delta": text, "logprobs": []})

            async for piece in _texts(reply, delta, texts):
                yield piece
            if isinstance(reply, Drop):
                raise ConnectionResetError("the fake server cut the connection")
            if isinstance(reply, Hang):
                await asyncio.sleep(3600)
            if isinstance(reply, Broken):
                yield event("error", {"code": "server_error", "message": reply.message, "param": None})
                return
            whole = "".join(texts)
            yield event("response.output_text.done", {**at, "text": whole, "logprobs": []})
            part = {"type": "output_text", "text": whole, "annotations": []}
            yield event("response.content_part.done", {**at, "part": part})
            item = {**item, "status": "completed", "content": [part]}
            yield event("response.output_item.done", {"output_index": 0, "item": item})
            output.append(item)
        if isinstance(reply, Call):
            index = len(output)
            arguments = json.dumps(reply.args)
            call = {
                "id": "fc_fake",
                "type": "function_call",
                "call_id": "call_1",
                "name": reply.name,
                "arguments": "",
                "status": "in_progress",
            }
            yield event("response.output_item.added", {"output_index": index, "item": call})
            half = max(1, len(arguments) // 2)
            for i in range(0, len(arguments), half):
                piece = {"item_id": "fc_fake", "output_index": index, "delta": arguments[i : i + half]}
                yield event("response.function_call_arguments.delta", piece)
            done = {"item_id": "fc_fake", "output_index": index, "arguments": arguments, "name": reply.name}
            yield event("response.function_call_arguments.done", done)
            call = {**call, "arguments": arguments, "status": "completed"}
            yield event("response.output_item.done", {"output_index": index, "item": call})
            output.append(call)
        usage = reply.usage if isinstance(reply, Text | Call) else (1, 0)
        status = "incomplete" if isinstance(reply, Text) and reply.finish == "length" else "completed"
        name = "response.incomplete" if status == "incomplete" else "response.completed"
        yield event(name, {"response": response(status, output, usage)})


def _as_message(item: dict[str, Any]) -> dict[str, Any]:
    """A Responses input item as a Chat message (for the responder): a tool's output as a tool
    result, a message's ``input_text`` parts as text."""
    if item.get("type") == "function_call_output":
        return {"role": "tool", "content": str(item.get("output", ""))}
    content = item.get("content")
    if isinstance(content, list):
        content = [
            {"type": "text", "text": part.get("text", "")}
            if isinstance(part, dict) and "text" in part
            else part
            for part in content
        ]
    return {"role": item.get("role", "user"), "content": content}


async def _texts(
    reply: Reply, piece: Callable[[str], bytes], texts: list[str] | None = None
) -> AsyncIterator[bytes]:
    """The SSE bytes of `reply`'s text chunks (`texts`, else its `chunks`), one `piece` each: with
    its delay between them, or (`Text.until`) all in one write, the stream going on only once the
    event is set."""
    texts = reply.chunks if texts is None else texts
    until = reply.until if isinstance(reply, Text) else None
    if until is not None:
        yield b"".join(piece(text) for text in texts)
        await asyncio.to_thread(until.wait)
        return
    delay = reply.delay if isinstance(reply, Text) else 0.0
    for text in texts:
        if delay:
            await asyncio.sleep(delay)
        yield piece(text)


def main() -> None:
    parser = argparse.ArgumentParser(
        description="a fake OpenAI (Chat Completions, Responses) / Anthropic model server on 127.0.0.1"
    )
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    server = FakeModelServer()
    print(
        f"fake model server: OpenAI at http://127.0.0.1:{args.port}/v1, Anthropic at http://127.0.0.1:{args.port}"
    )
    uvicorn.run(server.app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
