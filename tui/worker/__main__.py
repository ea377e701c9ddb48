"""The worker process: ``python -m tui.worker --state-dir DIR ID`` (`tui.worker.process.main`)."""

import importlib.util
import sys


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


_uvicorn_without_its_command_line()

from tui.worker.process import main  # noqa: E402

raise SystemExit(main())
