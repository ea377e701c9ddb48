"""Running the web bridge: the owner token, the listening socket, uvicorn, ``web/server.json``."""

from __future__ import annotations

import contextlib
import gc
import ipaddress
import json
import logging
import os
import signal
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import uvicorn

from tui.errors import UsageError
from tui.store import StatePaths
from tui.store._atomic import write_atomic
from tui.web.app import create_app
from tui.web.bridge import WebBridge
from tui.web.limits import GuardedH11, connection_limit
from tui.web.paths import WebPaths
from tui.web.signin import CODE_TTL, OWNER, SignIns, link
from tui.web.tokens import digest, new_token, read_token_file, write_token_file

__all__ = [
    "OwnerToken",
    "check_owner_token",
    "is_loopback",
    "owner_link",
    "read_owner_digest",
    "read_server",
    "serve",
    "setup_owner_token",
]

SHUTDOWN_GRACE = 2
"""Seconds an open connection gets to finish once ``tui web`` is asked to stop."""


@dataclass(frozen=True)
class OwnerToken:
    """The owner token's digest, and the token itself when it was made (or read) just now."""

    digest: str
    token: str | None = None
    written_to: Path | None = None


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address (or ``localhost``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def setup_owner_token(web: WebPaths, token_file: str | None) -> OwnerToken:
    """The owner token: made on first start, or taken from `token_file`.

    - `token_file` given and holding a token: that token is the owner's (its digest stored), if
      it is strong enough (`check_owner_token`) and no one else may read the file.
    - `token_file` given and missing: a new token is made and written there (0600).
    - no `token_file`: the stored digest, or on first start a new token (shown once; marked as
      only printed, so a non-loopback ``tui web`` still asks for a token file).

    Raises:
        UsageError: a weak token, or a token file others may read.
    """
    stored = _read_digest(web)
    if token_file is not None:
        path = Path(token_file).expanduser().absolute()
        if path.exists():
            token = read_token_file(path)
            check_owner_token(path, token)
            if digest(token) != stored or _only_printed(web):
                write_atomic(web.owner_digest, digest(token) + "\n")
            return OwnerToken(digest(token), None, path)
        token = new_token()
        write_token_file(path, token)
        write_atomic(web.owner_digest, digest(token) + "\n")
        return OwnerToken(digest(token), token, path)
    if stored:
        return OwnerToken(stored)
    token = new_token()
    write_atomic(web.owner_digest, digest(token) + "\n" + _PRINTED + "\n")
    return OwnerToken(digest(token), token)


MIN_TOKEN = 32
"""The fewest characters an owner token given in a file may have."""
_PRINTED = "only printed"
"""The second line of ``web/owner.sha256`` when the token was never written to a file."""


def check_owner_token(path: Path, token: str) -> None:
    """Refuse an owner token file others may read, or a token too short or too plain to guess hard.

    Raises:
        UsageError: naming the file and what to do.
    """
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise UsageError(
            f"the token file {path} may be read by others (mode {mode:o}); "
            f"`chmod 600 {path}`, then start again"
        )
    if len(token) < MIN_TOKEN or len(set(token)) < 12:
        raise UsageError(
            f"the token in {path} is too weak to guard this machine (at least {MIN_TOKEN} characters, "
            f"not repetitive); remove the file and `tui web --token-file {path}` makes a strong one"
        )


def _read_digest(web: WebPaths) -> str:
    try:
        lines = web.owner_digest.read_text().splitlines()
    except FileNotFoundError:
        return ""
    return lines[0].strip() if lines else ""


def read_owner_digest(web: WebPaths) -> str:
    """The stored owner token's digest ("" when none was made yet)."""
    return _read_digest(web)


def _only_printed(web: WebPaths) -> bool:
    """Whether the stored owner token was only ever printed (never written to a token file)."""
    try:
        return _PRINTED in web.owner_digest.read_text()
    except FileNotFoundError:
        return False


def read_server(state: StatePaths) -> dict[str, Any] | None:
    """``web/server.json`` of a running ``tui web`` (None when none is running)."""
    path = WebPaths.of(state.root).server
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("pid"), int):
        return None
    pid: int = data["pid"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    server: dict[str, Any] = data
    return server


COLLECTOR = (700, 10, 100)
"""The cyclic collector's thresholds in `tui web` and `tui relay`: Python's own, but a full
collection considered after 100 collections of the middle generation instead of 10. A full one
walks every object of every open stream (some 200,000 at 1,000 followers) and held them all
back 20-120 ms; with Python's 10 it ran five times in one turn sent to 1,000 followers, with
100 not once (docs/performance.md, "1,000 followers through `tui web`")."""


class _Server(uvicorn.Server):
    """uvicorn, telling the bridge to end its streams as soon as a stop is asked for."""

    def __init__(self, config: uvicorn.Config, bridge: WebBridge) -> None:
        super().__init__(config)
        self.bridge = bridge

    def handle_exit(self, sig: int, frame: Any) -> None:
        # Streams never end by themselves: end them now, or the shutdown waits for them.
        self.bridge.begin_stop()
        super().handle_exit(sig, frame)


def server_for(bridge: WebBridge, *, tls_cert: str | None = None, tls_key: str | None = None) -> _Server:
    """uvicorn serving `bridge`'s app, as `tui web` and `tui relay` both run it: the guarded
    protocol with its connection bound, no access log, no proxy headers, a short graceful stop;
    over TLS when given a certificate and its key (PEM files)."""
    GuardedH11.max_connections = connection_limit()
    gc.set_threshold(*COLLECTOR)
    config = uvicorn.Config(
        create_app(bridge),
        http=GuardedH11,
        log_level="warning",
        timeout_graceful_shutdown=SHUTDOWN_GRACE,
        lifespan="on",
        access_log=False,
        proxy_headers=False,
        server_header=False,
        ssl_certfile=str(Path(tls_cert).expanduser()) if tls_cert else None,
        ssl_keyfile=str(Path(tls_key).expanduser()) if tls_key else None,
    )
    return _Server(config, bridge)


def serve(
    state: StatePaths,
    *,
    host: str = "127.0.0.1",
    port: int = 7433,
    token_file: str | None = None,
    suggested_token_file: str = "FILE",
    tls_cert: str | None = None,
    tls_key: str | None = None,
    out: TextIO = sys.stdout,
) -> int:
    """Run ``tui web`` until it is stopped (Ctrl+C, SIGTERM). `suggested_token_file`: where the
    refusal of a non-loopback address without a token says to put one (the config dir's).

    Raises:
        UsageError: a non-loopback address without a token set up, or an address in use.
    """
    web = WebPaths.of(state.root)
    if (tls_cert is None) != (tls_key is None):
        raise UsageError("TLS needs both files: `tui web --tls-cert CERT.pem --tls-key KEY.pem`")
    for given in (tls_cert, tls_key):
        if given is not None and not Path(given).expanduser().is_file():
            raise UsageError(f"no such file: {given}; give the PEM files of the certificate and its key")
    if not is_loopback(host) and token_file is None and (not _read_digest(web) or _only_printed(web)):
        raise UsageError(
            f"`tui web --host {host}` serves other machines, so it needs a token first: "
            f"`tui web --host {host} --token-file {suggested_token_file}` makes one and writes it there "
            "(a folder no program of a session can read)"
        )
    owner = setup_owner_token(web, token_file)
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    # IPPROTO_TCP spelled out: asyncio sets TCP_NODELAY only on sockets that say so, and without
    # it every small reply waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise UsageError(
            f"cannot listen on {host}:{port}: {exc.strerror}; `tui web --port 0` picks a free port"
        ) from exc
    sock.listen(128)
    sock.set_inheritable(True)
    bound_port = sock.getsockname()[1]
    bridge = WebBridge(state, owner.digest, host=host.strip("[]"), port=bound_port, tls=tls_cert is not None)
    logging.getLogger("uvicorn.error").addFilter(_not_tallied)
    server = server_for(bridge, tls_cert=tls_cert, tls_key=tls_key)
    # A SIGTERM from now on stops the server (uvicorn takes the signal over while it runs and
    # raises it again once it has shut down: it then lands here, and the cleanup below runs).
    previous = signal.signal(signal.SIGTERM, server.handle_exit)
    try:
        write_atomic(web.server, json.dumps({"url": bridge.url, "pid": os.getpid()}) + "\n")
        _announce(out, bridge.url, owner, owner_link(bridge.signins, bridge.url, owner.digest), host=host)
        server.run(sockets=[sock])
    finally:
        signal.signal(signal.SIGTERM, previous)
        sock.close()
        with contextlib.suppress(OSError):
            data = json.loads(web.server.read_text())
            if data.get("pid") == os.getpid():
                web.server.unlink()
    return 0


