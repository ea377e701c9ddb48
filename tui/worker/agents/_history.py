"""A model session's conversation: kept in ``messages.jsonl`` (`MessageLog`), repaired so a
provider takes it after an interrupted turn (`repair`), and fitted to the model's context window
by dropping the oldest turns whole (`fit_context`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    ToolReturnPart,
    UserPromptPart,
)

__all__ = ["CONTEXT_HIGH", "CONTEXT_LOW", "INTERRUPTED_CALL", "MessageLog", "fit_context", "repair"]

log = logging.getLogger("tui.worker.model")

CONTEXT_HIGH = 0.75
"""The share of the window above which the oldest turns are dropped before a request …"""
CONTEXT_LOW = 0.5
"""… until the conversation takes at most this share."""


_TURN = b'{"turn":'


class MessageLog:
    """``messages.jsonl``: the conversation, one line a turn: ``{"turn": N, "messages": [...]}``
    (pydantic-ai's messages of turn N), or the bare list of messages a line written before turns
    were numbered."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _lines(self) -> list[tuple[int | None, bytes]]:
        """Each line's turn number (None: not numbered) and its messages' JSON."""
        try:
            lines = self.path.read_bytes().splitlines()
        except FileNotFoundError:
            return []
        out: list[tuple[int | None, bytes]] = []
        for line in lines:
            if not line.strip():
                continue
            if line.startswith(_TURN):
                number, _, rest = line[len(_TURN) :].partition(b',"messages":')
                try:
                    out.append((int(number), rest[:-1]))
                    continue
                except ValueError:
                    pass
            out.append((None, line))
        return out

    def load(self) -> list[ModelMessage]:
        """The whole conversation, repaired so a provider takes it (see `repair`)."""
        messages: list[ModelMessage] = []
        for k, (_, line) in enumerate(self._lines(), 1):
            try:
                messages.extend(ModelMessagesTypeAdapter.validate_json(line))
            except ValueError as exc:  # a torn last line (a worker killed mid-write) or damage
                log.warning("%s line %d is not a list of messages; skipped (%s)", self.path, k, exc)
        return repair(messages)

    def append(self, messages: Sequence[ModelMessage], turn: int = 0) -> None:
        """Add turn `turn`'s messages (one line, one write)."""
        if not messages:
            return
        line = b'{"turn":%d,"messages":' % turn + ModelMessagesTypeAdapter.dump_json(list(messages)) + b"}\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def keep_before(self, to_turn: int, into: Path | None = None) -> int:
        """Keep only the turns before `to_turn` (lines not numbered are kept), in this log or
        written to `into` (a forked session's log); returns how many turns' lines were left out."""
        kept: list[bytes] = []
        dropped = 0
        for number, line in self._lines():
            if number is not None and number >= to_turn:
                dropped += 1
                continue
            kept.append(line if number is None else b'{"turn":%d,"messages":%s}' % (number, line))
        target = into or self.path
        if into is None and not dropped:
            return 0
        temporary = target.with_name(target.name + ".new")
        temporary.write_bytes(b"".join(line + b"\n" for line in kept))
        os.chmod(temporary, 0o600)
        os.replace(temporary, target)
        return dropped


INTERRUPTED_CALL = "interrupted: the turn was stopped before this call returned"


def repair(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """The conversation as a provider takes it.

    Adjacent requests are merged (a ``!`` line's context, then the next prompt), empty ones
    dropped, and every tool call without a result gets one saying it was interrupted (providers
    refuse a dangling call).
    """
    out: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            if out and isinstance(out[-1], ModelRequest):
                last = out[-1]
                out[-1] = ModelRequest(parts=[*last.parts, *message.parts], instructions=last.instructions)
            elif message.parts:
                out.append(message)
        else:
            out.append(message)
    fixed: list[ModelMessage] = []
    for i, message in enumerate(out):
        if isinstance(message, ModelRequest) and fixed and isinstance(fixed[-1], ModelResponse):
            message = _answer_calls(fixed[-1], message)
        fixed.append(message)
        if isinstance(message, ModelResponse) and message.tool_calls and i == len(out) - 1:
            fixed.append(_answer_calls(message, ModelRequest(parts=[])))
    # a request of nothing but results of calls nobody made would be refused too
    return [m for m in fixed if not (isinstance(m, ModelRequest) and not m.parts)]


def _answer_calls(response: ModelResponse, request: ModelRequest) -> ModelRequest:
    answered = {p.tool_call_id for p in request.parts if isinstance(p, ToolReturnPart | RetryPromptPart)}
    missing = [
        ToolReturnPart(tool_name=call.tool_name, content=INTERRUPTED_CALL, tool_call_id=call.tool_call_id)
        for call in response.tool_calls
        if call.tool_call_id not in answered
    ]
    if not missing:
        return request
    return ModelRequest(parts=[*missing, *request.parts], instructions=request.instructions)


def _size(message: ModelMessage) -> int:
    """Tokens a message takes, estimated (4 characters a token)."""
    return len(ModelMessagesTypeAdapter.dump_json([message])) // 4


def _turn_starts(messages: Sequence[ModelMessage]) -> list[int]:
    """Where each turn starts: a request holding a person's prompt."""
    return [
        i
        for i, m in enumerate(messages)
        if isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart) for p in m.parts)
    ]


def fit_context(
    messages: list[ModelMessage], window: int, prompt_tokens: int = 0
) -> tuple[list[ModelMessage], int]:
    """The context rule: when the conversation would fill more than `CONTEXT_HIGH` of the window,
    its oldest turns are dropped, whole, until it fills at most `CONTEXT_LOW` (the new prompt is
    always sent). Returns the messages to send and how many turns were dropped.
    """
    sizes = [_size(m) for m in messages]
    total = sum(sizes) + prompt_tokens
    if total <= CONTEXT_HIGH * window:
        return messages, 0
    starts = _turn_starts(messages)
    dropped = 0
    cut = 0
    for start in [*starts[1:], len(messages)]:
        if total <= CONTEXT_LOW * window:
            break
        total -= sum(sizes[cut:start])
        cut = start
        dropped += 1
    return messages[cut:], dropped
