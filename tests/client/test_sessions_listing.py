"""`tui sessions` reads stopped sessions straight from their folders (`tui.commands.listing`):
what it prints is what the access layer's summaries print, for every kind of record on disk."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from client.helpers import tui
from tui.access.local import LocalAccess
from tui.commands.listing import show
from tui.protocol.events import Budget
from tui.store import StatePaths, archive_session, create_session, get_session, save_session

DAYS = 3 * 86400


def _sessions(state: StatePaths, tmp_path: Path) -> dict[str, str]:
    """Sessions of every shape a state dir holds, stopped, by what each is."""
    made = {}
    plain = create_session(state, working_directory=tmp_path, title="plain")
    made["plain"] = plain.id
    made["child"] = create_session(state, working_directory=tmp_path, title="a child", parent_id=plain.id).id
    made["budget"] = create_session(state, working_directory=tmp_path, budget=Budget(turns=3)).id
    made["archived"] = create_session(state, working_directory=tmp_path, title="old").id
    archive_session(state, made["archived"])
    made["offset"] = create_session(
        state, working_directory=tmp_path / "elsewhere", title="offset", model="m"
    ).id
    made["no journal"] = create_session(state, working_directory=tmp_path, title="never started").id
    made["crashed"] = create_session(state, working_directory=tmp_path, title="its worker died").id
    made["broken"] = create_session(state, working_directory=tmp_path).id
    then = time.time() - DAYS
    for what, sid in made.items():
        paths = state.session(sid)
        # Made days ago (the AGE column does not turn over between two listings); one written
        # with its time in another zone, as a hand or another tool may have.
        record = get_session(state, sid)
        created = datetime.fromtimestamp(then - 60, UTC)
        save_session(
            state,
            record.model_copy(
                update={
                    "created_at": created.astimezone(timezone(timedelta(hours=2)))
                    if what == "offset"
                    else created
                }
            ),
        )
        if what != "no journal":
            paths.journal.write_text('{"seq":1,"at":"2026-01-01T00:00:00Z","type":"worker_started"}\n')
            os.utime(paths.journal, (then, then))
    # A worker killed outright leaves its worker.json; its lock is free.
    state.session(made["crashed"]).sidecar.write_text('{"pid": 1, "socket": "/nowhere"}\n')
    state.session(made["crashed"]).lock.touch()
    state.session(made["broken"]).record.write_text("{not json")
    return made


def test_sessions_lists_every_kind_of_stopped_session_as_the_access_layer_sums_it_up(
    state_dir: Path, tmp_path: Path
) -> None:
    state = StatePaths(state_dir)
    made = _sessions(state, tmp_path)
    for flags in ([], ["--all"]):
        every = "--all" in flags
        summed = asyncio.run(LocalAccess(state).list_sessions(include_archived=every))
        listed = tui("sessions", "--json", *flags)
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout) == [s.model_dump(mode="json") for s in summed]
        ids = [row["id"] for row in json.loads(listed.stdout)]
        assert (made["archived"] in ids) is every and made["broken"] not in ids
        assert {made[k] for k in ("plain", "child", "budget", "offset", "no journal", "crashed")} <= set(ids)
        table = tui("sessions", *flags)
        assert table.returncode == 0, table.stderr
        shown = io.StringIO()
        with contextlib.redirect_stdout(shown):
            show(summed, argparse.Namespace(json=False, all=every), lambda *w: " ".join(("tui", *w)))
        assert table.stdout == shown.getvalue()
        assert "└ a child" in table.stdout and "3d" in table.stdout
