"""Who is asking: the owner, or a participant of one session (`tui.protocol.principal`).

The token travels only in ``Authorization: Bearer``; a token anywhere else (a query string, a
cookie) is never looked at. What each may do is `Principal.check`, from the route table.
"""

from __future__ import annotations

from tui.errors import TokenExpired, TokenRevoked, Unauthorized
from tui.protocol.ids import short_id
from tui.protocol.principal import Principal, owner_name
from tui.web.participants import Participant, ParticipantStore
from tui.web.tokens import matches

__all__ = ["authenticate", "describe", "principal_of"]


def describe(principal: Principal, store: ParticipantStore) -> Principal:
    """`GET /api/info`'s principal: with a collaborator's turns left as the store has them now."""
    if principal.participant_id is None:
        return principal
    person = store.get(principal.participant_id)
    return principal.model_copy(update={"turns_left": person.turns_left if person is not None else 0})


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
        raise Unauthorized(
            "this web bridge needs a token in `Authorization: Bearer`; "
            "`tui remote add NAME URL --token-file F` sets one up"
        )
    if owner_digest and matches(token, owner_digest):
        return Principal(kind="owner", name=owner_name(), token_digest=owner_digest)
    person = store.find(token)
    if person is None:
        raise Unauthorized(
            "this web bridge does not know that token; ask its owner for a new one "
            "and `tui remote add NAME URL --token-file F` again"
        )
    return principal_of(person)


def principal_of(person: Participant) -> Principal:
    """The principal of a participant's token, once its state is checked.

    Raises:
        Refused: the token is revoked (``token_revoked``) or expired (``token_expired``).
    """
    state = person.state()
    if state == "revoked":
        raise TokenRevoked(
            f"the share of session {short_id(person.session_id)} for {person.name} was revoked; "
            "ask its owner for a new one"
        )
    if state == "expired":
        raise TokenExpired(
            f"the share of session {short_id(person.session_id)} for {person.name} expired; "
            "ask its owner for a new one"
        )
    return Principal(
        kind=person.kind,
        name=person.name,
        token_digest=person.digest,
        session_id=person.session_id,
        participant_id=person.id,
        expires_at=person.expires_at,
    )
