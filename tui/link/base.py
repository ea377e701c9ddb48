"""`AttachLink`: what a client (the TUI, the piped surface, `tui send --wait`) needs to know about
where its session is, and the requests it makes there.

`LocalLink` (this machine: the state dir and the worker's socket) and `RemoteLink` (another
machine, through its web bridge) implement it; `MockLink` serves UI tests. The event follower in
`tui.link.follow` is the only code that follows a session's events: it asks the link where the
worker is (`locate`) and opens streams (`open_stream`), and yields events and `LinkState` changes.

Every method raises from the `tui.errors` tree only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tui.errors import WorkerUnavailable
from tui.protocol import Event, ImageRef, Info, SearchResult, Stats, Transcript, TurnAccepted
from tui.protocol.principal import Principal

__all__ = [
    "AttachLink",
    "Backoff",
    "Gone",
    "LinkState",
    "Live",
    "Located",
    "Reconnecting",
]


@dataclass(frozen=True)
class Live:
    """The stream is open to a live worker."""

    version: str = ""
    epoch: int = 0
    disk_full: str = ""
    """The worker's sentence while its disk is full (it cannot write its journal: nothing it does
    from now on reaches anyone until space is back); empty otherwise."""


@dataclass(frozen=True)
class Reconnecting:
    """The stream dropped; the next try is in `delay` seconds."""

    attempt: int
    delay: float
    reason: str


@dataclass(frozen=True)
class Gone:
    """No worker is coming back (stopped on purpose, deleted, refused): the attach is over."""

    reason: str
    exit_code: int = WorkerUnavailable.exit_code


LinkState = Live | Reconnecting | Gone


@dataclass(frozen=True)
class Located:
    """Where the worker is now, as `AttachLink.locate` answers."""

    status: Literal["live", "starting", "gone"]
    reason: str = ""
    exit_code: int = WorkerUnavailable.exit_code
    version: str = ""
    """The live worker's version, when known."""
    epoch: int = 0
    """The live worker's epoch, when known."""


@dataclass(frozen=True)
class Backoff:
    """Reconnect delays: `first` seconds, times `factor` each try, ±`jitter`, at most `cap`."""

    first: float = 0.1
    factor: float = 1.6
    jitter: float = 0.2
    cap: float = 30.0


