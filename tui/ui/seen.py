"""``seen.json``: how far this user has seen each session they followed, in any window.

What "while you were away" compares against, keyed by where the session is (``local`` or
``remote NAME``) and its id. Every window of the user moves the mark as it shows turns (and never
back), so a window opened next to another one does not call "new" what the other just showed.
Never imports Textual.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tui.protocol import Transcript

__all__ = ["Seen", "SeenStore", "since_seen"]


@dataclass(frozen=True)
class Seen:
    """Where a client left a session."""

    cursor: int
    """The last event seq it applied."""
    turn_id: str | None = None
    """The last ended turn it showed."""
    at: float | None = None
    """When it was last seen (seconds since the epoch)."""
    question_id: str | None = None
    """The last question it showed."""


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
        at, question_id = entry.get("at"), entry.get("question_id")
        if not isinstance(cursor, int):
            return None
        return Seen(
            cursor=cursor,
            turn_id=turn_id if isinstance(turn_id, str) else None,
            at=float(at) if isinstance(at, int | float) else None,
            question_id=question_id if isinstance(question_id, str) else None,
        )

    def put(self, where: str, session_id: str, seen: Seen) -> None:
        """Remember that this user saw `session_id` up to `seen` (written atomically); a mark
        further on (another window's) is kept, only its time moves."""
        data = self._read()
        before = data.get(where, {}).get(session_id)
        entry: dict[str, object] = {
            "cursor": seen.cursor,
            "turn_id": seen.turn_id,
            "at": seen.at,
            "question_id": seen.question_id,
        }
        further = before.get("cursor") if isinstance(before, dict) else None
        if isinstance(before, dict) and isinstance(further, int) and further > seen.cursor:
            entry = {**before, "at": seen.at}
        data.setdefault(where, {})[session_id] = entry
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".seen-")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1)
            os.replace(tmp, self.path)
        except OSError:
            Path(tmp).unlink(missing_ok=True)


def since_seen(seen: Seen | None, transcript: Transcript) -> tuple[list[str], str | None]:
    """What happened since this user last saw the session (``2 turns ended (1 failed)``, ``a
    turn is running``, ``a question is waiting``) and the first turn that ended since, if any."""
    if seen is None or transcript.cursor <= seen.cursor:
        return [], None
    new = [t for t in transcript.turns if (t.ended_seq or 0) > seen.cursor]
    failed = sum(1 for t in new if t.outcome in ("failed", "interrupted"))
    parts = []
    if new:
        at_least = transcript.has_more and len(new) == len(transcript.turns)
        count = f"{'at least ' if at_least else ''}{len(new)}"
        parts.append(
            f"{count} turn{'s' if len(new) != 1 else ''} ended" + (f" ({failed} failed)" if failed else "")
        )
    current = transcript.current
    if current is not None and current.started_seq > seen.cursor:
        parts.append("a turn is running")
    question = transcript.question
    if question is not None and question.question_id != seen.question_id:
        parts.append("a question is waiting")
    return parts, (new[0].turn_id if new and parts else None)
