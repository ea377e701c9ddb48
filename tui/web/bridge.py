"""What a running ``tui web`` holds (`WebBridge`): its state dir, its address, the owner's token
digest, the participants' store, the open streams, and which ``Host`` names it."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
from dataclasses import dataclass, field

from tui.errors import TuiError
from tui.protocol.principal import Principal
from tui.protocol.routes import BRIDGE
from tui.store import StatePaths
from tui.web.changes import Pages
from tui.web.fanout import FanOuts
from tui.web.forward import KEEPALIVE, Forwarder, OpenStream
from tui.web.participants import ParticipantStore
from tui.web.paths import WebPaths
from tui.web.sessions import LocalSessions
from tui.web.signin import SignIns, Throttle, cookie_name

__all__ = ["FEATURES", "STREAM_CAP", "WATCH_EVERY", "WebBridge"]

FEATURES = ("session_commands", "remote_attach", "participants")
"""What this web bridge can do, as `GET /api/info` names it."""

STREAM_CAP = 3
"""Open event streams a participant's token may hold at once; one more gets 429 ``cap_reached``."""

WATCH_EVERY = 0.2
"""Seconds between two checks of the participants file for revoked or expired open streams."""


@dataclass(eq=False)
class WebBridge:
    """Everything a running ``tui web`` holds."""

    state: StatePaths
    owner_digest: str
    started_in: str = field(default_factory=os.getcwd)
    """The default folder of sessions created remotely: where ``tui web`` was started."""
    host: str = "127.0.0.1"
    port: int = 0
    tls: bool = False
    """Served over TLS (``tui web --tls-cert``): URLs say https, the sign-in cookie is Secure."""
    stopping: bool = False
    streams: set[OpenStream] = field(default_factory=set)
    keepalive: float = KEEPALIVE
    trusted: Principal | None = None
    """Who every request is, with no token: the owner for ``tui relay``, which only the user's
    own SSH connection reaches (`tui.web.relay`). None: tokens decide."""

    def __post_init__(self) -> None:
        self.web = WebPaths.of(self.state.root)
        self.participants = ParticipantStore(self.web)
        self.signins = SignIns(self.web)
        self.throttle = Throttle()
        self.sessions = LocalSessions(self.state)
        self.forwarder = Forwarder()
        self.fanouts = FanOuts(BRIDGE["events"].path)
        self.pages = Pages(self.state, self.fanouts)
        """The attachments of the sessions browser pages follow (``…/changes``)."""

    @property
    def url(self) -> str:
        """The base URL clients use (on an any-address bind, this machine's outward address)."""
        host = self.host
        bound = _ip(host)
        if bound is not None and bound.is_unspecified:
            host = _outward_address(bound.version)
        host = f"[{host}]" if ":" in host else host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def cookie(self) -> str:
        """The name of this server's session cookie (`tui.web.signin.cookie_name`)."""
        return cookie_name(self.port)

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    def host_allowed(self, header: str) -> bool:
        """Whether a ``Host`` header names this server: its bound address and port.

        On a loopback address ``localhost`` is taken too; on an any-address (0.0.0.0, ::) any IP
        literal is, never a name (a name is how a DNS-rebinding page would reach us).
        """
        host, port = _split_host(header)
        if port != self.port or not host:
            return False
        if host == self.host.lower():
            return True
        bound = _ip(self.host)
        if bound is not None and bound.is_loopback and (host == "localhost" or _is_loopback(host)):
            return True
        return bound is not None and bound.is_unspecified and _ip(host) is not None

    def begin_stop(self) -> None:
        """Shutting down: refuse new requests with 503, end every open stream now."""
        self.stopping = True
        for handle in list(self.streams):
            handle.close("server stopping")

    def close_streams_of_signin(self, page: str) -> None:
        """End the open streams of one page's sign-in (its page digest): it signed out."""
        for handle in list(self.streams):
            if handle.signin == page:
                handle.close("signed out")

    def close_streams_of_gone_tokens(self) -> None:
        """End the open streams of revoked or expired participants, and of sign-ins that ended."""
        signed_in = [h for h in self.streams if h.signin]
        if signed_in:
            with contextlib.suppress(TuiError):
                live = self.signins.live()
                for handle in signed_in:
                    if handle.signin not in live:
                        handle.close("signed out")
        watched = [h for h in self.streams if h.participant_id is not None]
        if not watched:
            return
        try:
            self.participants.load()
        except TuiError:
            return
        for handle in watched:
            assert handle.participant_id is not None
            person = self.participants.get(handle.participant_id)
            state = person.state() if person is not None else "revoked"
            if state != "active":
                handle.close(f"token {state}")


def _outward_address(version: int) -> str:
    """The address other machines reach this one at: the source of a route out (nothing is sent)."""
    family, probe, fallback = (
        (socket.AF_INET6, "2001:db8::1", "::1")
        if version == 6
        else (socket.AF_INET, "192.0.2.1", "127.0.0.1")
    )
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((probe, 9))
            return str(s.getsockname()[0])
    except OSError:
        return fallback


def _split_host(header: str) -> tuple[str, int | None]:
    h = header.strip().lower()
    if h.startswith("["):
        host, _, rest = h[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = h.rpartition(":") if ":" in h else (h, "", "")
    try:
        return host, int(port) if port else 80
    except ValueError:
        return host, None


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None


def _is_loopback(text: str) -> bool:
    ip = _ip(text)
    return ip is not None and ip.is_loopback
