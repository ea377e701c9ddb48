"""A session's limits as the command line gives them (``--cost``, ``--tokens``, ``--turns``,
``--time``): for ``tui budget`` and for a new session (``tui``, ``tui send --new``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from tui.errors import UsageError

if TYPE_CHECKING:
    from tui.protocol import Budget

__all__ = ["budget_of", "limits_asked"]


def limits_asked(args: argparse.Namespace) -> dict[str, float | int]:
    """The limits given on the command line (``--cost`` …), each checked."""
    from tui.config import parse_duration

    asked: dict[str, float | int] = {}
    for name in ("cost", "tokens", "turns"):
        value = getattr(args, name, None)
        if value is not None:
            if value < 0:
                raise UsageError(f"--{name} takes 0 (no limit) or more, not {value}")
            asked[name] = value
    if getattr(args, "time", None) is not None:
        try:
            asked["time"] = parse_duration(args.time, off=True, unit=True)
        except ValueError as exc:
            raise UsageError(f"--time: {exc}") from exc
    return asked


def budget_of(args: argparse.Namespace) -> Budget | None:
    """A new session's limits from ``--cost`` … ; None when none was given (config.toml's then)."""
    from tui.config import load_config
    from tui.protocol import Budget

    asked = limits_asked(args)
    if not asked:
        return None
    defaults = load_config().budget.model_dump()
    return Budget.model_validate({**defaults, **{k: (v or None) for k, v in asked.items()}})
