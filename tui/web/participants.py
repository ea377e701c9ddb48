"""Participants: people a session is shared with (``tui share``), in ``web/participants.json``.

Each participant has a token of its own, of which only the SHA-256 digest is kept, a kind
(``viewer`` follows and reads; ``collaborator`` may also send turns, answer and interrupt), one
session, and limits: an expiry, a number of turns, a revocation. ``tui share`` and a running
``tui web`` both change the file: every change is a read-modify-write under an flock() of
``participants.lock``, written atomically, and a running ``tui web`` re-reads the file when its
mtime moves, so a share or a revoke takes effect on the next request.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from tui.errors import InvalidRequest, NotFound, TokenExpired, TokenRevoked, TooManyTurns, TuiError
from tui.protocol.ids import short_id
from tui.protocol.messages import ShareRecord
from tui.protocol.web import ParticipantView, Share
from tui.store._atomic import write_atomic
from tui.web.paths import WebPaths
from tui.web.tokens import digest, new_token

if TYPE_CHECKING:
    from tui.access.local import LocalAccess

__all__ = ["Kind", "Participant", "ParticipantStore", "parse_ttl", "record_shares", "shares_now"]

Kind = Literal["viewer", "collaborator"]
T = TypeVar("T")

LAST_SEEN_EVERY = 10.0
"""Seconds between two writes of a participant's `last_seen` (it is kept in memory meanwhile)."""

