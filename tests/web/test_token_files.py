"""Token files belong in the config dir, where no program of a session reaches (issue 21), and
tui can name every token file it knows of (`tui.config.token_files`)."""

from __future__ import annotations

import os
from pathlib import Path

from tui.config import default_token_file, token_files, tokens_dir
from tui.web.tokens import write_token_file

from .conftest import Web
from .test_commands import tui


def test_a_token_file_in_the_config_dir_is_made_private(tmp_path: Path) -> None:
    path = default_token_file("lab")
    assert path.parent == tokens_dir() and tokens_dir().parent == Path(os.environ["TUI_CONFIG_DIR"])
    write_token_file(path, "secret")
    assert oct(tokens_dir().stat().st_mode & 0o777) == "0o700"
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert path.read_text() == "secret\n"
    deeper = tmp_path / "a" / "b" / "t"
    write_token_file(deeper, "x")
    assert oct((tmp_path / "a").stat().st_mode & 0o777) == "0o700"


def test_every_token_file_tui_knows_of_is_listed(web: Web, tmp_path: Path) -> None:
    # `tui web --token-file` (the fixture's), a guest's from `tui share`, a remote's, the config dir's
    sid = web.session()
    guest = tmp_path / "guests" / "ana.token"
    shared = tui(web.state, "share", sid[:8], "--name", "ana", "--kind", "viewer", "--token-file", str(guest))
    assert shared.returncode == 0, shared.stderr
    mine = default_token_file("lab")
    write_token_file(mine, web.token)
    added = tui(web.state, "remote", "add", "lab", web.url, "--token-file", str(mine))
    assert added.returncode == 0, added.stderr
    elsewhere = tmp_path / "lab2.token"
    write_token_file(elsewhere, web.token)
    assert tui(web.state, "remote", "add", "lab2", web.url, "--token-file", str(elsewhere)).returncode == 0

    known = token_files(web.state)
    assert set(known) == {web.state / "owner.token", guest, mine, elsewhere}
    assert len(known) == len(set(known))


def test_a_lan_address_without_a_token_is_told_to_keep_it_in_the_config_dir(tmp_path: Path) -> None:
    out = tui(tmp_path, "web", "--host", "0.0.0.0", "--port", "0")
    assert out.returncode == 2
    assert f"--token-file {default_token_file('web-owner')}" in out.stderr
    assert "~/.tui" not in out.stderr
