"""``tui relay``: the web bridge's routes for one SSH connection (`tui.link.ssh`).

Started by the other machine's ``ssh`` as the session's command, it serves the same app as
``tui web``, with every request the owner's and no token (SSH authenticated the user), on a Unix
socket of mode 0600 in ``STATE/relay/`` (a 0700 folder), never on a network port. It prints
``tui-relay VERSION PATH`` once it listens, so the client can forward a socket of its own to
that path over the same connection, and stops when its standard input ends: the connection
closed, or the client went away. Workers it started keep running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
from typing import BinaryIO, TextIO

from tui import __version__
from tui.protocol.principal import Principal, owner_name
from tui.store import StatePaths
from tui.web.bridge import WebBridge
from tui.web.server import server_for

__all__ = ["RELAY_HOST", "relay"]

RELAY_HOST = "tui-relay"
"""The ``Host`` the relay answers to (clients use ``http://tui-relay``)."""


def _owner() -> Principal:
    return Principal(kind="owner", name=owner_name())


def relay(state: StatePaths, *, stdin: BinaryIO | None = None, out: TextIO = sys.stdout) -> int:
    """Serve this machine's sessions on a Unix socket until `stdin` ends (or SIGTERM)."""
    folder = state.root / "relay"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    path = folder / f"{os.getpid()}.sock"
    path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    os.chmod(path, 0o600)
    sock.listen(128)
    sock.set_inheritable(True)
    bridge = WebBridge(state, "", host=RELAY_HOST, port=80, trusted=_owner())
    server = server_for(bridge)
    previous = signal.signal(signal.SIGTERM, server.handle_exit)
    source = stdin if stdin is not None else sys.stdin.buffer

    def until_input_ends() -> None:
        with contextlib.suppress(OSError, ValueError):
            while source.read(4096):
                pass
        # The connection is gone: stop as SIGTERM would (uvicorn handles it on its own loop).
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=until_input_ends, name="relay-input", daemon=True).start()
    try:
        print(f"tui-relay {__version__} {path}", file=out, flush=True)
        server.run(sockets=[sock])
    finally:
        signal.signal(signal.SIGTERM, previous)
        sock.close()
        path.unlink(missing_ok=True)
    return 0
