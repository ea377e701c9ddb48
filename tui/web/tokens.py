"""Bearer tokens: made with `secrets`, stored only as SHA-256 digests, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from pathlib import Path

from tui.store._atomic import write_atomic
from tui.store.remotes import read_token_file

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
    """Write a token to `path` with mode 0600; its folder, and each above it, made 0700 when
    missing."""
    path = path.expanduser()
    missing = [p for p in [path.parent, *path.parent.parents] if not p.exists()]
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)
    write_atomic(path, token + "\n", mode=0o600)
