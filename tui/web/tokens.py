"""Bearer tokens: made with `secrets`, stored only as SHA-256 digests, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from tui.errors import UsageError
from tui.store._atomic import write_atomic

__all__ = ["digest", "matches", "new_token", "read_token_file", "write_token_file"]


def new_token() -> str:
    """A fresh token: 32 random bytes, URL-safe text."""
    return secrets.token_urlsafe(32)


def digest(token: str) -> str:
    """The SHA-256 digest (hex) of a token: what is stored instead of it."""
    return hashlib.sha256(token.encode()).hexdigest()


def matches(token: str, stored_digest: str) -> bool:
    """Whether `token` is the one `stored_digest` was made from (constant time)."""
    return hmac.compare_digest(digest(token), stored_digest)


def write_token_file(path: Path, token: str) -> None:
    """Write a token to `path` with mode 0600 (its folder made when missing)."""
    path = path.expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, token + "\n", mode=0o600)


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
