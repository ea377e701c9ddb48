"""What the app does with its memory once started: the collector stops walking what start-up made.

Python's cyclic garbage collector walks every object it tracks at each full collection. Once a
session is attached the app holds about 100,000 of them (modules, classes, styles, widgets, the
first page of turns), and a full collection walked them all: 60 to 90 ms with the loop stopped,
once every few seconds while the reader pages or a turn streams (measured in
`bench/transcript.py`). `gc.freeze` moves them to a generation the collector never walks; what
is made later is collected as before, and everything is still freed when its last reference
goes.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_start_up"]


def freeze_start_up() -> None:
    """Take what exists now out of the collector's walks, once a process (later apps in the same
    process, as in tests, leave it as it is). No collection runs first: that would stall the
    app, just after its first frame, for as long as one of those walks, to free the few thousand
    objects start-up left in cycles (they stay)."""
    if not gc.get_freeze_count():
        gc.freeze()
