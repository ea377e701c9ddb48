"""`RemoteLink`: a session on another machine, reached through its web bridge (``tui web``).

`WebClient` makes the web bridge's own requests (the server check, ``worker``, ``wake``,
``stop`` …) with the remote's bearer token: refusals become the same `tui.errors` exceptions a
local command raises, with every command they suggest spelled ``tui --remote NAME …``, and a web
bridge that is restarting (503 ``server_stopping``) is asked again after a second. The session's
own routes go through the one `BridgeClient`, with the base ``URL/api/sessions/ID``.
"""

from __future__ import annotations

import asyncio
import functools
import json as json_module
import re
import ssl
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError

from tui.errors import (
    NotFound,
    Refused,
    ServerStopping,
    TuiError,
    Unreachable,
    WorkerUnavailable,
    error_from_wire,
)
from tui.link.base import Backoff, Located
from tui.link.bridged import BridgedLink, RestartBudget
from tui.link.client import BridgeClient
from tui.protocol.ids import short_id
from tui.protocol.principal import Principal
from tui.protocol.routes import WEB, RouteSpec
from tui.protocol.web import WakeRequest, WebInfo, WorkerView

__all__ = ["NEEDED", "RETRY_AFTER", "RemoteLink", "WebClient", "checked_info", "transport"]

NEEDED = ("session_commands", "remote_attach")
"""What a remote's ``tui web`` must offer for ``tui --remote`` (`GET /api/info`'s features)."""
RETRY_AFTER = 1.0
"""Seconds before asking again a web bridge that answered 503 ``server_stopping``."""
RETRY_FOR = 30.0
"""How long a request keeps asking a stopping web bridge before giving up."""
WAKE_WAIT = 30.0


@functools.cache
def _tls() -> ssl.SSLContext:
    # Loading the CA bundle costs ~40 ms: once a process, not once a client.
    return httpx.create_ssl_context()


def transport() -> httpx.AsyncHTTPTransport:
    """A transport to a remote, sharing this process's one TLS context."""
    return httpx.AsyncHTTPTransport(verify=_tls())


def checked_info(body: Any, name: str, url: str) -> dict[str, Any]:
    """A web bridge's ``GET /api/info`` answer, once it is a ``tui web`` with the features needed.

    Raises:
        TuiError: not a ``tui web``, or one too old.
    """
    if not isinstance(body, dict) or body.get("app") != "tui-web":
        raise TuiError(f"{url} is not a tui web (GET /api/info answered something else)")
    missing = [f for f in NEEDED if f not in body.get("features", [])]
    if missing:
        raise TuiError(
            f"remote {name} runs tui web {body.get('version', '?')}, too old: update it there "
            f"(it lacks {', '.join(missing)})"
        )
    return body


_COMMANDS = re.compile(
    r"`tui (?=(attach|sessions|send|answer|dismiss|stop|archive|unarchive|delete|share|note|restart)\b)"
)


