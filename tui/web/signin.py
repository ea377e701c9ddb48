"""Signing a browser in: one-time codes, exchanged for a session cookie and a page secret.

A browser never holds a token. ``tui share`` and ``tui web`` print a link whose fragment holds a
one-time code (``http://HOST:PORT/#code=…``: browsers never send a fragment to the server); the
page posts the code once (``POST /api/signin``) and gets a cookie and, in the answer's body, a
page secret, both bound to the same principal: the owner, or one participant (its kind, turn
limit and expiry are the participant's, read on every request, so a revoke ends the sign-in too).

The cookie alone is worth nothing: a browser sends it to every port of the host (cookies ignore
the port), so another local server the browser opens gets it. The secret lives in the page's
``sessionStorage``, which belongs to this origin (port included) and this tab, and comes back as
the value of the page's header on every request; a request is the sign-in's only when both
match (`SignIns.grant`). One cookie may carry several sign-ins (one per tab), each its own
secret. The cookie's name holds the server's port (`cookie_name`), so two ``tui web`` on one
host keep their own.

A code works once and expires in `CODE_TTL` seconds. Only digests of codes, cookies and secrets
are kept, in ``web/signin.json``, changed under an flock() of ``web/signin.lock`` by ``tui
share`` and ``tui web`` alike, so a code printed by one and redeemed by the other works, and a
page stays signed in across a restart of ``tui web`` (on the same port). A wrong code is
refused without a write; `Throttle` limits wrong codes per client address and in all.
"""

from __future__ import annotations

import contextlib
import fcntl
import hmac
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from tui.errors import RateLimited, TuiError, Unauthorized
from tui.store._atomic import write_atomic
from tui.web.paths import WebPaths
from tui.web.tokens import digest, new_token

__all__ = [
    "CODE_TTL",
    "COOKIE",
    "OWNER",
    "OWNER_COOKIE_TTL",
    "PAGE_HEADER",
    "Grant",
    "SignIns",
    "Throttle",
    "cookie_name",
    "link",
]

T = TypeVar("T")

CODE_TTL = 600
"""Seconds a sign-in code works (once)."""
OWNER_COOKIE_TTL = 7 * 86400
"""Seconds the owner's cookie lasts (a participant's lasts as long as its share)."""
COOKIE = "tui_session"
"""The start of the session cookie's name (`cookie_name`)."""
PAGE_HEADER = "X-Tui-Page"
"""The header every request made with the cookie must carry, its value the page's secret: a page
of another site cannot send it without a preflight, which is never answered, and another port of
the host, which gets the cookie, does not know the secret."""
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
    page: str = ""
    """A cookie's: the digest of its page secret (one sign-in of one tab). Empty: none matches."""


class _File(BaseModel):
    codes: list[Grant] = []
    cookies: list[Grant] = []


def cookie_name(port: int) -> str:
    """The session cookie's name on the ``tui web`` of `port`: cookies ignore the port, so each
    server's name holds its own, and two ``tui web`` on one host do not overwrite each other's."""
    return f"{COOKIE}_{port}"


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
        # A wrong code is refused from a plain read: only a code that may be used is worth a write.
        if not any(hmac.compare_digest(g.digest, wanted) for g in self._read().codes):
            raise self._used()

        def change(f: _File) -> Grant | None:
            now = _now()
            found = next((g for g in f.codes if g.digest == wanted), None)
            f.codes = [g for g in f.codes if g.digest != wanted and not _gone(g, now)]
            return found if found is not None and not _gone(found, now) else None

        grant = self._change(change)
        if grant is None:
            raise self._used()
        return grant

    @staticmethod
    def _used() -> Unauthorized:
        return Unauthorized(
            "this sign-in link was used already or has expired; ask for a new one "
            "(`tui web --link` on the machine, or a new `tui share`)"
        )

    def sign_in(self, grant: Grant, expires_at: datetime | None, cookie: str | None) -> tuple[str, str]:
        """A sign-in for what `grant` signs in, lasting until `expires_at` (None: the share's end).

        Returns:
            The cookie value (`cookie`, the browser's, kept when it still carries a sign-in, so
            the other tabs of that browser keep theirs; else a new one) and the new page secret.
        """
        secret = new_token()

        def change(f: _File) -> str:
            now = _now()
            f.cookies = [g for g in f.cookies if not _gone(g, now)]
            value = cookie if cookie and any(g.digest == digest(cookie) for g in f.cookies) else new_token()
            update = {"digest": digest(value), "expires_at": expires_at, "page": digest(secret)}
            f.cookies.append(grant.model_copy(update=update))
            return value

        return self._change(change), secret

    def grant(self, cookie: str, secret: str) -> Grant | None:
        """The grant of a cookie value and a page secret; None when they are not one live sign-in."""
        return _match(self._read().cookies, cookie, secret, _now())

    def drop(self, cookie: str, secret: str) -> tuple[Grant | None, bool]:
        """End one sign-in (sign out).

        Returns:
            The grant ended (None: no such sign-in), and whether the cookie carries others still.
        """

        def change(f: _File) -> tuple[Grant | None, bool]:
            now = _now()
            found = _match(f.cookies, cookie, secret, now)
            f.cookies = [g for g in f.cookies if g is not found and not _gone(g, now)]
            return found, any(g.digest == digest(cookie) for g in f.cookies)

        return self._change(change)

    def live(self) -> set[str]:
        """The page digests of every live sign-in (for ending the streams of the others)."""
        now = _now()
        return {g.page for g in self._read().cookies if g.page and not _gone(g, now)}

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


