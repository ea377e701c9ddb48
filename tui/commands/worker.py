"""The worker process: ``python -I -m tui.commands.worker --state-dir DIR ID``, as `tui.link.launch`
starts it.

It runs `tui.worker.process.main` and hands it the access layer (`LocalAccess` on the state dir)
through which the session starts and follows its children: the worker is below the access layer
and never imports it; the one process that needs both is put together here, as ``tui web``'s is
in `tui.commands.web`.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tui.store import StatePaths
    from tui.worker.children import ChildStarter


def _uvicorn_without_its_command_line() -> None:
    """Import uvicorn's package as a bare module holding its `Config` and `Server`.

    ``uvicorn/__init__.py`` imports ``uvicorn.main`` for ``uvicorn.run`` and the ``uvicorn``
    command: click and the reloaders (multiprocessing, watchfiles), about 2 MiB of every idle worker,
    which uses neither. Only this process's entry does it, before anything imports uvicorn; its
    submodules import nothing else from the package (``__version__`` is ``uvicorn.main``'s).
    """
    spec = importlib.util.find_spec("uvicorn")
    if spec is None or spec.submodule_search_locations is None or "uvicorn" in sys.modules:
        return
    sys.modules["uvicorn"] = package = importlib.util.module_from_spec(spec)
    from uvicorn.config import Config
    from uvicorn.server import Server

    setattr(package, "Config", Config)  # noqa: B010 - a module built here, not typed
    setattr(package, "Server", Server)  # noqa: B010


def local_access(state: StatePaths) -> ChildStarter:
    """The access layer on the worker's state dir, made at the session's first child (an idle
    worker imports none of the client side), with the shares of ``tui web`` whose turns a child
    started in a participant's turn spends (`ChildStarter.spend_share_turn`)."""
    from tui.access.local import LocalAccess
    from tui.errors import TokenRevoked, TuiError
    from tui.protocol.ids import short_id
    from tui.store import get_session

    class ChildAccess(LocalAccess):
        def spend_share_turn(self, session_id: str, name: str) -> None:
            from tui.web.participants import ParticipantStore
            from tui.web.paths import WebPaths

            shares = ParticipantStore(WebPaths.of(self.state.root))
            sid: str | None = session_id
            seen: set[str] = set()
            while sid is not None and sid not in seen:
                seen.add(sid)
                if shares.take_turn_of(sid, name):
                    return
                try:
                    sid = get_session(self.state, sid).parent_id
                except TuiError:
                    break
            raise TokenRevoked(
                f"{name}'s share of session {short_id(session_id)} (or of its parents) is gone: "
                "its turns cannot start children"
            )

    return ChildAccess(state)


if __name__ == "__main__":
    _uvicorn_without_its_command_line()

    from tui.worker.process import main

    raise SystemExit(main(starter=local_access))