class WebClient:
    """Requests to one remote's ``tui web``.

    Args:
        name: the remote's name (``tui remote add NAME …``).
        url: its base URL.
        token: the bearer token.
        transport: an httpx transport to use instead (tests).
    """

    def __init__(
        self, name: str, url: str, token: str, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.name = name
        self.url = url.rstrip("/")
        self.address = self.url
        """How messages name the remote (its ``ssh://`` address for an SSH remote)."""
        self.token = token
        self.info: dict[str, Any] | None = None
        self._transport = transport
        self._http: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _client(self) -> httpx.AsyncClient:
        # A command may run several event loops one after the other: a client per loop.
        loop = asyncio.get_running_loop()
        if self._http is None or self._loop is not loop:
            self._loop = loop
            self._http = httpx.AsyncClient(
                base_url=self.url,
                headers={"Authorization": f"Bearer {self.token}"} if self.token else {},
                timeout=httpx.Timeout(30.0, connect=10.0),
                transport=self._transport or transport(),
            )
        return self._http

    def make_transport(self) -> httpx.AsyncBaseTransport:
        """A transport for another client of this remote (a `RemoteLink`'s)."""
        return transport()

    def unreachable(self, exc: Exception) -> Unreachable:
        """What a transport failure of a request means here."""
        return Unreachable(
            f"remote {self.name} ({self.url}) could not be reached ({type(exc).__name__}); "
            "is `tui web` running there?"
        )

    async def close(self) -> None:
        """Close the connections of the current event loop's client."""
        if self._http is not None and self._loop is asyncio.get_running_loop():
            await self._http.aclose()
        self._http = None

    def spell(self, text: str) -> str:
        """A server's sentence with the commands it suggests spelled for this remote."""
        return _COMMANDS.sub(f"`tui --remote {self.name} ", text)

    def refusal(self, status: int, body: Any) -> TuiError:
        """The exception a refusal stands for, as a local command would raise it."""
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            body = {**body, "detail": self.spell(str(body.get("detail") or ""))}
        return error_from_wire(body, status, who=f"remote {self.name}")

    async def check(self) -> dict[str, Any]:
        """``GET /api/info``, once: a ``tui web`` with the features the commands need.

        Raises:
            TuiError: not a ``tui web``, or one too old.
        """
        if self.info is not None:
            return self.info
        self.info = checked_info(
            await self.request("GET", "/api/info", checked=False), self.name, self.address
        )
        return self.info

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        seconds: float | None = None,
        checked: bool = True,
    ) -> Any:
        """One request; the decoded JSON answer.

        Raises:
            Unreachable: the remote could not be asked.
            TuiError: its refusal, as the matching exception.
        """
        if checked:
            await self.check()
        deadline = time.monotonic() + RETRY_FOR
        kwargs: dict[str, Any] = {"timeout": seconds} if seconds is not None else {}
        while True:
            try:
                reply = await self._client().request(method, path, json=json, params=params, **kwargs)
            except httpx.TransportError as exc:
                raise self.unreachable(exc) from exc
            try:
                body = reply.json() if reply.content else None
            except ValueError:
                body = None
            if reply.status_code < 400:
                return body
            error = self.refusal(reply.status_code, body)
            if isinstance(error, ServerStopping) and time.monotonic() + RETRY_AFTER < deadline:
                await asyncio.sleep(RETRY_AFTER)
                continue
            raise error

    async def call(
        self,
        spec: RouteSpec,
        body: BaseModel | None = None,
        *,
        query: dict[str, Any] | None = None,
        seconds: float | None = None,
        **path: str,
    ) -> Any:
        """One route of the table: its path filled with `path`, `body` as its JSON; its answer
        decoded into the route's answer type.

        Raises:
            Unreachable: the remote could not be asked.
            TuiError: its refusal, as the matching exception, or an answer this version cannot read.
        """
        json = body.model_dump(mode="json", exclude_none=True) if body is not None else None
        if json is None and spec.request is not None:
            json = {}
        data = await self.request(spec.method, spec.url(**path), json=json, params=query, seconds=seconds)
        try:
            return spec.read_answer(data)
        except ValidationError as exc:
            raise TuiError(
                f"remote {self.name} answered {spec.method} {spec.path} with something this version "
                f"cannot read ({exc.errors()[0]['msg']}); is its tui the same version?"
            ) from exc

    async def stream_text(
        self, spec: RouteSpec, *, query: dict[str, Any] | None = None, **path: str
    ) -> AsyncIterator[str]:
        """A route that answers with streamed text (``export``): its text as it arrives.

        Raises:
            Unreachable: the remote could not be asked, or the stream broke.
            TuiError: its refusal, as the matching exception.
        """
        await self.check()
        timeout = httpx.Timeout(30.0, read=None)
        try:
            async with self._client().stream(
                spec.method, spec.url(**path), params=query, timeout=timeout
            ) as reply:
                if reply.status_code >= 400:
                    raw = await reply.aread()
                    try:
                        body = json_module.loads(raw) if raw else None
                    except ValueError:
                        body = None
                    raise self.refusal(reply.status_code, body)
                async for text in reply.aiter_text():
                    yield text
        except httpx.TransportError as exc:
            raise Unreachable(
                f"remote {self.name} ({self.address}) broke off ({type(exc).__name__}); try again"
            ) from exc