class AttachLink(ABC):
    """One attached session, wherever it is.

    Attributes:
        session_id: the session's full id.
        client_id: this client process (``tui:<host>:<pid>``).
        where: ``local`` or ``remote NAME``, for the status row.
        backoff: the reconnect delays for this kind of link.
        paths_complete: whether ``@path`` completions apply (this machine's files).
    """

    session_id: str
    client_id: str
    where: str = "local"
    backoff: Backoff = Backoff()
    paths_complete: bool = False
    failure: str | None = None
    """Why the session's machine could not be asked the last time, for the closing line."""
    no_worker_timeout: float = 10.0
    """Seconds with no live worker after which the follower gives up (10 locally, 120 remotely)."""
    retry_hint: float | None = None
    """The last ``retry:`` a stream sent, in seconds: the follower waits at least that long."""
    principal: Principal = Principal()
    """Who this client acts as (the owner unless the link says otherwise; see `whoami`)."""

    # --- following -------------------------------------------------------------------------
    @abstractmethod
    async def locate(self) -> Located:
        """Where the worker is: live, starting (wait and ask again), or gone for good.

        A link restarts a worker that died without `worker_leaving` (at most 3 times in 60 s).
        """

    @abstractmethod
    def open_stream(self, cursor: int) -> AsyncIterator[Event | Live]:
        """The events after `cursor`, then live ones, until the stream drops.

        A link may yield a `Live` first, once the stream is open, so that a follower knows the
        worker is there before it sends anything.

        Raises:
            WorkerUnavailable: the stream could not be opened or dropped (the follower retries).
            Refused, NotFound: gone for good.
        """

    @abstractmethod
    async def transcript(
        self,
        limit: int = 50,
        *,
        before: str | None = None,
        after: str | None = None,
        around: str | None = None,
    ) -> Transcript:
        """A page of `limit` ended turns (the last ones, or those before turn `before`, right after
        turn `after`, or around turn `around`), the current one, question, queue.

        Raises:
            NotFound: the turn named is no turn of the session.
        """

    async def search(self, text: str, *, limit: int = 200) -> SearchResult:
        """Where `text` occurs in the whole session (case-insensitive), oldest first.

        Default: refused, this link cannot search.
        """
        from tui.errors import InvalidRequest

        raise InvalidRequest("this session cannot be searched")

    async def turn_output(self, turn_id: str, *, call_id: str | None = None) -> AsyncIterator[str]:
        """A turn's whole reply, or one of its tool call's whole output, as it streams.

        Default: refused, this link cannot read it.

        Raises:
            UnknownTurn, UnknownCall: no such turn, or no such call in it.
        """
        from tui.errors import InvalidRequest

        raise InvalidRequest("this session cannot give a turn's whole output")
        yield ""  # type: ignore[unreachable]  # makes this an async generator, as the links' are

    @abstractmethod
    async def info(self) -> Info:
        """The worker's `GET /info`: version, epoch, features."""

    async def whoami(self) -> Principal:
        """Who this client acts as now (a remote link asks its machine). Default: `principal`."""
        return self.principal

    # --- requests --------------------------------------------------------------------------
    @abstractmethod
    async def send_turn(
        self,
        prompt: str,
        *,
        request_id: str,
        delivery: Literal["now", "queue"] = "now",
        images: list[ImageRef] | None = None,
    ) -> TurnAccepted:
        """Start a turn, or queue it behind the running one. Idempotent by `request_id`."""

    @abstractmethod
    async def unqueue(self, queue_id: str) -> None:
        """Take a queued prompt back (NotFound once it started)."""

    @abstractmethod
    async def answer(self, question_id: str, selected: list[str], freeform: str | None = None) -> None:
        """Answer the pending question with option labels and/or free text."""

    @abstractmethod
    async def dismiss(self, question_id: str) -> None:
        """Dismiss the pending question."""

    @abstractmethod
    async def interrupt(self) -> bool:
        """End the running turn `interrupted` (the queue then waits); False when nothing ran."""

    async def resume_queue(self) -> bool:
        """Run a queue held after an interrupt; False when it was not held. Default: refused."""
        from tui.errors import InvalidRequest

        raise InvalidRequest("this session has no queue to resume")

    async def set_model(self, model: str, setting: str | None = None) -> None:
        """Switch the session's model (or its agent's `setting`, ``mode`` …). Default: refused,
        this link has no models."""
        from tui.errors import InvalidRequest

        raise InvalidRequest(f"this session cannot switch to model {model!r}")

    @abstractmethod
    async def stats(self) -> Stats:
        """The session's figures for `/stats`."""

    async def upload_image(self, path: Path) -> ImageRef:
        """Store an image where the worker reads it. Default: refused."""
        from tui.errors import InvalidRequest

        raise InvalidRequest("this session does not take images")

    # --- the session -----------------------------------------------------------------------
    @abstractmethod
    async def stop_worker(self) -> None:
        """`/exit`: the worker ends its turn, says `worker_leaving` and exits."""

    @abstractmethod
    async def delete_session(self) -> None:
        """`/exit --delete`, once the worker let go."""

    @abstractmethod
    async def archive_session(self) -> None:
        """`/archive`: hide the session from lists."""

    def command(self, *words: str) -> str:
        """A command as the user must type it here, e.g. ``tui answer 3f2a --option 1``.

        A remote link spells ``--remote NAME`` into it.
        """
        return " ".join(("tui", *words))

    async def close(self) -> None:  # noqa: B027 - optional, does nothing by default
        """The attach is over: let go of connections."""
