"""A picture of `/context`'s listing (kept in `snapshots/test_ui_context_snapshot/`): each source's
age and size, what it runs, and a failing command's error. The worker's listing is answered with
fixed times, so the picture changes only when what the user sees changes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from helpers import app_until
from test_ui_snapshots import T0, SnapCompare, history, make_app, settle
from textual.pilot import Pilot

from tui.protocol.messages import ContextEntry, ContextList
from tui.testing.double import LinkRequest, WorkerLink

LISTED = ContextList(
    now=T0,
    sources=[
        ContextEntry(
            name="ci",
            kind="cmd",
            cmd="gh run list -L 1",
            every=60,
            value="green\n",
            size=6,
            at=T0 - timedelta(seconds=12),
        ),
        ContextEntry(
            name="tests",
            kind="cmd",
            cmd="make test",
            every=300,
            error=True,
            size=2048,
            value="FAILED tests/test_app.py::test_login\n(exit status 2)",
            at=T0 - timedelta(minutes=4),
        ),
        ContextEntry(name="todo", kind="file", path="TODO.md", every=10, value="- ship", size=6, at=T0),
        ContextEntry(name="deploy", kind="push"),
    ],
)


def listing(request: LinkRequest) -> Any:
    return LISTED if request.route == "context_list" else NotImplemented


async def typed(link: WorkerLink, pilot: Pilot[Any]) -> None:
    await pilot.press(*"/context", "enter")
    app = pilot.app
    await app_until(pilot, lambda: any(i.line.startswith("context: 4") for i in app.session.transcript.items))  # type: ignore[attr-defined]


def test_context_lists_the_sources(snap_compare: SnapCompare) -> None:
    link = WorkerLink(history=history(), handler=listing)
    assert snap_compare(make_app(link), terminal_size=(110, 24), run_before=settle(typed, link))
