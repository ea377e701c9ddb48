"""Other machines (``remotes.toml``): name, url and the token file's path of a web bridge, or
an ``ssh://`` address and how to run tui there.

The token itself is never written here: only where it is kept, so that it stays in a file of the
user's choosing with mode 0600. An SSH remote has no token: SSH authenticates the user.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tui.config import REMOTES_FILE
from tui.errors import NotFound, TuiError, UsageError
from tui.store._atomic import write_atomic
from tui.store.paths import StatePaths

__all__ = [
    "Remote",
    "add_remote",
    "get_remote",
    "list_remotes",
    "read_token_file",
    "remove_remote",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Remote:
    """One other machine's ``tui web``."""

    name: str
    url: str
    """Its base URL, e.g. ``http://192.168.1.20:7433``."""
    token_file: str
    """Where the token is kept (absolute path); empty for an SSH remote."""
    tui: str = ""
    """An SSH remote's command for tui there (run by the remote shell); empty for a web bridge."""

    @property
    def kind(self) -> str:
        """``ssh`` for a machine reached through OpenSSH, ``web`` for a ``tui web``."""
        return "ssh" if self.url.startswith("ssh://") else "web"


def _path(state: StatePaths) -> Path:
    return state.root / REMOTES_FILE  # read by `tui.config.token_files` too


def list_remotes(state: StatePaths) -> list[Remote]:
    """Every remote, by name."""
    path = _path(state)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        return []
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise TuiError(f"{path} cannot be read ({exc}); fix it or remove it and add remotes again") from exc
    table = data.get("remotes", {})
    out = []
    for name, entry in sorted(table.items()):
        if isinstance(entry, dict) and isinstance(entry.get("url"), str):
            out.append(
                Remote(name, entry["url"], str(entry.get("token_file", "")), str(entry.get("tui", "")))
            )
    return out


def get_remote(state: StatePaths, name: str) -> Remote:
    """One remote by name.

    Raises:
        NotFound: there is none of that name.
    """
    for remote in list_remotes(state):
        if remote.name == name:
            return remote
    known = ", ".join(r.name for r in list_remotes(state)) or "none yet"
    raise NotFound(
        f"no remote named {name!r} (known: {known}); `tui remote add {name} URL --token-file F` adds it"
    )


def add_remote(state: StatePaths, remote: Remote) -> None:
    """Add or replace a remote.

    Raises:
        UsageError: a name that is not a plain word.
    """
    if not _NAME.match(remote.name):
        raise UsageError(f"remote name {remote.name!r} must be letters, digits, '.', '-' or '_'")
    kept = [r for r in list_remotes(state) if r.name != remote.name]
    _write(state, sorted([*kept, remote], key=lambda r: r.name))


def remove_remote(state: StatePaths, name: str) -> None:
    """Forget a remote.

    Raises:
        NotFound: there is none of that name (the sentence names those there are).
    """
    remotes = list_remotes(state)
    if not any(r.name == name for r in remotes):
        names = ", ".join(r.name for r in remotes)
        there = f"the remotes are {names} (`tui remote list` shows them)" if names else "none is set up"
        raise NotFound(f"no remote named {name!r} to remove: {there}")
    _write(state, [r for r in remotes if r.name != name])


def _write(state: StatePaths, remotes: list[Remote]) -> None:
    lines = ["# Other machines' `tui web`: the token stays in its own file.", ""]
    for r in remotes:
        # JSON strings are valid TOML basic strings for everything a URL or a path holds.
        lines += [
            f'[remotes."{r.name}"]',
            f"url = {json.dumps(r.url)}",
            f"token_file = {json.dumps(r.token_file)}",
            *([f"tui = {json.dumps(r.tui)}"] if r.tui else []),
            "",
        ]
    write_atomic(_path(state), "\n".join(lines))


def read_token_file(path: str | os.PathLike[str]) -> str:
    """The token in a file (its first line, stripped).

    Raises:
        UsageError: the file is missing, unreadable or empty.
    """
    p = Path(path).expanduser()
    try:
        text = p.read_text().strip()
    except OSError as exc:
        raise UsageError(f"cannot read the token file {p}: {exc.strerror or exc}") from exc
    token = text.splitlines()[0].strip() if text else ""
    if not token:
        raise UsageError(f"the token file {p} is empty; ask for a new token")
    return token
