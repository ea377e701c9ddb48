"""The page is a client of `tui web`'s attachment: it shows what the terminal shows, in the
terminal's words (a child's start and end, a note with its author, an answer by a parent, a
restart; a stop reason: tests/web/test_page.py), and its stream of changes resumes with no gap
and no repeat.

The words the terminal shows are read the way `tui attach` reads them: an `Attachment` on a
`LocalLink` of the same session (its first transcript, worded by the same functions), and the
lines the journal's events make live.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import TIMEOUT

from tui.link import changes as ch
from tui.link.attachment import Attachment
from tui.link.local import LocalLink
from tui.protocol import WorkerLeaving, WorkerStarted, decode_event
from tui.protocol.state import steps
from tui.protocol.wording import leaving_line, new_worker_line
from tui.store import StatePaths

from .conftest import CHROMIUM, DESKTOP, Web, wake
from .test_page import _turn

if not Path(CHROMIUM).exists():
    pytest.skip("chromium is not installed (apt-get install chromium)", allow_module_level=True)


def _tui(web: Web, *args: str) -> str:
    env = {**os.environ, "TUI_STATE_DIR": str(web.state)}
    out = subprocess.run(
        [sys.executable, "-m", "tui", *args], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout + out.stderr


def _terminal_words(state: Path, sid: str) -> set[str]:
    """The lines `tui attach` draws of the session as it attaches: the lines said since the last
    turn, and each turn's lines (before it, and among its steps)."""

    async def read() -> set[str]:
        attachment = Attachment(LocalLink(StatePaths(state), sid), keep_turns=None)
        try:
            batch = await attachment.next(TIMEOUT)
            assert batch is not None
            attached = next(c for c in batch if isinstance(c, ch.Attached))
            transcript = attached.transcript
            words = set(transcript.notes)
            for record in [*transcript.turns, *([transcript.current] if transcript.current else [])]:
                words |= {line.text for line in record.lines}
                words |= {text for kind, text in steps(record) if kind == "line"}  # type: ignore[misc]
            return words
        finally:
            await attachment.close()

    with ThreadPoolExecutor(1) as thread:  # Playwright's loop runs in this one
        return thread.submit(asyncio.run, read()).result()


def _journal(state: Path, sid: str, typ: str) -> list[Any]:
    path = StatePaths(state).session(sid).journal
    lines = [line for line in path.read_bytes().splitlines() if f'"type":"{typ}"'.encode() in line]
    return [decode_event(line) for line in lines]


def _lines(page: Any) -> list[str]:
    return [n.inner_text() for n in page.query_selector_all("#transcript .line")]


def test_the_page_shows_children_notes_answers_by_a_parent_and_restarts_in_the_terminals_words(
    web: Web, page_of: Any
) -> None:
    parent = web.session()
    wake(web, parent)
    page = page_of(DESKTOP)
    page.goto(web.link)
    page.wait_for_selector("#newsession")
    page.goto(f"{web.url}/#s={parent}")
    page.wait_for_selector("#prompt")

    _tui(web, "note", parent, "look at the logs first")
    page.wait_for_selector("#transcript .line.note:has-text('look at the logs first')")
    _tui(web, "send", "--new", "--parent", parent, "print(6*7)", "--wait")
    page.wait_for_selector("#transcript .line.child:has-text(' completed')")
    # a question of the session answered by its parent session's model (its client id says so)
    _turn(web, parent, "x = ask('Deploy?', options=['yes', 'no'])\nprint('got', x)")
    question = page.wait_for_selector("#question .qtext:has-text('Deploy?')")
    assert question is not None
    asked = web.client().get(f"/api/sessions/{parent}/transcript").json()["question"]
    answer = {"question_id": asked["question_id"], "selected": ["yes"], "client_id": "by-parent:0a1b2c3d:7"}
    assert web.client().post(f"/api/sessions/{parent}/answer", json=answer).status_code == 200
    page.wait_for_selector(".turn .outcome.completed")
    page.wait_for_selector("#transcript :text('got yes')")

    terminal = _terminal_words(web.state, parent)
    shown = _lines(page)
    for said in terminal:
        assert said in shown, (said, shown)  # every line the terminal draws, word for word
    (child,) = [e.child_id for e in _journal(web.state, parent, "child_started")]
    for line in (
        "note from " + terminal_owner(terminal) + ": look at the logs first",
        f"child {child[:8]} started by " + terminal_owner(terminal) + ": print(6*7)",
        f"child {child[:8]} completed",
        "answered by parent 0a1b2c3d: yes",
    ):
        assert line in terminal and line in shown, (line, terminal, shown)

    # A restart: the worker's leaving and the new worker, lines the page has no code of its own for.
    restarted = web.client().post(f"/api/sessions/{parent}/restart", json={"wait": TIMEOUT})
    assert restarted.status_code == 200, restarted.text
    (started,) = _journal(web.state, parent, "worker_started")[-1:]
    assert isinstance(started, WorkerStarted)
    page.wait_for_selector(f"#transcript .line:text-is('{new_worker_line(started.version)}')")
    (leaving,) = _journal(web.state, parent, "worker_leaving")[-1:]
    assert isinstance(leaving, WorkerLeaving) and leaving_line(leaving) in _lines(page)


