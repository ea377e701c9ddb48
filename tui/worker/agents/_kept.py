"""What the `acp` agent kind (`tui.worker.agents.acp`) keeps in the session's folder for a later
worker (`Kept`): the ACP session id, the agent's process group and its reported cost total
(``acp.json``), the fork ``tui fork`` asked for (``fork.json``) and what the next prompt tells the
agent of a rewind or a fork (``rewound.txt``); and what a turn spent, from the totals the agent
reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["FORK_FILE", "STATE_FILE", "Kept", "fork_told"]

STATE_FILE = "acp.json"
"""In the session's folder: the ACP session id, for ``session/load`` by a later worker."""
FORK_FILE = "fork.json"
"""In a forked session's folder until its agent started: the parent's ACP session id
(``session_id``), the turns of the parent undone (``undone``, ``to_turn``) and what the agent is
told instead when it cannot fork (``summary``)."""


class Kept:
    """The session folder's files of one ACP agent, and its cost totals."""

    def __init__(self, folder: Path) -> None:
        self.state_file = folder / STATE_FILE
        self.fork_file = folder / FORK_FILE
        self.rewound_file = folder / "rewound.txt"
        """What the next prompt tells the agent of a rewind (kept until it is told)."""
        seen = self.stored().get("cost_total")
        self.cost_seen: float | None = float(seen) if isinstance(seen, (int, float)) else None
        """The ACP session's cost in USD as the agent last reported it (its reports are totals),
        kept for the next worker (``acp.json``), which loads the same ACP session; None: not known
        (an agent session loaded whose total no worker kept: its first report is the baseline)."""
        self.cost_turn = 0.0
        """What the running turn spent so far: what the agent's totals added while it ran."""

    def stored(self) -> dict[str, Any]:
        try:
            value = json.loads(self.state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    def store(self, **fields: Any) -> None:
        from tui.store._atomic import write_atomic

        write_atomic(self.state_file, json.dumps({**self.stored(), **fields}).encode())

    def stored_session(self) -> str | None:
        value = self.stored().get("session_id")
        return value if isinstance(value, str) and value else None

    def fork_asked(self) -> dict[str, Any] | None:
        try:
            value = json.loads(self.fork_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return value if isinstance(value, dict) else None

    def rewound_told(self) -> str:
        try:
            return self.rewound_file.read_text()
        except OSError:
            return ""

    def added(self, total: float) -> float:
        """What the agent's session total `total` adds to the last one it reported."""
        seen, self.cost_seen = self.cost_seen, total
        if seen is None:
            return 0.0  # the first total of a loaded session no worker kept: the baseline
        if total < seen:
            return total  # a total started again (a new agent session): all of it is new
        return total - seen


def fork_told(undone: list[int], to_turn: object) -> str:
    """What the next prompt tells an agent that forked its parent's session of the parent's turns
    undone (`undone`, before turn `to_turn`); empty: none was."""
    if not undone:
        return ""
    turns = f"turn {undone[0]}" if len(undone) == 1 else f"turns {undone[0]}-{undone[-1]}"
    return (
        f"(This session is a fork of our conversation made before turn {to_turn}: {turns} "
        f"of it {'is' if len(undone) == 1 else 'are'} not part of this session, and the files "
        f"of this working folder are as they were before turn {to_turn}. Forget what "
        f"{'that turn' if len(undone) == 1 else 'those turns'} did and said; look at the "
        "files again before relying on them.)"
    )
