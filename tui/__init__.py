"""tui: attach a full-screen terminal UI to long-lived agent sessions."""

import os

__version__ = "0.1.0"
__all__ = ["__version__", "is_older", "worker_version"]


def worker_version() -> str:
    """The version a worker says it runs: `__version__`, unless ``TUI_WORKER_VERSION`` names
    another (how the tests start a worker that looks older than the tui installed)."""
    return os.environ.get("TUI_WORKER_VERSION") or __version__


def is_older(version: str | None, than: str = __version__) -> bool:
    """Whether `version` (a worker's) is older than `than` (the tui installed); dotted numbers
    are compared as numbers, anything else that differs counts as older. None: not known."""
    if not version or version == than:
        return False

    def parts(text: str) -> tuple[int, ...] | None:
        try:
            return tuple(int(p) for p in text.split("+")[0].split("."))
        except ValueError:
            return None

    mine, theirs = parts(version), parts(than)
    if mine is None or theirs is None:
        return True
    return mine < theirs
