"""The status row says when the worker's disk is full (the link's `Live.disk_full`), and stops
saying it once the worker says space is back."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tui.link.base import Live
from tui.testing.double import WorkerLink
from tui.ui import TuiApp
from tui.ui.messages import LinkStateChanged

Until = Callable[..., Awaitable[None]]

SENTENCE = "disk full: could not append to the journal /s/journal.jsonl (No space left on device)"


async def test_the_status_row_shows_the_workers_full_disk_and_when_it_is_over(until: Until) -> None:
    app = TuiApp(WorkerLink())
    async with app.run_test(size=(200, 40)) as pilot:
        await until(pilot, app.session.attached.is_set)
        row = app.session.status.link_row
        assert "disk full" not in row()
        app.session.post_message(LinkStateChanged(Live(disk_full=SENTENCE)))
        await until(pilot, lambda: f"live, {SENTENCE}" in row())
        app.session.post_message(LinkStateChanged(Live(disk_full="")))
        await until(pilot, lambda: "disk full" not in row())
        assert "live" in row()
