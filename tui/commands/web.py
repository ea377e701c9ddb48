"""Commands: ``tui web``, ``tui remote add|list|remove``, ``tui share``."""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import httpx
from pydantic import BaseModel

from tui.errors import InvalidRequest, Refused, TuiError, Unreachable, UsageError, error_from_wire
from tui.link.remote import NEEDED, checked_info
from tui.protocol.ids import short_id
from tui.protocol.routes import WEB, RouteSpec
from tui.protocol.web import Participants, ParticipantView, Resolved, Revoked, Shared, ShareRequest
from tui.store import StatePaths, resolve_id
from tui.store.remotes import Remote, add_remote, list_remotes, read_token_file, remove_remote

if TYPE_CHECKING:
    from tui.web.participants import Participant


def _state(args: argparse.Namespace) -> StatePaths:
    return StatePaths.resolve(getattr(args, "state_dir", None))


# --- tui web -------------------------------------------------------------------------------------
def run_web(args: argparse.Namespace) -> int:
    """``tui web``: serve this machine's sessions until stopped."""
    from tui.config import default_token_file, remember_token_file
    from tui.web.server import serve

    state = _state(args)
    if args.link:
        return _print_owner_link(state)
    if args.token_file:
        remember_token_file(args.token_file, state.root)
    if args.ray:
        from tui.access.engines import engine_for, run_on_ray

        run_on_ray(args.ray)
        engine_for(state)  # Ray not installed: said now, in one line, not at the first session
    suggested = _home(default_token_file("web-owner"))
    return serve(
        state,
        host=args.host,
        port=args.port,
        token_file=args.token_file,
        suggested_token_file=suggested,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
    )


def _print_owner_link(state: StatePaths) -> int:
    """``tui web --link``: a fresh sign-in link for the owner, for the ``tui web`` running here."""
    from tui.web.paths import WebPaths
    from tui.web.server import owner_link, read_owner_digest, read_server
    from tui.web.signin import CODE_TTL, SignIns

    server = read_server(state)
    web = WebPaths.of(state.root)
    if server is None:
        raise UsageError("tui web is not running here; start it with `tui web`: it prints a sign-in link")
    page = owner_link(SignIns(web), str(server["url"]), read_owner_digest(web))
    print(f"open in a browser (signs you in once, for {CODE_TTL // 60} minutes): {page}")
    return 0


def _home(path: Path) -> str:
    """`path` with the home folder written ``~``, as a user types it."""
    home = Path.home()
    return f"~/{path.relative_to(home)}" if path.is_relative_to(home) and path != home else str(path)


# --- tui remote ----------------------------------------------------------------------------------
def run_remote(args: argparse.Namespace) -> int:
    """``tui remote add NAME URL --token-file F``, ``remote list``, ``remote remove NAME``."""
    state = _state(args)
    if args.action == "add" and args.url.startswith("ssh:"):
        from tui.commands.machines import add_ssh_remote

        return add_ssh_remote(state, args)
    if args.action == "add":
        if not args.token_file:
            raise UsageError(
                f"`tui remote add {args.name} {args.url}` needs the token of that tui web: --token-file F"
            )
        if args.tui:
            raise UsageError("--tui goes with an ssh:// address; a tui web runs its own")
        token_file = str(Path(args.token_file).expanduser().resolve())
        url = args.url.rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise UsageError(
                f"{url!r} is not a web address; write it as http://HOST:PORT (or ssh://[USER@]HOST[:PORT])"
            )
        info = check_remote(url, token_file, name=args.name)
        add_remote(state, Remote(args.name, url, token_file))
        who = info.get("principal") or {}
        kind = who.get("kind", "owner")
        line = f"remote {args.name}: {url}, tui-web {info.get('version', '?')}, as {kind}"
        if kind != "owner" and who.get("session_id"):
            sid = short_id(str(who["session_id"]))
            line += f" of session {sid}; `tui --remote {args.name} attach {sid}`"
        else:
            line += f"; `tui --remote {args.name} sessions` lists its sessions"
        print(line)
        return 0
    if args.action == "list":
        remotes = list_remotes(state)
        if not remotes:
            print(
                "no remotes yet; `tui remote add NAME URL --token-file F` adds a tui web, "
                "`tui remote add NAME ssh://HOST` a machine you reach with ssh"
            )
        else:
            rows = [
                (
                    r.name,
                    r.url,
                    r.token_file if r.kind == "web" else "none (ssh; runs " + (r.tui or "tui") + ")",
                )
                for r in remotes
            ]
            _table([("NAME", "URL", "TOKEN FILE"), *rows])
        return 0
    remove_remote(state, args.name)
    print(f"removed remote {args.name}")
    return 0