def _not_tallied(record: logging.LogRecord) -> bool:
    """uvicorn's line for each request it cannot parse: `GuardedH11` logs those, once a minute."""
    return record.getMessage() != "Invalid HTTP request received."


def owner_link(signins: SignIns, url: str, owner_digest: str) -> str:
    """A fresh sign-in link for the owner (its code works once, for `CODE_TTL` seconds)."""
    return link(url, signins.new_code(OWNER, owner_digest=owner_digest))


def _announce(out: TextIO, url: str, owner: OwnerToken, page: str, *, host: str) -> None:
    print(f"tui web: serving this machine's sessions on {url}", file=out)
    print(f"in a browser (this link signs you in once, for {CODE_TTL // 60} minutes): {page}", file=out)
    if owner.token is not None and owner.written_to is None:
        print(f"owner token (shown once, keep it secret): {owner.token}", file=out)
    if owner.written_to is not None:
        print(f"owner token in {owner.written_to}", file=out)
    if is_loopback(host):  # another machine cannot reach this address
        print(
            "this machine only (a loopback address); for others: "
            "`tui web --host ADDR --token-file FILE`, then there `tui remote add NAME URL --token-file FILE`",
            file=out,
        )
    else:
        print(f"on another machine: tui remote add NAME {url} --token-file FILE", file=out)
    print("stop with Ctrl+C", file=out, flush=True)
