"""Checkpoints of a folder (`tui.store.files`): what they keep, skip and put back, with the real
``git``, and that nothing in the folder can make git run a program."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from helpers import folder_files as _folder

from tui.store.files import FileCheckpoints


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "a.txt").write_text("one\ntwo\n")
    (folder / "crlf.txt").write_bytes(b"x\r\ny\n")
    (folder / "bin").mkdir()
    (folder / "bin" / "run.sh").write_text("echo hi\n")
    os.symlink("a.txt", folder / "link")
    (folder / ".gitignore").write_text("ignored/\n")
    return folder


@pytest.mark.parametrize("watch", [False, True], ids=["reading", "inotify"])
def test_a_rewind_puts_every_kind_of_change_back_byte_for_byte(
    work: Path, tmp_path: Path, watch: bool
) -> None:
    store = FileCheckpoints(tmp_path / "files.git", work, max_file_size=1000, watch=watch)
    before_all = _folder(work)
    before = store.snapshot()
    (work / "a.txt").write_text("one\nthree\nfour\n")  # edited
    os.rename(work / "crlf.txt", work / "moved.txt")  # renamed
    os.chmod(work / "bin" / "run.sh", 0o755)  # mode
    os.unlink(work / "link")
    os.symlink("moved.txt", work / "link")  # the link points elsewhere
    (work / "new").mkdir()
    (work / "new" / "n.txt").write_text("n\n")  # created in a new folder
    (work / "ignored").mkdir()
    (work / "ignored" / "x").write_text("ignored\n")  # the folder's .gitignore
    (work / "node_modules").mkdir()
    (work / "node_modules" / "m.js").write_text("m\n")  # the default list
    (work / "big.bin").write_bytes(b"\0" * 2000)  # over the size bound
    after = store.snapshot()

    changes = {c.path: c for c in store.changes(before.tree, after.tree)}
    assert set(changes) == {"a.txt", "moved.txt", "bin/run.sh", "link", "new/n.txt"}
    assert (changes["a.txt"].added, changes["a.txt"].removed) == (2, 1)
    assert changes["moved.txt"].status == "renamed" and changes["moved.txt"].old_path == "crlf.txt"
    assert changes["bin/run.sh"].status == "mode"
    assert after.skipped == ("big.bin (over 1000 bytes)",)
    assert "a.txt" in store.diff(before.tree, after.tree, stat=True)

    store.restore(before.tree, store.changed_paths(before.tree, after.tree))
    now = _folder(work)
    for left_alone in ("ignored/x", "node_modules/m.js", "big.bin"):  # never kept, never touched
        assert now.pop(left_alone)
    assert now == before_all
    assert not (work / "new").exists()  # the folder it made went with its file
    assert store.snapshot().tree == before.tree


def test_a_folder_filter_or_hook_never_runs_and_bytes_are_kept_as_they_are(
    work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trap = tmp_path / "ran"
    home = tmp_path / "home"
    home.mkdir()
    # A user's global config naming the filter the folder's .gitattributes asks for: any git that
    # reads it runs the program (checked below with a plain git, so the trap is real).
    (home / ".gitconfig").write_text(
        f'[filter "evil"]\n\tclean = "touch {trap}; cat"\n\tsmudge = "touch {trap}; cat"\n'
        f'[core]\n\tfsmonitor = "touch {trap}; false"\n'
    )
    monkeypatch.setenv("HOME", str(home))
    (work / ".gitattributes").write_text("* filter=evil\n*.txt text eol=crlf\n")
    subprocess.run(["git", "init", "-q", str(tmp_path / "plain")], check=True)
    (tmp_path / "plain" / ".gitattributes").write_text("* filter=evil\n")
    (tmp_path / "plain" / "f").write_text("f\n")
    subprocess.run(["git", "-C", str(tmp_path / "plain"), "add", "-A"], check=False, capture_output=True)
    assert trap.exists(), "the trap does not catch a plain git"
    trap.unlink()

    store = FileCheckpoints(tmp_path / "files.git", work)
    before = store.snapshot()
    (work / "crlf.txt").write_bytes(b"changed\r\n")
    after = store.snapshot()
    store.restore(before.tree, store.changed_paths(before.tree, after.tree))
    assert (work / "crlf.txt").read_bytes() == b"x\r\ny\n"
    assert not trap.exists()
    assert not (work / ".git").exists()  # the folder's own git is never made or touched


def test_a_folder_with_too_many_files_is_counted_only_to_the_bound(work: Path, tmp_path: Path) -> None:
    for k in range(12):
        (work / f"f{k}").write_text("x")
    assert (FileCheckpoints(tmp_path / "files.git", work, max_files=10).too_big() or 0) > 10
    assert FileCheckpoints(tmp_path / "other.git", work, max_files=100).too_big() is None


def test_two_sessions_in_one_folder_keep_their_own_checkpoints(work: Path, tmp_path: Path) -> None:
    first = FileCheckpoints(tmp_path / "one.git", work)
    second = FileCheckpoints(tmp_path / "two.git", work)
    a, b = first.snapshot(), second.snapshot()
    assert a.tree == b.tree
    (work / "a.txt").write_text("changed by the first session's turn\n")
    after = first.snapshot()
    assert [c.path for c in first.changes(a.tree, after.tree)] == ["a.txt"]
    # The second store's index still has the file as it was: its next checkpoint sees the change too.
    assert [c.path for c in second.changes(b.tree, second.snapshot().tree)] == ["a.txt"]


def test_a_link_a_program_made_is_never_followed_out_of_the_folder(work: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "er").mkdir(parents=True)
    (outside / "er" / "new.txt").write_text("not the session's\n")
    store = FileCheckpoints(tmp_path / "files.git", work)
    before = store.snapshot()
    (work / "deep" / "er").mkdir(parents=True)
    (work / "deep" / "er" / "new.txt").write_text("made by a turn\n")
    after = store.snapshot()
    # The program swaps the folder for a link to somewhere it cannot reach, hoping the rewind
    # (run by the worker, outside the sandbox) deletes or writes there.
    (work / "deep" / "er" / "new.txt").unlink()
    (work / "deep" / "er").rmdir()
    (work / "deep").rmdir()
    os.symlink(outside, work / "deep")
    store.restore(before.tree, store.changed_paths(before.tree, after.tree))
    assert (outside / "er" / "new.txt").read_text() == "not the session's\n"
    store.restore(after.tree, store.changed_paths(before.tree, after.tree))  # writing back too
    assert (outside / "er" / "new.txt").read_text() == "not the session's\n"
    assert (work / "deep" / "er" / "new.txt").read_text() == "made by a turn\n"
    assert not (work / "deep").is_symlink()


def test_inotify_checkpoints_see_every_change_git_sees_and_run_no_git_when_nothing_changed(
    work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    watched = FileCheckpoints(tmp_path / "watched.git", work, max_file_size=1000, watch=True)
    whole = FileCheckpoints(tmp_path / "whole.git", work, max_file_size=1000)  # reads it all, each time
    assert watched.snapshot().tree == whole.snapshot().tree
    ran: list[str] = []
    real = FileCheckpoints._git

    def counted(self: FileCheckpoints, *args: str, **kw: object) -> bytes:
        if self is watched:
            ran.append(" ".join(args))
        return real(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(FileCheckpoints, "_git", counted)

    def same() -> None:
        ran.clear()
        # Asked first, as a turn's start and end ask on the event loop: it never says "the same"
        # after a change, and what inotify named to it still reaches the snapshot that follows.
        quick = watched.unchanged()
        expected = whole.snapshot().tree
        assert quick is None or quick.tree == expected
        assert watched.snapshot().tree == expected

    same()
    assert ran == []  # nothing changed: no git at all
    assert watched.unchanged() is not None and ran == []
    (work / "ignored").mkdir()
    same()  # a folder made: read whole, watches set again (the ignored one left out)
    (work / "ignored" / "x").write_text("x\n")
    same()
    assert ran == []  # inside an ignored folder: not watched
    (work / "a.txt").write_text("edited\n")
    same()
    assert ran[0].startswith("ls-files") and ran[0].endswith(" -- a.txt")  # only the path inotify named
    steps = [
        lambda: (work / "new").mkdir(),
        lambda: (work / "new" / "deep").mkdir(),
        lambda: (work / "new" / "deep" / "f.txt").write_text("f\n"),  # in a folder made since
        lambda: os.rename(work / "new", work / "renamed"),
        lambda: (work / "renamed" / "deep" / "f.txt").write_text("g\n"),  # renamed folder, still seen
        lambda: os.chmod(work / "bin" / "run.sh", 0o755),
        lambda: os.rename(work / "a.txt", work / "bin" / "a.txt"),
        lambda: (work / ".gitignore").write_text("other/\n"),  # ignored/ is kept from now on
        lambda: (work / "ignored" / "x").write_text("kept now\n"),
        lambda: ((work / "tmp").write_text("t"), (work / "tmp").unlink()),
        lambda: (work / "big.bin").write_bytes(b"\0" * 2000),
        lambda: os.unlink(work / "link"),
        lambda: subprocess.run(["rm", "-rf", str(work / "renamed")], check=True),
    ]
    for step in steps:
        step()
        same()
    assert "big.bin (over 1000 bytes)" in watched.snapshot().skipped
    same()
    assert ran == []
