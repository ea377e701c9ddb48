"""The app on a real worker that runs an older tui: it says so once with what to type; `/note`
reaches the journal and shows who left it; `/context` lists the sources added through the route
(age, size, a failing command's error); `/restart` moves the session to a new worker running the
tui installed, and the app follows it: the next turn streams in, no event is applied twice."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import stop_workers

from tui import __version__
from tui.access.local import LocalAccess
from tui.link.attachment import Attachment
from tui.link.slash import commands_for
from tui.protocol import Event
from tui.protocol.messages import ContextAddRequest
from tui.store import StatePaths
from tui.ui import TuiApp
from tui.ui.screens.help import help_text

Until = Callable[..., Awaitable[None]]


@pytest.fixture
def workers(state_dir: Path) -> Iterator[Path]:
    yield state_dir
    stop_workers(state_dir)


def lines(app: TuiApp) -> list[str]:
    """The transcript's lines outside turns (notes, listings, what the worker said)."""
    return [i.line for i in app.session.transcript.items if i.line]


def has(app: TuiApp, text: str) -> bool:
    return any(text in line for line in lines(app))


def journal(state_dir: Path, sid: str) -> list[dict[str, Any]]:
    path = StatePaths(state_dir).session(sid).journal
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def record_applied(attachment: Attachment) -> list[int]:
    """Every event the attachment applies, by seq (whole or caught up within a batch)."""
    seqs: list[int] = []
    for name in ("_apply", "_apply_behind"):
        applied = getattr(attachment, name)

        def spy(event: Event, *rest: Any, _applied: Any = applied) -> Any:
            seqs.append(event.seq)
            return _applied(event, *rest)

        setattr(attachment, name, spy)
    return seqs


@pytest.mark.slow
async def test_note_context_and_restart_in_the_app_onto_the_tui_installed(
    workers: Path, tmp_path: Path, until: Until, monkeypatch: pytest.MonkeyPatch
) -> None:
    access = LocalAccess(StatePaths(workers))
    monkeypatch.setenv("TUI_WORKER_VERSION", "0.0.1")  # the worker started now says it is older
    sid = await access.create(working_directory=str(tmp_path))
    link = await access.link(sid, client_id="tui:test:1")
    monkeypatch.delenv("TUI_WORKER_VERSION")  # the next worker runs the tui installed
    await access.context_add(sid, ContextAddRequest(name="notes", push=True))
    await access.context_push(sid, "notes", "hello")
    broken = ContextAddRequest(name="broken", cmd="echo no such target; exit 2", every=60)
    await access.context_add(sid, broken)
    app = TuiApp(link, state_dir=workers)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, app.session.attached.is_set, 30)
        applied = record_applied(app.session.attachment)
        older = f"this worker runs tui 0.0.1; tui {__version__} is installed: /restart moves the session"
        await until(pilot, lambda: has(app, older))
        assert "worker 0.0.1 (tui 0.1.0 installed: /restart)" in app.session.status.link_row(200)

        await pilot.press(*"/note hello", "enter")
        await until(pilot, lambda: has(app, "note from root: hello"))
        notes = [e for e in journal(workers, sid) if e["type"] == "note"]
        assert [(n["text"], n["by"]["name"]) for n in notes] == [("hello", "root")]

        await until(
            pilot,
            lambda: any(e["name"] == "broken" for e in journal(workers, sid) if e["type"] == "context_value"),
        )
        await pilot.press(*"/context", "enter")
        await until(pilot, lambda: has(app, "context: 2 sources"))
        listing = next(line for line in lines(app) if line.startswith("context: 2 sources")).splitlines()
        assert any(
            row.split()[0] == "notes" and "5 chars" in row and "· pushed" in row for row in listing[1:]
        )
        [failing] = [row for row in listing if row.split()[0] == "broken"]
        assert "s old" in failing and failing.endswith("failed: no such target (exit status 2)")

        app.session.submit("x = 1; print('before')")
        await until(
            pilot, lambda: [v.record.reply for v in app.session.transcript.turn_views()] == ["before\n"], 60
        )

        await pilot.press(*"/restart", "enter")
        took_over = "the Python variables of the turns above are gone; run what you need again"
        await until(pilot, lambda: has(app, took_over), 60)
        assert has(app, f"a new worker runs the session: tui {__version__}")
        # The access layer's restart, as `tui restart` words it
        said = f"the worker is restarting: restarted onto tui {__version__}; its programs' variables are gone"
        assert has(app, said)
        await until(pilot, lambda: app.session.status.status.version == __version__)
        assert "installed: /restart" not in app.session.status.link_row(200)

        app.session.submit("print('after')")
        await until(pilot, lambda: len(app.session.transcript.turn_views()) == 2 and not app.session.busy, 60)
        replies = [v.record.reply for v in app.session.transcript.turn_views()]
        assert replies == ["before\n", "after\n"]
        assert sum(older in line for line in lines(app)) == 1, "said once"
        assert sum("note from root: hello" in line for line in lines(app)) == 1
    assert applied == sorted(set(applied)), "every event applied once, in order"
    types = [e["type"] for e in journal(workers, sid) if e["seq"] in set(applied)]
    at = types.index("worker_leaving")
    assert "worker_started" in types[at:] and "turn_ended" in types[at:]

    # The worker's boundary stays in the transcript: on the next attach, and in every export.
    leaving = f"the worker is restarting: restarted onto tui {__version__}"
    again = TuiApp(await access.link(sid, client_id="tui:test:2"), state_dir=workers)
    async with again.run_test(size=(120, 40)) as pilot:
        await until(pilot, again.session.attached.is_set, 30)
        await until(pilot, lambda: has(again, took_over))
        assert has(again, leaving)
    env = {**os.environ, "TUI_STATE_DIR": str(workers)}
    for fmt, prefix in (("text", "· "), ("markdown", "*")):
        command = [sys.executable, "-m", "tui", "transcript", sid[:8], "--format", fmt]
        done = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, env=env)
        out = done.stdout
        assert f"{prefix}{leaving}" in out and f"{prefix}{took_over}" in out, out
        assert out.index(took_over) < out.index("print('after')"), "where it happened, before the next turn"


@pytest.mark.parametrize("usage", ["/note TEXT", "/context [remove NAME]", "/restart"])
def test_help_lists_every_command_of_the_app(usage: str) -> None:
    text = help_text(200)
    assert all(f"  {c.usage} " in text for c in commands_for("tui")), text
    assert f"  {usage} " in text
