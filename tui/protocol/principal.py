"""Who acts on a session, and the one vocabulary of what they may do (remote.md's matrix).

The web bridge decides with it (each route of `tui.protocol.routes` names the `Permission` it
needs), and a client's UI hides with it what the session's machine would refuse.

    permission  owner  collaborator          viewer
    any         yes    yes                   yes            (no session involved)
    read        yes    its session           its session    (follow, transcript, stats)
    write       yes    its session, limits   not_permitted  (turns, answers, interrupt)
    owner       yes    not_permitted         not_permitted  (stop, delete, share, model)
"""

from __future__ import annotations

import getpass
import os
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tui.errors import NotPermitted
from tui.protocol.ids import short_id

__all__ = ["Permission", "Principal", "owner_name"]

Permission = Literal["any", "read", "write", "owner"]
"""What a route or an action needs."""


def owner_name() -> str:
    """The login name of this machine's user, the owner of its sessions (their uid when the
    system has no name for it)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


class Principal(BaseModel):
    """The holder of a token: this machine's owner, or a participant of one shared session."""

    model_config = ConfigDict(defer_build=True, frozen=True)
    kind: Literal["owner", "collaborator", "viewer"] = "owner"
    name: str = ""
    session_id: str | None = None
    """A participant's one session (None for the owner)."""
    turns_left: int | None = None
    """A collaborator's turns left, when its share has a limit."""
    expires_at: datetime | None = None
    token_digest: str = Field(default="", exclude=True)
    """The digest of the token that authenticated (server side; never sent)."""
    participant_id: str | None = Field(default=None, exclude=True)
    """The share's id (server side; never sent)."""

    @property
    def is_owner(self) -> bool:
        return self.kind == "owner"

    def refusal(self, permission: Permission, session_id: str | None = None) -> NotPermitted | None:
        """Why this principal may not do what needs `permission` on `session_id`; None when it may."""
        if self.is_owner or permission == "any":
            return None
        if permission == "owner":
            return NotPermitted(f"a {self.kind}'s token may not do this; only the owner of this machine may")
        if session_id is not None and session_id != self.session_id:
            shown = short_id(self.session_id or "")
            return NotPermitted(f"this token is for session {shown} only; `tui attach {shown}`")
        if permission == "write" and self.kind != "collaborator":
            return NotPermitted(
                "a viewer may follow and read this session, not send turns, answer or interrupt; "
                "ask its owner for a collaborator's share"
            )
        return None

    def may(self, permission: Permission, session_id: str | None = None) -> bool:
        """Whether the session's machine would allow what needs `permission`."""
        return self.refusal(permission, session_id) is None

    def check(self, permission: Permission, session_id: str | None = None) -> None:
        """Refuse what this principal may not do.

        Raises:
            NotPermitted: it may not.
        """
        error = self.refusal(permission, session_id)
        if error is not None:
            raise error
