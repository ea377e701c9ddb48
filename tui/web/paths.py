"""Where the web bridge keeps its files: ``web/`` in the state dir."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["WebPaths"]


@dataclass(frozen=True)
class WebPaths:
    """The files of ``web/``: the owner token's digest, participants, the running server."""

    root: Path
    """``STATE/web``."""

    @classmethod
    def of(cls, state_root: Path) -> WebPaths:
        """The ``web/`` folder of a state dir, made (0700) when missing."""
        root = state_root / "web"
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        return cls(root)

    @property
    def owner_digest(self) -> Path:
        """The SHA-256 digest (hex) of the owner token; never the token."""
        return self.root / "owner.sha256"

    @property
    def participants(self) -> Path:
        return self.root / "participants.json"

    @property
    def participants_lock(self) -> Path:
        """flock()ed around every read-modify-write of `participants` (``tui share`` and ``tui web``)."""
        return self.root / "participants.lock"

    @property
    def server(self) -> Path:
        """``server.json``: the running ``tui web``'s url and pid."""
        return self.root / "server.json"
