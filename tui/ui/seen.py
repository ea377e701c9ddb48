"""``seen.json``: the last cursor this client saw of each session it followed.

What "while you were away" compares against, keyed by where the session is (``local`` or
``remote NAME``) and its id. Never imports Textual.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Seen", "SeenStore"]


@dataclass(frozen=True)
class Seen:
    """Where a client left a session."""

    cursor: int
    """The last event seq it applied."""
    turn_id: str | None = None
    """The last ended turn it showed."""


class SeenStore:
    """The ``seen.json`` of one state dir."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "seen.json"

    def _read(self) -> dict[str, dict[str, dict[str, object]]]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, where: str, session_id: str) -> Seen | None:
        """Where this client left `session_id` (None: never attached from here)."""
        entry = self._read().get(where, {}).get(session_id)
        if not isinstance(entry, dict):
            return None
        cursor, turn_id = entry.get("cursor"), entry.get("turn_id")
        if not isinstance(cursor, int):
            return None
        return Seen(cursor=cursor, turn_id=turn_id if isinstance(turn_id, str) else None)

    def put(self, where: str, session_id: str, seen: Seen) -> None:
        """Remember where this client leaves `session_id` (written atomically)."""
        data = self._read()
        data.setdefault(where, {})[session_id] = {"cursor": seen.cursor, "turn_id": seen.turn_id}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".seen-")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1)
            os.replace(tmp, self.path)
        except OSError:
            Path(tmp).unlink(missing_ok=True)