def check_remote(url: str, token_file: str, *, name: str) -> dict[str, Any]:
    """Ask a remote's ``GET /api/info`` and refuse what is not a ``tui web`` with the features.

    Raises:
        Unreachable: it could not be asked.
        Refused: it refused the token.
        TuiError: it is not a ``tui web``, or too old.
    """
    token = read_token_file(token_file)
    try:
        reply = httpx.get(f"{url}/api/info", headers={"Authorization": f"Bearer {token}"}, timeout=10.0)
    except httpx.HTTPError as exc:
        raise Unreachable(
            f"cannot reach {url} ({type(exc).__name__}: {exc}); is `tui web` running there?"
        ) from exc
    try:
        body = reply.json()
    except ValueError:
        body = None
    if reply.status_code != 200:
        error = error_from_wire(body, reply.status_code)
        if isinstance(error, Refused) or reply.status_code in (401, 403, 421, 429):
            raise error
        raise TuiError(f"{url} is not a tui web (GET /api/info answered HTTP {reply.status_code})")
    return checked_info(body, name, url)


# --- tui share -----------------------------------------------------------------------------------
def run_share(args: argparse.Namespace) -> int:
    """``tui share ID --name N --kind K``, ``share list ID``, ``share revoke ID [--participant N]``.

    On this machine it works on ``web/participants.json`` itself; with ``--remote NAME`` it asks
    that machine's web bridge (the owner's token is needed there).
    """
    from tui.web.participants import parse_ttl
    from tui.web.tokens import write_token_file

    words = list(args.args)
    if words in (["list"], ["revoke"]):
        raise UsageError(
            f"`share {words[0]}` needs a session: `tui share {words[0]} ID`; `tui sessions` lists them"
        )
    action = words[0] if words[0] in ("list", "revoke") and len(words) == 2 else "add"
    if action != "add":
        words = words[1:]
    if len(words) != 1:
        raise UsageError(
            "usage: tui share ID --name N --kind viewer|collaborator | share list ID | share revoke ID"
        )
    remote = getattr(args, "remote", None)
    if remote:
        from tui.commands.machines import refuse_ssh_share

        refuse_ssh_share(remote, _state(args))
    shares: _Shares = _RemoteShares(args) if remote else _LocalShares(_state(args))
    say = f"tui --remote {remote}" if remote else "tui"
    sid = shares.resolve(words[0])
    if action == "list":
        people = shares.people(sid)
        if not people:
            print(
                f"session {short_id(sid)} is not shared; "
                f"`{say} share {short_id(sid)} --name N --kind viewer` shares it"
            )
        else:
            rows: list[tuple[str, ...]] = [("NAME", "KIND", "STATE", "EXPIRES", "TURNS", "LAST SEEN")]
            for p in people:
                turns = f"{p.turns_used}/{p.turns}" if p.turns is not None else str(p.turns_used)
                rows.append((p.name, p.kind, p.state, _when(p.expires_at), turns, _when(p.last_seen)))
            _table(rows)
        return 0
    if action == "revoke":
        done = shares.revoke(sid, args.participant)
        if not done:
            print(f"nothing to revoke on session {short_id(sid)}")
        for p in done:
            print(f"revoked {p.name} ({p.kind}) on session {short_id(sid)}")
        return 0
    if not args.name or not args.kind:
        raise UsageError(f"`{say} share {words[0]}` needs --name N and --kind viewer|collaborator")
    if args.turns is not None and args.kind != "collaborator":
        raise UsageError("--turns limits a collaborator's turns; a viewer sends none")
    if args.turns is not None and args.turns < 0:
        raise UsageError(f"--turns takes 0 or more, not {args.turns}")
    if args.ttl:
        if args.ttl.strip().isdigit():  # minutes, hours? the command line says which
            t = args.ttl.strip()
            raise UsageError(f"--ttl {t} has no unit; write e.g. {t}m, {t}h or {t}d (units: s, m, h, d, w)")
        try:
            parse_ttl(args.ttl)
        except InvalidRequest as exc:  # a bad option, refused before anything is made (exit 2)
            raise UsageError(f"--{exc}") from exc
    person, token, url, page = shares.add(sid, name=args.name, kind=args.kind, ttl=args.ttl, turns=args.turns)
    limits = [person.kind, f"expires {_when(person.expires_at)}"]
    if person.turns is not None:
        limits.append(f"{person.turns} turns")
    print(f"shared session {short_id(sid)} with {person.name} ({', '.join(limits)})")
    if person.expires_at is None:
        revoke = f"{say} share revoke {short_id(sid)} --participant {shlex.quote(person.name)}"
        print(f"it lasts until revoked: `{revoke}` ends it (or share with --ttl 2h)")
    if args.token_file:
        from tui.config import remember_token_file

        write_token_file(Path(args.token_file), token)
        remember_token_file(args.token_file, _state(args).root)
        print(f"token written to {args.token_file} (mode 0600); give it to {person.name} privately")
    else:
        print(f"token (shown once, give it to {person.name} privately): {token}")
    if url is None:
        url = "http://HOST:7433"
        print("tui web is not running here: start it (`tui web --host ADDR`) and put its address in:")
    if page is not None:
        print(f"for {person.name} in a browser (the link works once, for 10 minutes): {page}")
    print(f"for {person.name} in a terminal, with the token saved in a file F:")
    print(f"  tui remote add NAME {url} --token-file F")
    print(f"  tui --remote NAME attach {short_id(sid)}")
    return 0


