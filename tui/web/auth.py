"""Who is asking, and what they may do: the owner, or a participant of one session.

The token travels only in ``Authorization: Bearer``; a token anywhere else (a query string, a
cookie) is never looked at. The permission matrix is remote.md's:

    level    owner  collaborator          viewer
    read     yes    its session           its session
    write    yes    its session, limits   not_permitted
    owner    yes    not_permitted         not_permitted
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from tui.errors import Refused
from tui.web.participants import Participant, ParticipantStore
from tui.web.tokens import matches

__all__ = ["Level", "Principal", "authenticate", "permit", "principal_of"]

Level = Literal["any", "read", "write", "owner"]


@dataclass(frozen=True)
class Principal:
    """The holder of a request's token."""

    kind: Literal["owner", "viewer", "collaborator"]
    name: str
    token_digest: str
    session_id: str | None = None
    """A participant's one session (None for the owner)."""
    participant_id: str | None = None
    expires_at: datetime | None = None

    @property
    def is_owner(self) -> bool:
        return self.kind == "owner"

    def info(self, store: ParticipantStore) -> dict[str, object]:
        """`GET /api/info`'s principal: kind, name, session_id, turns_left, expires_at."""
        turns_left: int | None = None
        if self.participant_id is not None:
            p = store.get(self.participant_id)
            turns_left = p.turns_left if p is not None else 0
        return {
            "kind": self.kind,
            "name": self.name,
            "session_id": self.session_id,
            "turns_left": turns_left,
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
        }


def _bearer(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def authenticate(authorization: str | None, owner_digest: str, store: ParticipantStore) -> Principal:
    """The principal of an ``Authorization`` header.

    Raises:
        Refused: no or unknown token (``unauthorized``), a revoked one (``token_revoked``) or an
            expired one (``token_expired``).
    """
    token = _bearer(authorization)
    if token is None:
        raise Refused(
            "this web bridge needs a token in `Authorization: Bearer`; "
            "`tui remote add NAME URL --token-file F` sets one up",
            code="unauthorized",
        )
    if owner_digest and matches(token, owner_digest):
        return Principal(kind="owner", name=_login(), token_digest=owner_digest)
    person = store.find(token)
    if person is None:
        raise Refused(
            "this web bridge does not know that token; ask its owner for a new one "
            "and `tui remote add NAME URL --token-file F` again",
            code="unauthorized",
        )
    return principal_of(person)


def principal_of(person: Participant) -> Principal:
    """The principal of a participant's token, once its state is checked.

    Raises:
        Refused: the token is revoked (``token_revoked``) or expired (``token_expired``).
    """
    state = person.state()
    if state == "revoked":
        raise Refused(
            f"the share of session {person.session_id[:8]} for {person.name} was revoked; "
            "ask its owner for a new one",
            code="token_revoked",
        )
    if state == "expired":
        raise Refused(
            f"the share of session {person.session_id[:8]} for {person.name} expired; "
            "ask its owner for a new one",
            code="token_expired",
        )
    return Principal(
        kind=person.kind,
        name=person.name,
        token_digest=person.digest,
        session_id=person.session_id,
        participant_id=person.id,
        expires_at=person.expires_at,
    )


def permit(principal: Principal, level: Level, session_id: str | None = None) -> None:
    """Refuse what this principal's kind may not do (remote.md's matrix).

    Args:
        principal: who asks.
        level: what the route needs.
        session_id: the session the route is about, if any.

    Raises:
        Refused: ``not_permitted``.
    """
    if principal.is_owner or level == "any":
        return
    if level == "owner":
        raise Refused(
            f"a {principal.kind}'s token may not do this; only the owner of this machine may",
            code="not_permitted",
        )
    if session_id != principal.session_id:
        shown = (principal.session_id or "")[:8]
        raise Refused(
            f"this token is for session {shown} only; `tui attach {shown}`",
            code="not_permitted",
        )
    if level == "write" and principal.kind != "collaborator":
        raise Refused(
            "a viewer may follow and read this session, not send turns, answer or interrupt; "
            "ask its owner for a collaborator's share",
            code="not_permitted",
        )


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "owner"
