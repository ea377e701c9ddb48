"""The sandboxed interpreter's start-up: what ``site`` does, all but tui's own finder.

The interpreter runs with ``-S``; the runner (``_child.py``) loads this file by its path beside
itself and calls `start_site` before anything else. Standard library only; never imports ``tui``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing stays out of the sandbox's interpreter (its memory, every session)
if TYPE_CHECKING:
    from typing import Any

OWN_EDITABLE = "__editable__.tui-"
"""How the ``.pth`` file of tui's own editable install (``pip install -e .``) begins: its finder
imports pathlib, re, ipaddress and urllib (2.2 MiB) to map a package the sandbox hides anyway."""


def start_site() -> None:
    """What ``site`` does at start-up (the interpreter runs with ``-S``), all but tui's own finder.

    ``site.main()`` itself: the venv's (and, where its ``pyvenv.cfg`` says so, the system's)
    site-packages on ``sys.path``, each one's ``.pth`` files processed in sorted name order (path
    lines added when they exist, ``import`` lines run), ``exit``, ``help`` and the others, and
    ``sitecustomize``; only the ``.pth`` of tui's editable install is passed over (`is_own_editable`).
    """
    import site  # its module is all it costs here: 90 objects; os, io and stat are loaded already

    process = site.addpackage

    def addpackage(sitedir: Any, name: Any, known_paths: set[str] | None) -> set[str] | None:
        if is_own_editable(str(name)):
            return known_paths
        return process(sitedir, name, known_paths)

    site.addpackage = addpackage
    try:
        site.main()
    finally:
        site.addpackage = process


def is_own_editable(name: str) -> bool:
    """Whether a ``.pth`` file is tui's own editable install's (``__editable__.tui-0.1.0.pth``;
    another project's, even ``tui_extra``'s, begins ``__editable__.tui_extra-``)."""
    return name.startswith(OWN_EDITABLE) and name.endswith(".pth")
