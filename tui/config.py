"""Where tui keeps its files, and the user's settings."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

__all__ = ["state_dir"]


def state_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The state dir: `override`, else ``$TUI_STATE_DIR``, else the platform's user state dir.

    The folder is made (mode 0700) when missing.
    """
    chosen = override or os.environ.get("TUI_STATE_DIR") or platformdirs.user_state_dir("tui")
    path = Path(chosen).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path
