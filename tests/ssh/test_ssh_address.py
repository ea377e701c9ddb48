"""SSH addresses and the command line around them (no sshd needed)."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
import time
from pathlib import Path

import pytest

from tui.cli import main
from tui.errors import Unreachable, UsageError
from tui.link.ssh import (
    FOLDER_PREFIX,
    LEGACY_PREFIX,
    STALE_AFTER,
    SshTarget,
    SshTunnel,
    parse_ssh_url,
    remove_stale_folders,
)
from tui.store import StatePaths, paths
from tui.store.paths import own_socket_dir
from tui.store.remotes import Remote, add_remote, list_remotes


@pytest.mark.parametrize(
    ("url", "target"),
    [
        ("ssh://box", SshTarget("box")),
        ("ssh://me@box.example:2222", SshTarget("box.example", "me", 2222)),
        ("ssh://root@127.0.0.1:22/", SshTarget("127.0.0.1", "root", 22)),
        ("ssh://me@[::1]:2200", SshTarget("::1", "me", 2200)),
    ],
)
def test_an_ssh_address_names_user_host_and_port(url: str, target: SshTarget) -> None:
    assert parse_ssh_url(url) == target


@pytest.mark.parametrize(
    "url",
    [
        "ssh://",
        "ssh://box/path",
        "ssh://me:secret@box",
        "ssh://-oProxyCommand=x",
        "ssh://box:99999",
        "http://box",
    ],
)
def test_what_is_not_an_ssh_address_is_refused(url: str) -> None:
    with pytest.raises(UsageError, match=r"ssh://\[USER@\]HOST\[:PORT\]"):
        parse_ssh_url(url)


def test_ssh_remotes_keep_their_command_and_no_token(tmp_path: Path) -> None:
    state = StatePaths(tmp_path)
    add_remote(state, Remote("box", "ssh://me@box", "", "~/.venv/bin/tui"))
    add_remote(state, Remote("web", "http://10.0.0.2:7433", "/t", ""))
    box, web = list_remotes(state)
    assert (box.kind, box.tui, box.token_file) == ("ssh", "~/.venv/bin/tui", "")
    assert (web.kind, web.tui) == ("web", "")


def test_a_web_remote_still_needs_its_token_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--state-dir", str(tmp_path), "remote", "add", "lab", "http://10.0.0.2:7433"]) == 2
    assert "needs the token of that tui web: --token-file F" in capsys.readouterr().err
    code = main(["--state-dir", str(tmp_path), "remote", "add", "box", "ssh://box", "--token-file", "/t"])
    assert code == 2
    assert "an ssh remote needs no token" in capsys.readouterr().err


def test_a_killed_clients_folder_is_removed_and_a_live_ones_kept() -> None:
    own = own_socket_dir()
    assert own == Path(f"/tmp/tui-{os.getuid()}") and stat.S_IMODE(own.stat().st_mode) == 0o700
    dead = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX, dir=own))
    live = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX, dir=own))
    fresh = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX, dir=own))
    earlier = Path(tempfile.mkdtemp(prefix=LEGACY_PREFIX))  # where earlier versions made them
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as gone:
            gone.bind(str(dead / "c"))  # a socket file nothing listens on any more
        listening.bind(str(live / "c"))
        listening.listen(1)
        old = time.time() - 2 * STALE_AFTER
        for folder in (dead, live, earlier):
            os.utime(folder, (old, old))
        remove_stale_folders()
        assert not dead.exists() and not earlier.exists()
        assert live.exists() and fresh.exists()
    finally:
        listening.close()
        for folder in (dead, live, fresh, earlier):
            shutil.rmtree(folder, ignore_errors=True)


def test_a_socket_folder_not_of_this_users_own_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    squatted = tmp_path / "tui-uid"
    squatted.symlink_to(elsewhere)  # made first by someone else, pointing where they read
    monkeypatch.setattr(paths, "socket_fallback_dirs", lambda: [squatted])
    refused = r"remote lab: no private folder for its connection \(.*is a symlink"
    with pytest.raises(Unreachable, match=refused):
        SshTunnel("lab", "ssh://box", "tui").ensure()
    assert list(elsewhere.iterdir()) == []
    if os.geteuid() == 0:
        squatted.unlink()
        squatted.mkdir(mode=0o700)
        os.chown(squatted, 65534, 65534)
        with pytest.raises(Unreachable, match="another user made it"):
            SshTunnel("lab", "ssh://box", "tui").ensure()
