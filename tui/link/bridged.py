"""What `LocalLink` and `RemoteLink` share: requests through one `BridgeClient`, and the budget of
worker restarts a link may spend."""

from __future__ import annotations

import asyncio
import time
from abc import abstractmethod
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tui.errors import InvalidRequest, TooLarge
from tui.link.base import AttachLink, Live
from tui.protocol import (
    MAX_PROMPT,
    AnswerRequest,
    DismissRequest,
    Event,
    ImageRef,
    Info,
    SearchResult,
    Stats,
    Transcript,
    TurnAccepted,
    TurnRequest,
)

if TYPE_CHECKING:  # httpx is imported only once a worker is asked something
    from tui.link.client import BridgeClient

__all__ = ["BridgedLink", "RestartBudget"]


class RestartBudget:
    """A dead worker is restarted at most `times` times within `window` seconds (spec README)."""

    def __init__(self, times: int = 3, window: float = 60.0) -> None:
        self.times = times
        self.window = window
        self._spent: deque[float] = deque()

    def spend(self) -> bool:
        """Take one restart; False when the budget is used up (the link is then gone)."""
        now = time.monotonic()
        while self._spent and now - self._spent[0] > self.window:
            self._spent.popleft()
        if len(self._spent) >= self.times:
            return False
        self._spent.append(now)
        return True

    def __str__(self) -> str:
        return f"{self.times} times within {self.window:g} s"


class BridgedLink(AttachLink):
    """An `AttachLink` whose session requests all go to the worker's bridge through one client."""

    @abstractmethod
    def bridge_client(self) -> BridgeClient:
        """The client of the live worker's bridge (direct, or through a web bridge)."""

    def open_stream(self, cursor: int) -> AsyncIterator[Event | Live]:
        return self.bridge_client().events(cursor, client_id=self.client_id, announce_open=True)

    async def transcript(
        self,
        limit: int = 50,
        *,
        before: str | None = None,
        after: str | None = None,
        around: str | None = None,
    ) -> Transcript:
        return await self.bridge_client().transcript(limit, before=before, after=after, around=around)

    async def search(self, text: str, *, limit: int = 200) -> SearchResult:
        return await self.bridge_client().search(text, limit)

    def turn_output(self, turn_id: str, *, call_id: str | None = None) -> AsyncIterator[str]:
        return self.bridge_client().turn_output(turn_id, call_id)

    async def resume_queue(self) -> bool:
        return await self.bridge_client().resume_queue()

    async def info(self) -> Info:
        return await self.bridge_client().info()

    async def send_turn(
        self,
        prompt: str,
        *,
        request_id: str,
        delivery: Literal["now", "queue"] = "now",
        images: list[ImageRef] | None = None,
    ) -> TurnAccepted:
        if len(prompt) > MAX_PROMPT:
            raise TooLarge(
                f"the prompt is {len(prompt):,} characters and a turn takes at most {MAX_PROMPT:,}: "
                "send it in parts, or save it to a file and send a turn that reads the file",
                limit=MAX_PROMPT,
            )
        request = TurnRequest(
            prompt=prompt,
            client_id=self.client_id,
            request_id=request_id,
            images=images or [],
            delivery=delivery,
        )
        return await self.bridge_client().send_turn(request)

    async def unqueue(self, queue_id: str) -> None:
        await self.bridge_client().unqueue(queue_id)

    async def answer(self, question_id: str, selected: list[str], freeform: str | None = None) -> None:
        request = AnswerRequest(
            question_id=question_id, selected=selected, freeform=freeform, client_id=self.client_id
        )
        await self.bridge_client().answer(request)

    async def dismiss(self, question_id: str) -> None:
        await self.bridge_client().dismiss(DismissRequest(question_id=question_id, client_id=self.client_id))

    async def interrupt(self) -> bool:
        return await self.bridge_client().interrupt(self.client_id)

    async def set_model(self, model: str, setting: str | None = None) -> None:
        await self.bridge_client().set_model(model, setting)

    async def stats(self) -> Stats:
        return await self.bridge_client().stats()

    async def upload_image(self, path: Path) -> ImageRef:
        try:
            data = await asyncio.to_thread(path.read_bytes)
        except OSError as exc:
            raise InvalidRequest(f"cannot read image {path}: {exc.strerror}; check the path") from exc
        return await self.bridge_client().upload_image(data, path.name)
