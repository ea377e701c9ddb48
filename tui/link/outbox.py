"""`Outbox`: an attachment's prompts not taken by the worker yet, and the one path that sends them.

Each prompt is an `Outgoing` with its request id; they are sent in order, one at a time. Whether
it starts now or is queued behind a running turn is the worker's to decide (delivery ``auto``); a
script's prompt (delivery ``now``) the worker answers ``409 busy`` waits for the session to be idle
and is sent again. One the link could not deliver waits for the worker to be live again and is
sent with the same request id (so at most once); one the worker refused is settled with its error
(handed out as `SendFailed`). What it hands out goes through the attachment's inbox (`put`).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from tui.errors import Busy, Conflict, TuiError, Unreachable, WorkerUnavailable
from tui.link import changes as ch
from tui.link.base import AttachLink
from tui.protocol import Delivery, ImageRef, TurnStarted
from tui.protocol.principal import Principal

__all__ = ["Outbox"]


class Outbox:
    """The prompts not taken by the worker yet, oldest first, and their sending.

    Args:
        link: the session they are sent to.
        put: hands a change (or an error the consumer raises) to the attachment's inbox.
        shown: what every item read from the link goes through first.
        principal: who the client acts as now (its turns left are asked again after each send).
    """

    def __init__(
        self,
        link: AttachLink,
        put: Callable[[Any], None],
        shown: Callable[[Any], Any],
        principal: Callable[[], Principal],
    ) -> None:
        self.link = link
        self._put = put
        self._shown = shown
        self._principal = principal
        self.items: list[ch.Outgoing] = []
        self.requests: set[str] = set()
        """The request ids of every prompt this attachment sent."""
        self._delivering: asyncio.Task[None] | None = None

    def add(
        self,
        prompt: str,
        delivery: Delivery,
        request_id: str | None,
        images: Sequence[ImageRef],
    ) -> ch.Outgoing:
        """Put a prompt at the end and start sending."""
        item = ch.Outgoing(prompt, request_id or uuid.uuid4().hex, delivery, tuple(images))
        self.requests.add(item.request_id)
        self.items.append(item)
        self._put(self.change())
        self.kick()
        return item

    def change(self, waiting: bool = False) -> ch.OutboxChanged:
        return ch.OutboxChanged(tuple(o for o in self.items if not o.settled), waiting)

    def taken(self, event: TurnStarted) -> bool:
        """The prompt that started a turn leaves the outbox: the worker took it (False: none did)."""
        kept = [o for o in self.items if o.request_id != event.request_id]
        if len(kept) == len(self.items):
            return False
        for item in self.items:
            if item.request_id == event.request_id:
                item.settled, item.waiting, item.turn_id = True, "", event.turn_id
        self.items = kept
        return True

    def live(self) -> None:
        """The worker is live again: what waited for it is sent."""
        for item in self.items:
            if item.waiting == "live":
                item.waiting = ""
        if self.items:
            self.kick()

    def after(self, events: bool, idle: bool) -> None:
        """Send again what waited for the worker (`events` came from it) or for the session to
        be idle."""
        if not self.items:
            return
        head = self.items[0]
        if (head.waiting == "live" and events) or (head.waiting == "idle" and idle):
            head.waiting = ""
            self.kick()

    def kick(self) -> None:
        if self._delivering is None or self._delivering.done():
            self._delivering = asyncio.create_task(self._deliver(), name="send prompts")

    async def close(self) -> None:
        """Stop sending (the outbox is dropped)."""
        if self._delivering is not None:
            self._delivering.cancel()
            with contextlib.suppress(BaseException):
                await self._delivering

    def _settle(self, item: ch.Outgoing, error: TuiError | None = None) -> None:
        item.settled, item.error, item.waiting = True, error, ""
        if item in self.items:
            self.items.remove(item)
        if error is not None:
            self._put(ch.SendFailed(item, error))
        self._put(self.change())

    async def _deliver(self) -> None:
        """Send the outbox in order; stop at a prompt that waits (for the worker, or for idle)."""
        try:
            while self.items and not self.items[0].waiting:
                item = self.items[0]
                try:
                    accepted = await self.link.send_turn(
                        item.prompt,
                        request_id=item.request_id,
                        delivery=item.delivery,
                        images=list(item.images) or None,
                    )
                except Busy:  # only ``now`` is refused so (a script's prompt)
                    item.waiting = "idle"  # sent again once the session is idle
                    self._put(self.change())
                    continue
                except (WorkerUnavailable, Unreachable):
                    item.waiting = "live"  # sent again once the worker is live
                    self._put(self.change(waiting=True))
                    return
                except (Conflict, TuiError) as exc:
                    self._settle(item, exc)
                    continue
                item.turn_id = accepted.turn_id or item.turn_id
                self._settle(item)
                if self._principal().turns_left is not None:
                    with contextlib.suppress(TuiError):
                        self._put(ch.PrincipalChanged(self._shown(await self.link.whoami())))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # handed to the consumer, which raises it
            self._put(exc)