class RemoteLink(BridgedLink):
    """One session of another machine, through its web bridge.

    Args:
        web: the remote's client.
        session_id: the session's full id.
        client_id: this client (``tui:<host>:<pid>``).
    """

    backoff = Backoff(first=1.0, factor=1.6, jitter=0.2, cap=120.0)
    paths_complete = False
    no_worker_timeout = 120.0

    def __init__(self, web: WebClient, session_id: str, *, client_id: str) -> None:
        self.web = web
        self.session_id = session_id
        self.client_id = client_id
        self.where = f"remote {web.name}"
        self.bridge = BridgeClient(
            base_url=f"{web.url}/api/sessions/{session_id}",
            token=web.token,
            label=f"session {short_id(session_id)} on {web.name}",
            stream_idle=45.0,
            transport=web.make_transport(),
        )
        self._restarts = RestartBudget()
        self._starting: asyncio.Task[Any] | None = None

    @property
    def short(self) -> str:
        return short_id(self.session_id)

    @property
    def retry_hint(self) -> float | None:  # type: ignore[override]
        return self.bridge.retry_hint

    def command(self, *words: str) -> str:
        return " ".join(("tui", "--remote", self.web.name, *words))

    async def whoami(self) -> Principal:
        """This token's principal, asked of the remote's ``GET /api/info`` each time (turns left
        change as turns are sent)."""
        info: WebInfo = await self.web.call(WEB["web_info"])
        self.principal = info.principal
        return self.principal

    # --- following -------------------------------------------------------------------------------
    async def locate(self) -> Located:
        """Live, starting (being woken, or the remote is out of reach for now), or gone."""
        if self._starting is not None:
            if not self._starting.done():
                return Located("starting", "a new worker is starting there")
            task, self._starting = self._starting, None
            exc = task.exception()
            if isinstance(exc, Refused):
                return Located("gone", str(exc), exc.exit_code)
            if isinstance(exc, NotFound):
                return Located("gone", f"session {self.short} was deleted on {self.web.name}")
            if exc is not None and not isinstance(exc, WorkerUnavailable | Unreachable):
                self.failure = str(exc)
                return Located("gone", f"the worker could not be restarted: {exc}")
        try:
            worker: WorkerView = await self.web.call(WEB["worker"], id=self.session_id)
        except Refused as exc:
            return Located("gone", str(exc), exc.exit_code)
        except NotFound:
            return Located("gone", f"session {self.short} was deleted on {self.web.name}")
        except (Unreachable, WorkerUnavailable) as exc:
            self.failure = str(exc)
            return Located("starting", str(exc))
        if worker.live:
            if worker.leaving:
                return Located("starting", "the worker is stopping")
            return Located("live", version=worker.version or "", epoch=worker.epoch or 0)
        if worker.starting:
            return Located("starting", "a new worker is starting there")
        if worker.left:
            reason = worker.reason or "stopped"
            return Located(
                "gone",
                f"the worker stopped ({reason}); `{self.command('attach', self.short)}` starts it again",
            )
        if not self._restarts.spend():
            return Located(
                "gone",
                f"the worker of session {self.short} died {self._restarts}; "
                f"`{self.command('attach', self.short)}` tries again",
            )
        self._starting = asyncio.create_task(
            self.web.call(
                WEB["wake"], WakeRequest(wait=WAKE_WAIT), seconds=WAKE_WAIT + 10, id=self.session_id
            )
        )
        return Located("starting", "the worker stopped unexpectedly; waking a new one there")

    def bridge_client(self) -> BridgeClient:
        return self.bridge

    async def close(self) -> None:
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()
        await self.bridge.close()
