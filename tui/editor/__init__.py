"""`tui acp`: tui as an ACP agent on stdin/stdout, for editors (Zed, Toad, acpx …).

Its sessions are tui sessions (this machine's, or a remote's through `tui.access`); each one is
followed through a `SessionWatch`, and what the session says is told to the editor as ACP
``session/update`` notifications (`tui.editor.shapes`) by an `EditorSession` (`tui.editor.session`).
`tui.editor.face` is the ACP agent side.
"""

from __future__ import annotations

__all__ = ["load_acp"]


def load_acp() -> None:
    """Import the `acp` package, its ~280 pydantic models built as they are first used.

    `acp.schema` asks pydantic for every model's attribute docstrings (each class's source read
    and parsed) and builds every model's validator as the module loads: about half of what a
    fresh `tui acp` spends before it can answer ``initialize``, for models a session mostly never
    uses. Imported here with the docstrings left out (they only describe fields in a JSON
    schema, which `tui acp` never makes) and each model built when it is first used
    (``defer_build``); validation and dumps are the same. Call it before anything imports `acp`;
    once it is loaded, this does nothing.
    """
    import sys

    if "acp" in sys.modules:
        return
    from typing import Any

    import pydantic

    config: Any = pydantic.ConfigDict

    def deferred(**settings: Any) -> Any:
        settings["use_attribute_docstrings"] = False
        settings.setdefault("defer_build", True)
        return config(**settings)

    module: Any = pydantic
    module.ConfigDict = deferred
    try:
        import acp  # noqa: F401
    finally:
        module.ConfigDict = config
