"""`tui sessions` reads stopped sessions from the summary the workers keep (`tui.summary`) or
from their folders: what it prints is what the access layer's summaries print, for every kind of
record on disk and at each step of real workers coming and going."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import shutil
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from helpers import wait_until

from client.helpers import kill_worker, new_session, tui
from tui.access.local import LocalAccess
from tui.commands.listing import Row, as_json_text, show
from tui.protocol.events import Budget
from tui.store import StatePaths, archive_session, create_session, get_session, is_live, save_session
from tui.worker.process import take_session

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
        assert listed.stdout == json.dumps([s.model_dump(mode="json") for s in summed], indent=2) + "\n"
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


def _as_listed(flags: list[str]) -> list[dict[str, object]]:
    """What `tui sessions --json` prints, a subprocess as a user runs it, less what a live worker
    counts from one moment to the next (its memory and how long it has been idle)."""
    listed = tui("sessions", "--json", *flags)
    assert listed.returncode == 0, listed.stderr
    return [{k: v for k, v in row.items() if k not in MOVING} for row in json.loads(listed.stdout)]


MOVING = ("memory", "idle_seconds", "quiet_seconds")


def _truth(state: StatePaths, every: bool) -> list[dict[str, object]]:
    summed = asyncio.run(LocalAccess(state).list_sessions(include_archived=every))
    return [{k: v for k, v in s.model_dump(mode="json").items() if k not in MOVING} for s in summed]


def _listed_as_the_folders_say(state: StatePaths, step: str) -> None:
    for flags in ([], ["--all"]):
        assert _as_listed(flags) == _truth(state, bool(flags)), f"{step}, tui sessions {' '.join(flags)}"


def test_sessions_lists_what_the_folders_say_as_real_workers_come_and_go(
    state_dir: Path, tmp_path: Path
) -> None:
    """Each step changes the sessions the way a user or a worker does; after each, what `tui
    sessions` prints from the summary is what the access layer reads from the folders."""
    state = StatePaths(state_dir)
    first, second, third = (new_session(state_dir, f"print({n})") for n in range(3))
    _listed_as_the_folders_say(state, "three workers idle after a turn")
    ran = tui("send", first, "print('again')", "--wait")
    assert ran.returncode == 0, ran.stderr
    assert tui("stop", first).returncode == 0
    _listed_as_the_folders_say(state, "a worker stopped after a second turn")
    kill_worker(state_dir, second)
    wait_until(lambda: not is_live(state.session(second).lock), "the killed worker's lock to be free")
    _listed_as_the_folders_say(state, "a worker killed outright")
    assert tui("archive", third).returncode == 0
    _listed_as_the_folders_say(state, "a live session archived")
    made = create_session(state, working_directory=tmp_path, title="no worker yet")
    _listed_as_the_folders_say(state, "a session made without a worker")
    # By hand: a session's folder deleted, another's copied under a new id, a record edited in
    # place (seen once the sessions folder's time moves, as docs/performance.md says).
    shutil.rmtree(state.session(first).root)
    copy = state.session("0123456789abcdef").root
    shutil.copytree(state.session(made.id).root, copy)
    record = json.loads(state.session(made.id).record.read_text())
    state.session(made.id).record.write_text(json.dumps({**record, "title": "renamed by hand"}))
    os.utime(state.sessions)
    _listed_as_the_folders_say(state, "folders deleted, copied and edited by hand")
    assert "renamed by hand" in tui("sessions").stdout


def test_a_worker_in_its_first_moments_is_listed_live(state_dir: Path, tmp_path: Path) -> None:
    """Its lock held, no worker.json written yet: the session is live, not stopped."""
    state = StatePaths(state_dir)
    sid = create_session(state, working_directory=tmp_path).id
    state.session(sid).journal.write_text('{"seq":1,"at":"2026-01-01T00:00:00Z","type":"worker_started"}\n')
    assert tui("sessions").returncode == 0  # the summary holds it, stopped
    lock = take_session(state, sid)  # what a worker does first
    try:
        listed = _as_listed([])
        assert [(s["id"], s["live"], s["state"]) for s in listed] == [(sid, True, "idle")]
    finally:
        lock.release()


def test_a_created_at_without_a_zone_is_listed_as_utc(state_dir: Path, tmp_path: Path) -> None:
    state = StatePaths(state_dir)
    plain = create_session(state, working_directory=tmp_path, title="plain").id
    budget = create_session(state, working_directory=tmp_path, title="budget", budget=Budget(turns=3)).id
    for sid in (plain, budget):
        record = json.loads(state.session(sid).record.read_text())
        state.session(sid).record.write_text(json.dumps({**record, "created_at": "2026-01-01T10:00:00"}))
    table = tui("sessions")
    assert table.returncode == 0, table.stderr
    assert "plain" in table.stdout and "budget" in table.stdout
    listed = _as_listed([])
    assert [s["created_at"] for s in listed] == ["2026-01-01T10:00:00Z"] * 2
    assert listed == _truth(state, False)


def test_the_json_of_stopped_sessions_is_json_dumps_byte_for_byte() -> None:
    when = datetime(2026, 1, 1, 10, tzinfo=timezone(timedelta(hours=2)))
    odd = Row(
        "a" * 16, 'é "q" \\ \x01 \u2028 😀', "/tmp/ü", when, None, "model", "m-ä", True, "b" * 16, "archived"
    )
    plain = Row("c" * 16, "", "/w", when.astimezone(UTC), when, "python", None, False, None)
    rows = [odd, plain]
    for listed in ([], rows, rows[::-1]):
        assert as_json_text(listed) == json.dumps([r.as_json() for r in listed], indent=2)
