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
    from tui.access.local import LocalAccess
    from tui.store import StatePaths


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


def local_access(state: StatePaths) -> LocalAccess:
    """The access layer on the worker's state dir, made at the session's first child (an idle
    worker imports none of the client side)."""
    from tui.access.local import LocalAccess

    return LocalAccess(state)


if __name__ == "__main__":
    _uvicorn_without_its_command_line()

    from tui.worker.process import main

    raise SystemExit(main(starter=local_access))
