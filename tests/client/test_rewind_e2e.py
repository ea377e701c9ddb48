"""A session's files and its conversation go back together (docs/files.md), tried as a user does:
real `tui` processes, real workers, the real ``git``; a python session, a model session on the
loopback server and an ACP session of the real test agent, whose turns change files by every way
they can (a program's open(), a shell command the agent ran, renames, deletes, modes, links)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from acp_agent import configure
from fake_model_server import FakeModelServer
from helpers import folder_files as _folder

from client.helpers import tui

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="checkpoints need git")

TURN_1 = """
import os
open('a.txt', 'w').write('one\\ntwo\\n')
open('b.txt', 'wb').write(b'bee\\r\\n')
open('run.sh', 'w').write('echo hi\\n')
open('notes.txt', 'w').write('first\\n')
os.symlink('a.txt', 'link')
"""
TURN_2 = """
import os
open('a.txt', 'a').write('three\\n')
os.rename('b.txt', 'c.txt')
os.chmod('run.sh', 0o755)
os.unlink('link'); os.symlink('c.txt', 'link')
os.makedirs('deep/er'); open('deep/er/new.txt', 'w').write('new\\n')
secret = 42
"""
TURN_3 = """
import os
os.remove('a.txt')
open('notes.txt', 'a').write('by the turn\\n')
"""


def _journal(state_dir: Path, sid: str) -> list[dict[str, object]]:
    path = state_dir / "sessions" / sid / "journal.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _script(*turns: str) -> str:
    """A piped script of a python session: each turn one statement (one line)."""
    return "".join(f"exec({turn!r})\n" for turn in turns)


@pytest.fixture(autouse=True)
def _checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUI_CHECKPOINTS", "on")


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def test_a_python_session_rewinds_its_files_byte_for_byte_and_forks(state_dir: Path, work: Path) -> None:
    out = tui("send", "--new", TURN_1, "--wait")
    assert out.returncode == 0, out.stderr
    sid = out.stderr.strip().splitlines()[0]
    before_2 = _folder(work)
    ran = tui("attach", sid, input=_script(TURN_2, TURN_3))  # a script's two turns
    assert ran.returncode == 0, ran.stderr

    stat = tui("diff", sid, "--turn", "2", "--stat")
    assert stat.returncode == 0, stat.stderr
    assert stat.stdout.startswith("# turn 2: files: 5 changed, +3 -1 (a.txt, b.txt → c.txt")
    assert "b.txt => c.txt" in stat.stdout and "deep/er/new.txt" in stat.stdout

    (work / "notes.txt").write_text("the user's own words\n")  # someone else, after the turns
    refused = tui("rewind", sid, "--to", "2")
    assert refused.returncode == 1
    assert "notes.txt" in refused.stderr and "--force" in refused.stderr
    assert (work / "c.txt").exists() and (work / "notes.txt").read_text() == "the user's own words\n"

    forced = tui("rewind", sid, "--to", "2", "--force")
    assert forced.returncode == 0, forced.stderr
    assert _folder(work) == before_2  # every byte, mode and link as before turn 2

    undone = tui("rewind", sid, "--undo")
    assert undone.returncode == 0, undone.stderr
    assert (work / "notes.txt").read_text() == "the user's own words\n" and (work / "c.txt").exists()

    shown = tui("transcript", sid).stdout
    assert shown.count(" · rewound\n") == 2  # turns 2 and 3 show as rewound
    assert "rewound to before turn 2 by" in shown and "variables were not rewound" in shown

    fork_dir = work.parent / "fork"
    forked = tui("fork", sid, "--at", "2", "--dir", str(fork_dir))
    assert forked.returncode == 0, forked.stderr
    new = forked.stdout.strip()
    assert _folder(fork_dir) == before_2
    record = json.loads((state_dir / "sessions" / new / "session.json").read_text())
    assert record["parent_id"] == sid


def test_a_rewind_with_no_file_to_put_back_offers_no_undo_and_a_wrong_turn_names_the_last(
    state_dir: Path, work: Path
) -> None:
    """/rewind (the app's, here through a script) and `tui rewind` of turns that changed no file:
    no `--undo` offered for nothing; a turn past the last names the last, in words that hold in
    the app, the page and the command line alike."""
    out = tui("send", "--new", "print(1)", "--wait")
    assert out.returncode == 0, out.stderr
    sid = out.stderr.strip().splitlines()[0]
    ran = tui("attach", sid, input="print(2)\n/rewind 2\n/rewind 9\n")
    assert ran.returncode == 1
    assert "tui: rewound to before turn 2: no file to put back\n" in ran.stderr
    assert (
        "this session has no turn 9; its last is turn 2" in ran.stderr
        and "`tui transcript ID`" not in ran.stderr
    )
    again = tui("rewind", sid, "--to", "1")
    assert again.returncode == 0, again.stderr
    assert "rewound to before turn 1: no file to put back\n" in again.stderr and "--undo" not in again.stderr


def test_a_folder_too_big_gets_no_checkpoints_and_the_first_screen_says_so(
    state_dir: Path, work: Path
) -> None:
    (Path(os.environ["TUI_CONFIG_DIR"]) / "config.toml").write_text("[checkpoints]\nmax_files = 5\n")
    for k in range(8):
        (work / f"f{k}.txt").write_text("x")
    out = tui("send", "--new", "print('hi')", "--wait")
    assert out.returncode == 0, out.stderr
    sid = out.stderr.strip().splitlines()[0]
    shown = tui("transcript", sid).stdout
    assert "holds over 5 files" in shown and "[checkpoints] max_files" in shown
    refused = tui("rewind", sid, "--to", "1")
    assert refused.returncode == 1 and "max_files" in refused.stderr


@pytest.fixture
def model(work: Path) -> Iterator[FakeModelServer]:
    with FakeModelServer() as running:
        (Path(os.environ["TUI_CONFIG_DIR"]) / "config.toml").write_text(
            f'[models.local]\nprovider = "openai"\nmodel = "fake-1"\nbase_url = "{running.url}"\n'
        )
        yield running


def test_a_model_session_rewound_sends_only_the_turns_before(
    state_dir: Path, work: Path, model: FakeModelServer
) -> None:
    out = tui("send", "--new", "--model", "local", "hello one", "--wait")
    assert out.returncode == 0, out.stderr
    sid = out.stderr.strip().splitlines()[0]
    script = "run open('made.txt', 'w').write('by the model')\nhello three\n/rewind 2\nhello four\n"
    ran = tui("attach", sid, input=script)  # each line a turn; /rewind as the app's
    assert ran.returncode == 0, ran.stderr
    assert "rewound to before turn 2: 1 file put back" in ran.stderr
    made = [e for e in _journal(state_dir, sid) if e["type"] == "files_changed"][1]
    assert made["files"][0]["path"] == "made.txt" and made["files"][0]["status"] == "added"
    assert not (work / "made.txt").exists()
    said = json.dumps(model.requests[-1]["messages"])
    assert "hello one" in said and "hello four" in said
    assert "made.txt" not in said and "hello three" not in said

    forked = tui("fork", sid, "--at", "2", "--dir", str(work.parent / "fork"))
    assert forked.returncode == 0, forked.stderr
    carried = (state_dir / "sessions" / forked.stdout.strip() / "messages.jsonl").read_text()
    assert "hello one" in carried and "made.txt" not in carried and "hello four" not in carried


def test_an_acp_session_is_told_of_the_rewind_of_its_shell_commands(
    state_dir: Path, acp_tester: Path
) -> None:
    out = tui("send", "--new", "--agent", "tester", "shell: printf one > a.txt", "--wait")
    assert out.returncode == 0, out.stderr
    sid = out.stderr.strip().splitlines()[0]
    before_2 = _folder(acp_tester)
    script = "shell: mv a.txt b.txt && printf two > c.txt\n/rewind 2\nrecall\n"
    told = tui("attach", sid, input=script)
    assert told.returncode == 0, told.stderr
    changed = [e for e in _journal(state_dir, sid) if e["type"] == "files_changed"][1]
    assert {f["path"] for f in changed["files"]} == {"b.txt", "c.txt"}  # what the shell command did
    assert _folder(acp_tester) == before_2
    assert "rewound this session: turn 2" in told.stdout and "before turn 2" in told.stdout


def test_an_acp_fork_forks_the_agents_own_conversation_where_it_offers_session_fork(
    state_dir: Path, acp_tester: Path, tmp_path: Path
) -> None:
    (acp_tester / "a.txt").write_text("one")  # the person's (a prompt naming a command would run it)
    out = tui("send", "--new", "--agent", "tester", "hello one", "--wait")
    assert out.returncode == 0, out.stderr
    sid = out.stderr.strip().splitlines()[0]
    assert tui("send", sid, "shell: printf two > b.txt", "--wait").returncode == 0

    def fork_and_recall(into: Path) -> tuple[str, str]:
        forked = tui("fork", sid, "--at", "2", "--dir", str(into))
        assert forked.returncode == 0, forked.stderr
        new = forked.stdout.strip()
        assert set(_folder(into)) == {"a.txt"}
        said = tui("send", new, "recall", "--wait")
        assert said.returncode == 0, said.stderr
        notes = " ".join(str(e.get("text")) for e in _journal(state_dir, new) if e["type"] == "note")
        return said.stdout, notes

    # The agent offers session/fork: the fork remembers the parent's prompts, and is told that
    # turn 2 is not part of it.
    reply, notes = fork_and_recall(tmp_path / "fork")
    assert "forked its own conversation (session/fork)" in notes
    assert "I remember 3 prompts: ['hello one', 'shell: printf two > b.txt'" in reply
    assert "turn 2 of it is not part of this session" in reply

    # An agent that does not offer it starts a new conversation, told what came before.
    configure(tmp_path / "config", tmp_path / "agent-state", fork=False)
    reply, notes = fork_and_recall(tmp_path / "fork-2")
    assert "does not offer session/fork" in notes
    assert "I remember 1 prompts" in reply and "turn 1: hello one" in reply
    assert "printf two" not in reply
