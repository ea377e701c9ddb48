"""Children, sessions that start sessions, end to end: real `tui` processes and real workers, the
parent's worker starting each child through the same access layer as the commands."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_model_server import Call, FakeModelServer, Text
from helpers import wait_until

from client.helpers import changes_until, kill_worker, of, sessions, tui, worker_pid
from tui.access.local import LocalAccess, process_parents, tree_memory
from tui.link import changes as ch
from tui.link.attachment import Attachment
from tui.protocol.principal import owner_name
from tui.store import StatePaths

DELEGATE = 'r = delegate("print(6*7)"); print("child said", r.strip())'
ASKING_CHILD = "x = ask('Go on?', options=['yes', 'no']); print('child got', x)"


def journal(state_dir: Path, sid: str) -> list[dict[str, Any]]:
    path = StatePaths(state_dir).session(sid).journal
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def of_type(state_dir: Path, sid: str, typ: str) -> list[dict[str, Any]]:
    return [e for e in journal(state_dir, sid) if e["type"] == typ]


def test_delegate_returns_the_childs_reply_and_sessions_draws_the_tree(state_dir: Path) -> None:
    out = tui("send", "--new", DELEGATE, "--wait")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "child said 42\n"
    parent = out.stderr.strip().splitlines()[0]

    rows = {r["id"]: r for r in sessions()}
    (child,) = [sid for sid, r in rows.items() if r["parent_id"] == parent]
    assert rows[parent]["parent_id"] is None
    assert rows[child]["folder"] == rows[parent]["folder"]

    # The parent's journal says where the child started and ended, with its id.
    (started,) = of_type(state_dir, parent, "child_started")
    (ended,) = of_type(state_dir, parent, "child_ended")
    assert started["child_id"] == child and started["prompt"] == "print(6*7)"
    assert ended["child_id"] == child and ended["outcome"] == "completed"
    status = of_type(state_dir, parent, "status")[-1]
    assert status["children"] == {"done": 1}

    # /children lists them (the piped surface; the app shares the slash table and the lines).
    listed = tui("attach", parent[:8], input="/children\n")
    assert listed.returncode == 0, listed.stderr
    assert f"{child[:8]}  done  print(6*7)  `tui attach {child[:8]}`" in listed.stdout + listed.stderr

    table = tui("sessions").stdout.splitlines()
    at = next(i for i, line in enumerate(table) if line.startswith(parent[:8]))
    assert table[at + 1].startswith(child[:8]), table
    assert re.search(r"└ print\(6\*7\)", table[at + 1]), table


def test_send_new_parent_makes_a_child_in_the_parents_folder(state_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "proj"
    folder.mkdir()
    first = tui("send", "--new", "--dir", str(folder), "print('parent')", "--wait")
    assert first.returncode == 0, first.stderr
    parent = first.stderr.strip().splitlines()[0]

    out = tui("send", "--new", "--parent", parent[:6], "import os; print(os.getcwd())", "--wait")
    assert out.returncode == 0, out.stderr
    child = out.stderr.strip().splitlines()[0]
    assert out.stdout == f"{folder}\n"
    (row,) = [r for r in sessions() if r["id"] == child]
    assert row["parent_id"] == parent and row["folder"] == str(folder)

    missing = tui("send", "--new", "--parent", "ffffffff", "print(1)")
    assert missing.returncode != 0
    assert len(missing.stderr.strip().splitlines()) == 1 and "ffffffff" in missing.stderr
    misused = tui("send", parent, "print(1)", "--parent", parent)
    assert misused.returncode == 2 and "--parent goes with --new" in misused.stderr


def test_a_failing_child_raises_tool_error_with_its_error(state_dir: Path) -> None:
    program = 'try:\n    delegate("1/0")\nexcept ToolError as e:\n    print("child failed:", e)'
    out = tui("send", "--new", program, "--wait")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("child failed: child ")
    assert "ZeroDivisionError" in out.stdout
    parent = out.stderr.strip().splitlines()[0]
    (ended,) = of_type(state_dir, parent, "child_ended")
    assert ended["outcome"] == "failed" and "ZeroDivisionError" in ended["error"]


def test_delegate_without_wait_returns_the_childs_id(state_dir: Path) -> None:
    out = tui("send", "--new", 'print(delegate("print(1)", wait=False))', "--wait")
    assert out.returncode == 0, out.stderr
    parent = out.stderr.strip().splitlines()[0]
    child = out.stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{16}", child)
    wait_until(lambda: of_type(state_dir, parent, "child_ended"), "the child to end")
    assert [r["parent_id"] for r in sessions() if r["id"] == child] == [parent]


def test_nested_children_two_deep(state_dir: Path) -> None:
    program = "r = delegate(\"print('middle', delegate('print(6*7)').strip())\"); print('top', r.strip())"
    out = tui("send", "--new", program, "--wait")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "top middle 42\n"
    top = out.stderr.strip().splitlines()[0]
    rows = {r["id"]: r for r in sessions()}
    (middle,) = [sid for sid, r in rows.items() if r["parent_id"] == top]
    (bottom,) = [sid for sid, r in rows.items() if r["parent_id"] == middle]
    table = tui("sessions").stdout.splitlines()
    order = [line[:8] for line in table[1:]]
    assert order.index(top[:8]) + 1 == order.index(middle[:8])
    assert order.index(middle[:8]) + 1 == order.index(bottom[:8])
    assert "  └ print(6*7)" in table[order.index(bottom[:8]) + 1]


def test_a_childs_question_is_answered_from_the_parents_side(state_dir: Path) -> None:
    program = f"r = delegate({ASKING_CHILD!r})"
    waited = tui("send", "--new", program, "--wait")
    # The parent waits for its child, which waits for an answer: exit 3, the child's commands.
    assert waited.returncode == 3, waited.stderr
    parent = waited.stderr.strip().splitlines()[0]
    (started,) = of_type(state_dir, parent, "child_started")
    child = started["child_id"]
    assert f"waits for its child {child[:8]}" in waited.stderr
    assert f"tui answer {child[:8]} --option 1" in waited.stderr
    asking = of_type(state_dir, parent, "child_asking")
    assert asking[-1]["child_id"] == child and asking[-1]["question"]["text"] == "Go on?"

    # Answered through the parent: its worker hands the answer to the child's.
    answered = tui("answer", parent[:8], "--option", "1")
    assert answered.returncode == 0, answered.stderr
    got = tui("send", parent[:8], "print(r.strip())", "--wait")
    assert got.returncode == 0, got.stderr
    assert got.stdout == "child got yes\n"
    assert of_type(state_dir, parent, "child_asking")[-1]["question"] is None
    resolved = of_type(state_dir, child, "question_resolved")
    assert [e["how"] for e in resolved] == ["answered"] and resolved[0]["selected"] == ["yes"]
    # The child's own clients see it answered: a second answer finds nothing pending.
    late = tui("answer", child[:8], "--option", "2")
    assert late.returncode != 0


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as running:
        config = Path(os.environ["TUI_CONFIG_DIR"]) / "config.toml"
        config.write_text(
            "[children]\nmodels = true\n\n"  # the model may start model children (paid by you)
            f'[models.local]\nprovider = "openai"\nmodel = "fake-1"\nbase_url = "{running.url}"\n'
        )
        yield running


def test_a_model_parent_delegates_and_counts_its_childrens_tokens(
    state_dir: Path, server: FakeModelServer
) -> None:
    # The model calls delegate twice: a python child, then a model child (whose own request the
    # server answers by echoing its prompt).
    server.script(
        Call("delegate", {"prompt": "print(6*7)"}),
        Call("delegate", {"prompt": "hello child", "model": "local"}),
    )
    out = tui("send", "--new", "--model", "local", "split the work", "--wait")
    assert out.returncode == 0, out.stderr
    parent = out.stderr.strip().splitlines()[0]
    assert "You said: hello child" in out.stdout  # the model read its model child's reply
    told = json.dumps(server.requests[-1]["messages"])  # the parent's last request
    assert "42" in told and "You said: hello child" in told  # both children's replies
    children = [r for r in sessions() if r["parent_id"] == parent]
    assert sorted(r["agent"] for r in children) == ["model", "python"]

    ended = of_type(state_dir, parent, "child_ended")
    assert [e["outcome"] for e in ended] == ["completed", "completed"]
    child_in = sum(e["tokens_in"] for e in ended)
    assert child_in > 0  # the model child spent tokens
    own_in = sum(e["usage"].get("input", 0) for e in of_type(state_dir, parent, "turn_ended"))
    status = of_type(state_dir, parent, "status")[-1]
    assert status["tokens_in"] == own_in + child_in
    assert status["children"] == {"done": 2}


def test_a_childs_worker_dying_fails_the_waiting_delegate_in_one_line(state_dir: Path) -> None:
    slow = "import time; print('child up', flush=True); time.sleep(60)"
    program = f"try:\n    delegate({slow!r})\nexcept ToolError as e:\n    print('failed:', e)"
    waiting = subprocess.Popen(
        [sys.executable, "-m", "tui", "send", "--new", program, "--wait"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert waiting.stderr is not None
        parent = waiting.stderr.readline().strip()
        wait_until(lambda: of_type(state_dir, parent, "child_started"), "the child to start")
        child = of_type(state_dir, parent, "child_started")[0]["child_id"]
        wait_until(
            lambda: any("child up" in e.get("text", "") for e in of_type(state_dir, child, "text")),
            "the child's program to run",
        )
        kill_worker(state_dir, child)
        out, _ = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert waiting.returncode == 0
    (line,) = out.splitlines()
    assert line.startswith(f"failed: child {child[:8]} failed: ") and "killed or crashed" in line
    (ended,) = of_type(state_dir, parent, "child_ended")
    assert ended["outcome"] == "failed"


def test_stopping_archiving_deleting_a_parent_leaves_its_children(state_dir: Path) -> None:
    # A child still running (a finished one's worker is stopped when its delegated turn ends).
    out = tui("send", "--new", "delegate('import time; time.sleep(600)', wait=False)", "--wait")
    assert out.returncode == 0, out.stderr
    parent = out.stderr.strip().splitlines()[0]
    rows = {r["id"]: r for r in sessions()}
    (child,) = [sid for sid, r in rows.items() if r["parent_id"] == parent]
    # The child's worker, started by the parent's, is forked by the state dir's forking process
    # as every worker is (not the parent's descendant then); its memory is in its own row, never
    # in the parent's too, whichever way it started.
    pids = {sid: worker_pid(state_dir, sid) for sid in (parent, child)}
    parents = process_parents()
    assert b"tui.commands.forker" in Path(f"/proc/{parents[pids[child]]}/cmdline").read_bytes()
    alone = tree_memory(pids[parent], parents, others=[pids[child]])
    assert alone is not None and rows[parent]["memory"] < alone + rows[child]["memory"] // 2, rows

    stopped = tui("stop", parent[:8])
    assert stopped.returncode == 0, stopped.stderr
    assert "its child stays as it is (a child is a session of its own, not stopped" in stopped.stderr
    assert f"`tui stop {child[:8]}`" in stopped.stderr
    assert [r["live"] for r in sessions() if r["id"] == child] == [True]

    archived = tui("archive", parent[:8])
    assert archived.returncode == 0 and f"`tui archive {child[:8]}`" in archived.stderr
    # Its parent no longer listed, the child is at the top of the tree.
    table = tui("sessions").stdout
    assert parent[:8] not in table and re.search(rf"^{child[:8]}\s+import time", table, re.M), table

    deleted = tui("delete", parent[:8])
    assert deleted.returncode == 0 and f"`tui delete {child[:8]}`" in deleted.stderr
    assert [r["parent_id"] for r in sessions() if r["id"] == child] == [parent]


def test_a_model_parent_answers_its_childs_question_when_its_profile_allows(
    state_dir: Path, server: FakeModelServer
) -> None:
    config = Path(os.environ["TUI_CONFIG_DIR"]) / "config.toml"
    config.write_text(config.read_text() + 'answers_children = "options"\n')
    # The model delegates to a python child that asks; the model is asked, and picks "yes".
    server.script(Call("delegate", {"prompt": ASKING_CHILD}), Text(["yes"]))
    out = tui("send", "--new", "--model", "local", "go", "--wait")
    assert out.returncode == 0, out.stderr
    assert "child got yes" in out.stdout
    parent = out.stderr.strip().splitlines()[0]
    assert "Go on?" in json.dumps(server.requests[1]["messages"])
    (child,) = [r["id"] for r in sessions() if r["parent_id"] == parent]

    # Marked in both transcripts.
    child_text = tui("transcript", child[:8]).stdout
    assert f"answered by parent {parent[:8]}: yes" in child_text, child_text
    notes = [e["text"] for e in of_type(state_dir, parent, "note")]
    assert f"answered by parent: child {child[:8]} asked 'Go on?': yes" in notes


def test_a_restarted_parent_worker_follows_its_running_child_again(state_dir: Path) -> None:
    out = tui("send", "--new", f"cid = delegate({ASKING_CHILD!r}, wait=False)", "--wait")
    assert out.returncode == 0, out.stderr
    parent = out.stderr.strip().splitlines()[0]
    wait_until(lambda: of_type(state_dir, parent, "child_asking"), "the child to ask")
    child = of_type(state_dir, parent, "child_started")[0]["child_id"]
    kill_worker(state_dir, parent)

    woken = tui("send", parent[:8], "print('back')")  # a new worker for the parent
    assert woken.returncode == 0, woken.stderr
    assert tui("answer", child[:8], "--option", "1").returncode == 0
    wait_until(lambda: of_type(state_dir, parent, "child_ended"), "the new worker to see the child end")
    (ended,) = of_type(state_dir, parent, "child_ended")
    assert (ended["child_id"], ended["outcome"]) == (child, "completed")
    assert of_type(state_dir, parent, "status")[-1]["children"] == {"done": 1}


def test_send_new_parent_is_followed_by_the_parents_worker(state_dir: Path) -> None:
    parent = tui("send", "--new", "print('parent')", "--wait").stderr.strip().splitlines()[0]
    out = tui("send", "--new", "--parent", parent[:8], "print(6*7)", "--wait")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "42\n"
    child = out.stderr.strip().splitlines()[0]

    # The parent's worker heard of it: where it started (and who made it), and how it ended.
    wait_until(lambda: of_type(state_dir, parent, "child_ended"), "the parent to see its child end")
    (started,) = of_type(state_dir, parent, "child_started")
    assert started["child_id"] == child and started["prompt"] == "print(6*7)"
    assert started["by"]["kind"] == "owner" and started["turn_id"] is None
    (ended,) = of_type(state_dir, parent, "child_ended")
    assert ended["child_id"] == child and ended["outcome"] == "completed"
    wait_until(lambda: of_type(state_dir, parent, "status")[-1]["children"] == {"done": 1}, "the count")
    assert [r["parent_id"] for r in sessions() if r["id"] == child] == [parent]

    listed = tui("attach", parent[:8], input="/children\n")
    assert listed.returncode == 0, listed.stderr
    assert f"{child[:8]}  done  print(6*7)  `tui attach {child[:8]}`" in listed.stdout + listed.stderr


async def test_an_attached_parent_shows_a_child_made_with_send(state_dir: Path) -> None:
    parent = tui("send", "--new", "print('parent')", "--wait").stderr.strip().splitlines()[0]
    access = LocalAccess(StatePaths(state_dir))
    link = await access.link(parent, client_id="tui:test:1")
    attachment = Attachment(link)
    try:
        await changes_until(attachment, lambda c: isinstance(c, ch.Attached))
        out = await asyncio.to_thread(tui, "send", "--new", "--parent", parent[:8], "print(6*7)")
        assert out.returncode == 0, out.stderr
        child = out.stderr.strip().splitlines()[0]
        # The parent is idle: its client shows the child's lines between turns, and counts it.
        seen = await changes_until(
            attachment, lambda c: isinstance(c, ch.Line) and c.text == f"child {child[:8]} completed"
        )
        lines = [c.text for c in of(ch.Line, seen)]
        assert f"child {child[:8]} started by {owner_name()}: print(6*7)" in lines
        assert f"child {child[:8]} completed" in lines
        assert attachment.session.child_sessions[child].state == "completed"
        # A client attaching later reads the same lines from the transcript.
        notes = (await link.transcript(limit=1)).notes
        assert f"child {child[:8]} completed" in notes
    finally:
        await attachment.close()
        await link.close()


def test_send_new_parent_wakes_a_stopped_parent_to_follow_its_child(state_dir: Path) -> None:
    parent = tui("send", "--new", "print('parent')", "--wait").stderr.strip().splitlines()[0]
    assert tui("stop", parent[:8]).returncode == 0
    out = tui("send", "--new", "--parent", parent[:8], "1/0", "--wait")
    assert out.returncode != 0 and "ZeroDivisionError" in out.stderr
    child = out.stderr.strip().splitlines()[0]
    assert [r["live"] for r in sessions() if r["id"] == parent] == [True]
    wait_until(lambda: of_type(state_dir, parent, "child_ended"), "the parent to see its child end")
    (ended,) = of_type(state_dir, parent, "child_ended")
    assert ended["child_id"] == child and ended["outcome"] == "failed"
    assert "ZeroDivisionError" in (ended["error"] or "")


def test_a_question_of_a_child_made_with_send_is_answered_from_the_parent(state_dir: Path) -> None:
    parent = tui("send", "--new", "print('parent')", "--wait").stderr.strip().splitlines()[0]
    out = tui("send", "--new", "--parent", parent[:8], ASKING_CHILD)
    assert out.returncode == 0, out.stderr
    child = out.stderr.strip().splitlines()[0]

    def asked() -> bool:
        asking = of_type(state_dir, parent, "child_asking")
        return bool(asking) and asking[-1]["question"] is not None

    wait_until(asked, "the parent to show its child's question")
    assert of_type(state_dir, parent, "child_asking")[-1]["child_id"] == child
    # The parent has no question of its own: `tui answer PARENT` answers its child's.
    answered = tui("answer", parent[:8], "--option", "1")
    assert answered.returncode == 0, answered.stderr
    wait_until(lambda: of_type(state_dir, parent, "child_ended"), "the parent to see its child end")
    (ended,) = of_type(state_dir, parent, "child_ended")
    assert ended["child_id"] == child and ended["outcome"] == "completed"
    assert of_type(state_dir, parent, "child_asking")[-1]["question"] is None
    resolved = of_type(state_dir, child, "question_resolved")
    assert [e["how"] for e in resolved] == ["answered"] and resolved[0]["selected"] == ["yes"]


def test_a_parent_following_a_child_stays_past_its_idle_timeout_until_the_child_ends(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUI_IDLE_TIMEOUT", "2")  # long enough for a loaded machine to wake the parent
    parent = tui("send", "--new", "print('parent')", "--wait").stderr.strip().splitlines()[0]
    out = tui("send", "--new", "--parent", parent[:8], "ask('go on?', options=['yes'])")
    assert out.returncode == 0, out.stderr
    child = out.stderr.strip().splitlines()[0]
    wait_until(lambda: of_type(state_dir, parent, "child_asking"), "the parent to hear the child ask")

    def live(sid: str) -> bool:
        return any(row["live"] for row in sessions() if row["id"] == sid)

    # A session started after that, with nothing to do, stops at the same idle timeout; the
    # parent, idle as long but following its child, stays.
    idle = tui("send", "--new", "x = 1", "--wait").stderr.strip().splitlines()[0]
    wait_until(lambda: not live(idle), "a session with nothing to do to stop when idle")
    assert live(parent)
    assert tui("answer", child[:8], "--option", "1").returncode == 0
    wait_until(lambda: of_type(state_dir, parent, "child_ended"), "the parent to see its child end")
    (ended,) = of_type(state_dir, parent, "child_ended")
    assert ended["child_id"] == child and ended["outcome"] == "completed"
    wait_until(lambda: not live(parent), "the parent to stop when idle, once its child ended")


def test_send_new_parent_refuses_an_archived_parent_in_one_line(state_dir: Path) -> None:
    parent = tui("send", "--new", "print('parent')", "--wait").stderr.strip().splitlines()[0]
    assert tui("archive", parent[:8]).returncode == 0
    out = tui("send", "--new", "--parent", parent[:8], "print(1)")
    assert out.returncode != 0
    (line,) = out.stderr.strip().splitlines()
    assert f"session {parent[:8]} is archived" in line and f"`tui unarchive {parent[:8]}`" in line
    assert [r for r in sessions(all_=True) if r["parent_id"] == parent] == []