View = ParticipantView


class _Shares:
    """Where the participants are: this machine's file, or a remote's participants routes."""

    def resolve(self, prefix: str) -> str:
        raise NotImplementedError

    def people(self, sid: str) -> list[View]:
        raise NotImplementedError

    def revoke(self, sid: str, who: str | None) -> list[View]:
        raise NotImplementedError

    def add(
        self, sid: str, *, name: str, kind: str, ttl: str | None, turns: int | None
    ) -> tuple[View, str, str | None, str | None]:
        raise NotImplementedError


class _LocalShares(_Shares):
    def __init__(self, state: StatePaths) -> None:
        from tui.web.participants import ParticipantStore
        from tui.web.paths import WebPaths

        self.state = state
        self.store = ParticipantStore(WebPaths.of(state.root))

    def resolve(self, prefix: str) -> str:
        return resolve_id(self.state, prefix)

    def people(self, sid: str) -> list[View]:
        return [p.view() for p in self.store.of_session(sid)]

    def revoke(self, sid: str, who: str | None) -> list[View]:
        done = self.store.revoke(sid, who)
        self._record(sid, done, "revoked")
        return [p.view() for p in done]

    def _record(self, sid: str, people: list[Participant], change: Literal["made", "revoked"]) -> None:
        """Say the change in the session's journal, so its chain covers it (`tui audit`)."""
        from tui.access.local import LocalAccess
        from tui.web.participants import record_shares

        if not people:
            return
        why = asyncio.run(record_shares(LocalAccess(self.state), sid, people, change))
        if why is not None:
            print(
                f"tui: the share was {change}, but the session's journal does not say so: {why}",
                file=sys.stderr,
            )

    def add(
        self, sid: str, *, name: str, kind: str, ttl: str | None, turns: int | None
    ) -> tuple[View, str, str | None, str | None]:
        from tui.web.participants import parse_ttl
        from tui.web.server import read_server
        from tui.web.signin import SignIns, link

        person, token = self.store.add(
            sid, name=name, kind=kind, ttl=parse_ttl(ttl) if ttl else None, turns=turns
        )
        self._record(sid, [person], "made")
        server = read_server(self.state)
        if server is None:
            return person.view(), token, None, None
        url = str(server["url"])
        return person.view(), token, url, link(url, SignIns(self.store.paths).new_code(person.id))


class _RemoteShares(_Shares):
    def __init__(self, args: argparse.Namespace) -> None:
        from tui.access.remote import open_access

        self.access = open_access(args.remote, getattr(args, "state_dir", None))

    def _ask(self, spec: RouteSpec, body: BaseModel | None = None, **kw: Any) -> Any:
        async def ask() -> Any:
            try:
                return await self.access.web.call(spec, body, **kw)
            finally:
                await self.access.web.close()

        return asyncio.run(ask())

    def resolve(self, prefix: str) -> str:
        resolved: Resolved = self._ask(WEB["resolve"], query={"id": prefix})
        return resolved.id

    def people(self, sid: str) -> list[View]:
        found: Participants = self._ask(WEB["participants"], id=sid)
        return found.participants

    def revoke(self, sid: str, who: str | None) -> list[View]:
        done: Revoked = self._ask(WEB["revoke"], query={"participant": who} if who else None, id=sid)
        return done.revoked

    def add(
        self, sid: str, *, name: str, kind: str, ttl: str | None, turns: int | None
    ) -> tuple[View, str, str | None, str | None]:
        share = ShareRequest.model_validate({"name": name, "kind": kind, "ttl": ttl, "turns": turns})
        made: Shared = self._ask(WEB["share"], share, id=sid)
        return made.participant, made.token, self.access.web.url, made.link


def _table(rows: Sequence[tuple[str, ...]]) -> None:
    """Rows as aligned columns, the first row a header; the last column is not padded."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join([*(cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])), row[-1]]))


def _when(at: datetime | str | None) -> str:
    if at is None:
        return "never"
    if isinstance(at, str):
        at = datetime.fromisoformat(at)
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


__all__ = ["NEEDED", "check_remote", "run_remote", "run_share", "run_web"]
