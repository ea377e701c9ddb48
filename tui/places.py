"""Where tui keeps its files: the state dir, the config dir and its ``config.toml``, and the
app's theme as ``config.toml`` names it, read without the settings' models (`tui.config`), so the
app's first frame is drawn in it before pydantic is imported."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import platformdirs

__all__ = ["CONFIG_FILE", "config_dir", "config_path", "saved_theme", "state_dir"]

CONFIG_FILE = "config.toml"


def state_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The state dir: `override`, else ``$TUI_STATE_DIR``, else the platform's user state dir.

    The folder is made (mode 0700) when missing.
    """
    chosen = override or os.environ.get("TUI_STATE_DIR") or platformdirs.user_state_dir("tui")
    path = Path(chosen).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def config_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The config dir: `override`, else ``$TUI_CONFIG_DIR``, else the platform's user config dir.

    Nothing is made: a missing folder is an empty configuration.
    """
    chosen = override or os.environ.get("TUI_CONFIG_DIR") or platformdirs.user_config_dir("tui")
    return Path(chosen).expanduser().resolve()


def config_path(override: str | os.PathLike[str] | None = None) -> Path:
    """``config.toml`` in the config dir (see `config_dir`)."""
    return config_dir(override) / CONFIG_FILE


def saved_theme(directory: str | os.PathLike[str] | None = None) -> str | None:
    """The ``theme`` of ``config.toml`` (None: none, or a file that cannot be read: the commands
    that read the rest of it say what is wrong with it)."""
    try:
        theme = tomllib.loads(config_path(directory).read_text(encoding="utf-8")).get("theme")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return theme if isinstance(theme, str) else None