def terminal_owner(words: set[str]) -> str:
    """The owner's name as the terminal's note line says it."""
    note = next(w for w in words if w.endswith(": look at the logs first"))
    return note.removeprefix("note from ").removesuffix(": look at the logs first")


def _changes(client: httpx.Client, sid: str, cursor: str, until: str) -> list[tuple[str, dict[str, Any]]]:
    """The changes of ``…/changes`` after `cursor` (id, data), up to the first whose type is `until`."""
    seen: list[tuple[str, dict[str, Any]]] = []
    headers = {"Last-Event-ID": cursor} if cursor else {}
    with client.stream("GET", f"/api/sessions/{sid}/changes", headers=headers, timeout=TIMEOUT) as r:
        assert r.status_code == 200, r.read()
        at = ""
        for line in r.iter_lines():
            if line.startswith("id: "):
                at = line[4:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                seen.append((at, data))
                if data["type"] == until:
                    return seen
    raise AssertionError(f"the stream ended before {until}: {[d['type'] for _, d in seen]}")


def test_a_dropped_stream_resumes_with_no_gap_and_no_repeat_and_a_late_joiner_gets_a_snapshot(
    web: Web,
) -> None:
    sid = web.session()
    wake(web, sid)
    c = web.client()
    first = _changes(c, sid, "", "Snapshot")
    (cursor, snapshot), *_ = first
    assert snapshot["snapshot"] and snapshot["turns"] == []
    # a turn whose lines come one by one; the stream is dropped after its second one
    program = "import time\nfor i in range(6):\n    print('line', i, flush=True)\n    time.sleep(0.05)"
    _turn(web, sid, program)
    got: list[tuple[str, dict[str, Any]]] = []
    headers = {"Last-Event-ID": cursor}
    with c.stream("GET", f"/api/sessions/{sid}/changes", headers=headers, timeout=TIMEOUT) as r:
        at = ""
        for line in r.iter_lines():
            if line.startswith("id: "):
                at = line[4:]
            elif line.startswith("data: "):
                got.append((at, json.loads(line[6:])))
                if "".join(d["step"]["text"] for _, d in got if d.get("step")).count("line") >= 2:
                    break  # dropped mid-turn
    assert got[0][1]["type"] != "Snapshot"  # the cursor was in the ring: what follows it, no snapshot
    rest = _changes(c, sid, got[-1][0], "TurnEnded")
    assert rest[0][1]["type"] != "Snapshot"
    ids = [cursor, *(i for i, _ in got), *(i for i, _ in rest)]
    epoch = cursor.split("-")[0]
    numbers = [int(i.split("-")[1]) for i in ids]
    assert all(i.startswith(epoch + "-") for i in ids)
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))  # no gap, no repeat
    streamed = "".join(d["step"]["text"] for _, d in [*got, *rest] if d.get("step") and d["turn_id"])
    assert streamed == "".join(f"line {i}\n" for i in range(6))
    ended = rest[-1][1]["turns"][0]
    assert ended["outcome"] == "completed" and ended["steps"][0]["text"] == streamed

    # a page joining now (or one whose cursor is from another epoch) gets the state first
    for late in ("", "0000-3"):
        (at, joined), *_ = _changes(c, sid, late, "Snapshot")
        assert joined["type"] == "Snapshot" and at.startswith(epoch + "-")
        assert [t["steps"][0]["text"] for t in joined["turns"]] == [streamed]
        assert joined["status"]["state"] == "idle"