_TTL = re.compile(r"(\d+)\s*([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_NAME = re.compile(r"^[\w.@ -]{1,64}$")


def parse_ttl(text: str) -> timedelta:
    """A duration such as ``2h``, ``30m``, ``1d``, ``1h30m`` or plain seconds.

    Raises:
        InvalidRequest: not a positive duration (code ``invalid_request``).
    """
    t = text.strip().lower()
    if t.isdigit():
        seconds = int(t)
    else:
        parts = _TTL.findall(t)
        if not parts or _TTL.sub("", t).strip():
            raise InvalidRequest(f"ttl {text!r} is not a duration; write e.g. 2h, 30m, 1d or 1h30m")
        seconds = sum(int(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise InvalidRequest(f"ttl {text!r} must be longer than nothing; write e.g. 2h")
    return timedelta(seconds=seconds)


class Participant(Share):
    """One share of one session, with the digest of its token."""

    digest: str
    """SHA-256 (hex) of the token; the token itself is never stored."""

    def state(self, at: datetime | None = None) -> Literal["active", "expired", "revoked"]:
        """Whether the token is still good at `at` (now by default)."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and (at or datetime.now(UTC)) >= self.expires_at:
            return "expired"
        return "active"

    @property
    def turns_left(self) -> int | None:
        """Turns this participant may still send (None: no limit; 0 for a viewer)."""
        if self.kind == "viewer":
            return 0
        if self.turns is None:
            return None
        return max(0, self.turns - self.turns_used)

    def view(self) -> ParticipantView:
        """What lists show: everything but the digest."""
        return ParticipantView(
            **self.model_dump(exclude={"digest"}), state=self.state(), turns_left=self.turns_left
        )


def shares_now(store: ParticipantStore, session_id: str) -> list[dict[str, Any]]:
    """The session's shares as `store` has them now, as `tui.store.audit.audit_of` takes them."""
    return [
        {
            "id": p.id,
            "name": p.name,
            "kind": p.kind,
            "made_at": p.created_at.isoformat(),
            "revoked_at": p.revoked_at.isoformat() if p.revoked_at else None,
            "state": p.state(),
        }
        for p in store.of_session(session_id)
    ]


async def record_shares(
    access: LocalAccess, session_id: str, people: list[Participant], change: Literal["made", "revoked"]
) -> str | None:
    """Write each share made or revoked into the session's journal (`ShareChanged`, through its
    worker, started if none runs), so the chain covers it; the reason when that failed (the share
    itself is changed already: the caller says the journal does not hold it)."""
    try:
        for p in people:
            record = ShareRecord(
                change=change,
                participant=p.id,
                name=p.name,
                kind=p.kind,
                expires_at=p.expires_at,
                turns=p.turns,
            )
            await access.record_share(session_id, record)
    except TuiError as exc:
        return str(exc)
    return None


class _File(BaseModel):
    participants: list[Participant] = []


class ParticipantStore:
    """``web/participants.json``, re-read whenever it changes on disk."""

    def __init__(self, paths: WebPaths) -> None:
        self.paths = paths
        self._stamp: tuple[int, int, int] | None = None
        self._all: list[Participant] = []
        self._by_digest: dict[str, Participant] = {}
        self._seen: dict[str, datetime] = {}

    # --- reading ---------------------------------------------------------------------------
    def load(self) -> list[Participant]:
        """Every participant, re-read from disk only when the file changed (mtime, size, inode)."""
        try:
            st = os.stat(self.paths.participants)
        except FileNotFoundError:
            self._set(None, [])
            return self._all
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            self._set(stamp, self._read())
        return self._all

    def find(self, token: str) -> Participant | None:
        """The participant whose token this is, whatever its state."""
        self.load()
        return self._by_digest.get(digest(token))

    def get(self, participant_id: str) -> Participant | None:
        """A participant by its id, as last read."""
        self.load()
        return next((p for p in self._all if p.id == participant_id), None)

    def of_session(self, session_id: str) -> list[Participant]:
        """The participants of one session, oldest first."""
        return [p for p in self.load() if p.session_id == session_id]

    # --- changing --------------------------------------------------------------------------
    def add(
        self,
        session_id: str,
        *,
        name: str,
        kind: str,
        ttl: timedelta | None = None,
        turns: int | None = None,
    ) -> tuple[Participant, str]:
        """Share a session: a new participant and its token (shown once, never stored).

        Raises:
            InvalidRequest: a bad name, kind or limit, or the name already has a live share.
        """
        if not _NAME.match(name or ""):
            raise InvalidRequest(
                f"participant name {name!r} must be 1-64 letters, digits, spaces or . @ - _",
                field="name",
            )
        if kind not in ("viewer", "collaborator"):
            raise InvalidRequest(f"kind {kind!r} must be viewer or collaborator", field="kind")
        if turns is not None and turns < 0:
            raise InvalidRequest(f"turns must be 0 or more, not {turns}", field="turns")
        token = new_token()
        now = datetime.now(UTC)
        person = Participant(
            id=secrets.token_hex(4),
            session_id=session_id,
            name=name,
            kind=kind,  # type: ignore[arg-type]
            digest=digest(token),
            created_at=now,
            expires_at=now + ttl if ttl is not None else None,
            turns=turns if kind == "collaborator" else None,
        )

        def change(people: list[Participant]) -> None:
            for p in people:
                if p.session_id == session_id and p.name == name and p.state() == "active":
                    raise InvalidRequest(
                        f"{name} already has a share of session {short_id(session_id)}; "
                        f"`tui share revoke {short_id(session_id)} --participant {name}` first",
                        field="name",
                    )
            people.append(person)

        self._change(change)
        return person, token

    def revoke(self, session_id: str, name: str | None = None) -> list[Participant]:
        """Revoke one participant of a session (by name or id), or all of them.

        Returns:
            The participants revoked now (already revoked ones are left out).

        Raises:
            NotFound: `name` names no participant of the session.
        """
        now = datetime.now(UTC)

        def change(people: list[Participant]) -> list[Participant]:
            chosen = [
                p for p in people if p.session_id == session_id and (name is None or name in (p.name, p.id))
            ]
            if name is not None and not chosen:
                raise NotFound(
                    f"session {short_id(session_id)} has no participant {name!r}; "
                    f"`tui share list {short_id(session_id)}` lists them"
                )
            done = []
            for i, p in enumerate(people):
                if p in chosen and p.revoked_at is None:
                    people[i] = p.model_copy(update={"revoked_at": now})
                    done.append(people[i])
            return done

        return self._change(change)

    def take_turn(self, participant_id: str) -> Participant:
        """Count one turn against a collaborator's limit, or refuse it.

        The check and the count happen under the file lock with no await in between, so racing
        requests can never take more turns than the limit.

        Raises:
            Refused: the limit is reached (``too_many_turns``), or the token is revoked or expired.
        """

        def change(people: list[Participant]) -> Participant:
            i, p = _index(people, participant_id)
            _check_state(p)
            left = p.turns_left
            if left is not None and left <= 0:
                raise TooManyTurns(
                    f"{p.name} has used all {p.turns} turns of this share; "
                    "ask the session's owner for a new share with more `--turns`"
                )
            people[i] = p.model_copy(update={"turns_used": p.turns_used + 1, "last_seen": _now()})
            return people[i]

        return self._change(change)

    def take_turn_of(self, session_id: str, name: str) -> bool:
        """`take_turn` for the active share of `session_id` named `name` (a child started in that
        participant's turn); False when the session has no such share.

        Raises:
            Refused: its limit is reached (``too_many_turns``).
        """
        person = next(
            (p for p in self.of_session(session_id) if p.name == name and p.state() == "active"), None
        )
        if person is None:
            return False
        self.take_turn(person.id)
        return True

    def give_back_turn(self, participant_id: str) -> None:
        """Undo `take_turn` for a turn the worker did not accept."""

        def change(people: list[Participant]) -> None:
            i, p = _index(people, participant_id)
            people[i] = p.model_copy(update={"turns_used": max(0, p.turns_used - 1)})

        with contextlib.suppress(NotFound):
            self._change(change)

    def seen(self, participant_id: str) -> None:
        """Note that a participant made a request (written at most every `LAST_SEEN_EVERY` s)."""
        now = _now()
        last = self._seen.get(participant_id)
        if last is not None and (now - last).total_seconds() < LAST_SEEN_EVERY:
            return
        self._seen[participant_id] = now

        def change(people: list[Participant]) -> None:
            i, p = _index(people, participant_id)
            people[i] = p.model_copy(update={"last_seen": now})

        with contextlib.suppress(NotFound):
            self._change(change)

    # --- files -----------------------------------------------------------------------------
    def _set(self, stamp: tuple[int, int, int] | None, people: list[Participant]) -> None:
        self._stamp = stamp
        self._all = people
        self._by_digest = {p.digest: p for p in people}

    def _read(self) -> list[Participant]:
        try:
            raw = self.paths.participants.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise TuiError(f"cannot read {self.paths.participants}: {exc.strerror}") from exc
        if not raw.strip():
            return []
        try:
            return _File.model_validate_json(raw).participants
        except ValidationError as exc:
            raise TuiError(
                f"{self.paths.participants} is damaged ({exc.error_count()} errors); "
                "fix it or remove it and share again"
            ) from exc

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.paths.participants_lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _change(self, change: Callable[[list[Participant]], T]) -> T:
        with self._locked():
            people = self._read()
            result = change(people)
            write_atomic(self.paths.participants, _File(participants=people).model_dump_json(indent=1) + "\n")
            st = os.stat(self.paths.participants)
            self._set((st.st_mtime_ns, st.st_size, st.st_ino), people)
        return result


def _now() -> datetime:
    return datetime.now(UTC)


def _index(people: list[Participant], participant_id: str) -> tuple[int, Participant]:
    for i, p in enumerate(people):
        if p.id == participant_id:
            return i, p
    raise NotFound(f"no participant {participant_id!r}")


def _check_state(p: Participant) -> None:
    state = p.state()
    if state == "revoked":
        raise TokenRevoked(
            f"this token for session {short_id(p.session_id)} was revoked; ask its owner for a new share"
        )
    if state == "expired":
        raise TokenExpired(
            f"this token for session {short_id(p.session_id)} expired; ask its owner for a new share"
        )
