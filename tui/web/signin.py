"""Signing a browser in: one-time codes, exchanged for a session cookie.

A browser never holds a token. ``tui share`` and ``tui web`` print a link whose fragment holds a
one-time code (``http://HOST:PORT/#code=…``: browsers never send a fragment to the server); the
page posts the code once (``POST /api/signin``) and gets a cookie bound to the same principal:
the owner, or one participant (its kind, turn limit and expiry are the participant's, read on
every request, so a revoke ends the cookie too). A code works once and expires in `CODE_TTL`
seconds. Only digests of codes and cookies are kept, in ``web/signin.json``, changed under an
flock() of ``web/signin.lock`` by ``tui share`` and ``tui web`` alike, so a code printed by
one and redeemed by the other works, and a page stays signed in across a restart of ``tui web``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from tui.errors import TuiError, Unauthorized
from tui.store._atomic import write_atomic
from tui.web.paths import WebPaths
from tui.web.tokens import digest, new_token

__all__ = ["CODE_TTL", "COOKIE", "OWNER", "OWNER_COOKIE_TTL", "PAGE_HEADER", "Grant", "SignIns", "link"]

T = TypeVar("T")

CODE_TTL = 600
"""Seconds a sign-in code works (once)."""
OWNER_COOKIE_TTL = 7 * 86400
"""Seconds the owner's cookie lasts (a participant's lasts as long as its share)."""
COOKIE = "tui_session"
"""The session cookie's name."""
PAGE_HEADER = "X-Tui-Page"
"""The header every request made with the cookie must carry: a page of another site cannot send
it without a preflight, which is never answered."""
OWNER = "owner"
"""Who a grant is for when it is the owner's (else a participant's id)."""


class Grant(BaseModel):
    """A code's or a cookie's digest and whom it signs in."""

    digest: str
    who: str
    """`OWNER`, or a participant's id."""
    owner_digest: str = ""
    """For the owner: the owner token's digest when it was made (a new owner token ends it)."""
    expires_at: datetime | None = None


class _File(BaseModel):
    codes: list[Grant] = []
    cookies: list[Grant] = []


def link(url: str, code: str) -> str:
    """The sign-in link of `code` on the ``tui web`` at `url`."""
    return f"{url.rstrip('/')}/#code={code}"


class SignIns:
    """``web/signin.json``: the codes not yet used and the cookies given."""

    def __init__(self, paths: WebPaths) -> None:
        self.paths = paths

    @property
    def file(self) -> Path:
        return self.paths.root / "signin.json"

    def new_code(self, who: str, *, owner_digest: str = "", ttl: float = CODE_TTL) -> str:
        """A one-time code that signs in `who` (`OWNER` or a participant's id)."""
        code = new_token()
        grant = Grant(
            digest=digest(code),
            who=who,
            owner_digest=owner_digest,
            expires_at=_now() + timedelta(seconds=ttl),
        )
        self._change(lambda f: f.codes.append(grant))
        return code

    def redeem(self, code: str) -> Grant:
        """Use up a code; the grant it held.

        Raises:
            Unauthorized: the code is unknown, used or expired.
        """
        wanted = digest(code)

        def change(f: _File) -> Grant | None:
            now = _now()
            found = next((g for g in f.codes if g.digest == wanted), None)
            f.codes = [g for g in f.codes if g.digest != wanted and not _gone(g, now)]
            return found if found is not None and not _gone(found, now) else None

        grant = self._change(change)
        if grant is None:
            raise Unauthorized(
                "this sign-in link was used already or has expired; ask for a new one "
                "(`tui web --link` on the machine, or a new `tui share`)"
            )
        return grant

    def new_cookie(self, grant: Grant, expires_at: datetime | None) -> str:
        """A cookie value for what `grant` signs in, lasting until `expires_at` (None: the share's end)."""
        value = new_token()
        cookie = grant.model_copy(update={"digest": digest(value), "expires_at": expires_at})

        def change(f: _File) -> None:
            now = _now()
            f.cookies = [*(g for g in f.cookies if not _gone(g, now)), cookie]

        self._change(change)
        return value

    def cookie(self, value: str) -> Grant | None:
        """The grant of a cookie value; None when unknown or expired."""
        wanted = digest(value)
        found = next((g for g in self._read().cookies if g.digest == wanted), None)
        return found if found is not None and not _gone(found, _now()) else None

    def drop(self, value: str) -> None:
        """End a cookie (sign out)."""
        wanted = digest(value)

        def change(f: _File) -> None:
            f.cookies = [g for g in f.cookies if g.digest != wanted and not _gone(g, _now())]

        self._change(change)

    # --- the file ----------------------------------------------------------------------------
    def _read(self) -> _File:
        try:
            raw = self.file.read_bytes()
        except FileNotFoundError:
            return _File()
        except OSError as exc:
            raise TuiError(f"cannot read {self.file}: {exc.strerror}") from exc
        try:
            return _File.model_validate_json(raw) if raw.strip() else _File()
        except ValidationError:
            return _File()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.paths.root / "signin.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _change(self, change: Callable[[_File], T]) -> T:
        with self._locked():
            f = self._read()
            result = change(f)
            write_atomic(self.file, f.model_dump_json(indent=1) + "\n", mode=0o600)
        return result


def _now() -> datetime:
    return datetime.now(UTC)


def _gone(grant: Grant, now: datetime) -> bool:
    return grant.expires_at is not None and now >= grant.expires_at
