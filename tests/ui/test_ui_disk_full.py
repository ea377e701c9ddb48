"""The status row says when the worker's disk is full (the worker's ``: disk_full`` notice on the
event stream, the link's `Live.disk_full`), and stops saying it once the worker says space is back."""

from __future__ import annotations

import errno
import os
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tui.errors import DiskFull
from tui.protocol import Note
from tui.testing.double import WorkerLink
from tui.ui import TuiApp

Until = Callable[..., Awaitable[None]]


async def test_the_status_row_shows_the_workers_full_disk_and_when_it_is_over(
    until: Until, monkeypatch: pytest.MonkeyPatch
) -> None:
    link = WorkerLink()
    journal = link.worker.writer.journal
    full = [False]
    real = os.write

    def write(fd: int, data: Any) -> int:
        if full[0] and fd == journal._write_fd:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    app = TuiApp(link)
    async with app.run_test(size=(200, 40)) as pilot:
        await until(pilot, app.session.attached.is_set)
        row = app.session.status.link_row
        assert "disk full" not in row()
        full[0] = True
        with pytest.raises(DiskFull):
            link.emit(Note(text="not kept"))  # the worker cannot write its journal: it says so
        await until(pilot, lambda: "live, disk full: could not append to the journal" in row())
        full[0] = False
        link.emit(Note(text="kept"))  # the next event is written: the worker says space is back
        await until(pilot, lambda: "disk full" not in row())
        assert "live" in row()
