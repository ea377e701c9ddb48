"""What `LocalLink` and `RemoteLink` share: requests through one `BridgeClient`, and the budget of
worker restarts a link may spend."""

from __future__ import annotations

import time
from abc import abstractmethod
from collections import deque
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from tui.link.base import AttachLink, Live, RouteCall
from tui.protocol import Event

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
        return self.bridge_client().events(
            cursor, client_id=self.client_id, announce_open=True, reads=self.reads
        )

    async def handle(self, call: RouteCall) -> Any:
        return await self.bridge_client().handle(call)

    def handle_text(self, call: RouteCall) -> AsyncIterator[str]:
        return self.bridge_client().handle_text(call)