def _match(cookies: list[Grant], cookie: str, secret: str, now: datetime) -> Grant | None:
    """The live grant of `cookie` whose page secret is `secret` (compared in constant time)."""
    wanted, page = digest(cookie), digest(secret)
    found = None
    for g in cookies:
        if g.digest == wanted and hmac.compare_digest(g.page or "-", page) and not _gone(g, now):
            found = g
    return found


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class Throttle:
    """Wrong sign-in codes, limited per client address and in all: token buckets of `burst` that
    refill one every `every` seconds. A code is looked at only while both buckets hold one."""

    burst: float = 10
    every: float = 6.0
    all_burst: float = 60
    all_every: float = 1.0
    clock: Callable[[], float] = field(default=time.monotonic)
    _by: dict[str, _Bucket] = field(default_factory=dict)
    _all: _Bucket | None = None

    MAX_ADDRESSES = 4096
    """Addresses kept at once; full buckets are forgotten first (they are as good as new)."""

    def check(self, address: str) -> None:
        """Refuse when `address`, or everyone, has no wrong code left for now.

        Raises:
            RateLimited: with the seconds to wait in its ``retry_after`` field.
        """
        now = self.clock()
        mine = self._fill(self._by.get(address), self.burst, self.every, now)
        every = self._fill(self._all, self.all_burst, self.all_every, now)
        if mine.tokens >= 1 and every.tokens >= 1:
            return
        wait = max(
            (1 - mine.tokens) * self.every if mine.tokens < 1 else 0.0,
            (1 - every.tokens) * self.all_every if every.tokens < 1 else 0.0,
        )
        seconds = max(1, math.ceil(wait))
        whose = "this address" if mine.tokens < 1 else "everyone"
        raise RateLimited(
            f"too many wrong sign-in codes from {whose}; try again in {seconds} s "
            "(a fresh link: `tui web --link` on the machine, or a new `tui share`)",
            retry_after=seconds,
        )

    def charge(self, address: str) -> None:
        """Count one wrong code from `address`."""
        now = self.clock()
        mine = self._fill(self._by.get(address), self.burst, self.every, now)
        self._all = self._fill(self._all, self.all_burst, self.all_every, now)
        mine.tokens -= 1
        self._all.tokens -= 1
        self._by[address] = mine
        if len(self._by) > self.MAX_ADDRESSES:
            self._forget(now)

    def _fill(self, bucket: _Bucket | None, burst: float, every: float, now: float) -> _Bucket:
        if bucket is None:
            return _Bucket(burst, now)
        bucket.tokens = min(burst, bucket.tokens + (now - bucket.at) / every)
        bucket.at = now
        return bucket

    def _forget(self, now: float) -> None:
        for address, bucket in list(self._by.items()):
            if self._fill(bucket, self.burst, self.every, now).tokens >= self.burst:
                del self._by[address]
        while len(self._by) > self.MAX_ADDRESSES:
            del self._by[next(iter(self._by))]
