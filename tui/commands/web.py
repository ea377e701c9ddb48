"""Commands: ``tui web``, ``tui remote add|list|remove``, ``tui share``."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from tui.errors import Refused, TuiError, Unreachable, UsageError, error_from_wire
from tui.link.remote import NEEDED
from tui.store import StatePaths, resolve_id
from tui.store.remotes import Remote, add_remote, list_remotes, read_token_file, remove_remote


def _state(args: argparse.Namespace) -> StatePaths:
    return StatePaths.resolve(getattr(args, "state_dir", None))


# --- tui web -------------------------------------------------------------------------------------
def run_web(args: argparse.Namespace) -> int:
    """``tui web``: serve this machine's sessions until stopped."""
    from tui.web.server import serve

    return serve(_state(args), host=args.host, port=args.port, token_file=args.token_file)


# --- tui remote ----------------------------------------------------------------------------------
def run_remote(args: argparse.Namespace) -> int:
    """``tui remote add NAME URL --token-file F``, ``remote list``, ``remote remove NAME``."""
    state = _state(args)
    if args.action == "add":
        token_file = str(Path(args.token_file).expanduser().resolve())
        url = args.url.rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"{url!r} is not a web address; write it as http://HOST:PORT")
        info = check_remote(url, token_file, name=args.name)
        add_remote(state, Remote(args.name, url, token_file))
        who = info.get("principal") or {}
        kind = who.get("kind", "owner")
        line = f"remote {args.name}: {url}, tui-web {info.get('version', '?')}, as {kind}"
        if kind != "owner" and who.get("session_id"):
            sid = str(who["session_id"])[:8]
            line += f" of session {sid}; `tui --remote {args.name} attach {sid}`"
        else:
            line += f"; `tui --remote {args.name} sessions` lists its sessions"
        print(line)
        return 0
    if args.action == "list":
        remotes = list_remotes(state)
        if not remotes:
            print("no remotes yet; `tui remote add NAME URL --token-file F` adds one")
        for r in remotes:
            print(f"{r.name}\t{r.url}\t{r.token_file}")
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
    if not isinstance(body, dict) or body.get("app") != "tui-web":
        raise TuiError(f"{url} is not a tui web (GET /api/info answered something else)")
    missing = [f for f in NEEDED if f not in body.get("features", [])]
    if missing:
        raise TuiError(
            f"remote {name} runs tui web {body.get('version', '?')}, too old: update it there "
            f"(it lacks {', '.join(missing)})"
        )
    return body


# --- tui share -----------------------------------------------------------------------------------
def run_share(args: argparse.Namespace) -> int:
    """``tui share ID --name N --kind K``, ``share list ID``, ``share revoke ID [--participant N]``."""
    from tui.web.participants import ParticipantStore, parse_ttl
    from tui.web.paths import WebPaths
    from tui.web.server import read_server
    from tui.web.tokens import write_token_file

    if getattr(args, "remote", None):
        raise UsageError("`tui share` works on this machine's sessions; run it where `tui web` runs")
    state = _state(args)
    words = list(args.args)
    action = words[0] if words[0] in ("list", "revoke") and len(words) == 2 else "add"
    if action != "add":
        words = words[1:]
    if len(words) != 1:
        raise UsageError(
            "usage: tui share ID --name N --kind viewer|collaborator | share list ID | share revoke ID"
        )
    sid = resolve_id(state, words[0])
    store = ParticipantStore(WebPaths.of(state.root))
    if action == "list":
        people = store.of_session(sid)
        if not people:
            print(f"session {sid[:8]} is not shared; `tui share {sid[:8]} --name N --kind viewer` shares it")
        for p in people:
            view = p.view()
            turns = f"{p.turns_used}/{p.turns}" if p.turns is not None else str(p.turns_used)
            print(
                f"{p.name}\t{p.kind}\t{view['state']}\texpires {_when(p.expires_at)}\t"
                f"turns {turns}\tlast seen {_when(p.last_seen)}"
            )
        return 0
    if action == "revoke":
        done = store.revoke(sid, args.participant)
        if not done:
            print(f"nothing to revoke on session {sid[:8]}")
        for p in done:
            print(f"revoked {p.name} ({p.kind}) on session {sid[:8]}")
        return 0
    if not args.name or not args.kind:
        raise UsageError(f"`tui share {words[0]}` needs --name N and --kind viewer|collaborator")
    if args.turns is not None and args.kind != "collaborator":
        raise UsageError("--turns limits a collaborator's turns; a viewer sends none")
    ttl = parse_ttl(args.ttl) if args.ttl else None
    person, token = store.add(sid, name=args.name, kind=args.kind, ttl=ttl, turns=args.turns)
    server = read_server(state)
    url = str(server["url"]) if server else "http://HOST:7433"
    limits = [person.kind, f"expires {_when(person.expires_at)}"]
    if person.turns is not None:
        limits.append(f"{person.turns} turns")
    print(f"shared session {sid[:8]} with {person.name} ({', '.join(limits)})")
    if args.token_file:
        write_token_file(Path(args.token_file), token)
        print(f"token written to {args.token_file} (mode 0600); give it to {person.name} privately")
    else:
        print(f"token (shown once, give it to {person.name} privately): {token}")
    if server is None:
        print("tui web is not running here: start it (`tui web --host ADDR`) and put its address in:")
    print(f"for {person.name}, with the token saved in a file F:")
    print(f"  tui remote add NAME {url} --token-file F")
    print(f"  tui --remote NAME attach {sid[:8]}")
    return 0


def _when(at: datetime | None) -> str:
    if at is None:
        return "never"
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


__all__ = ["NEEDED", "check_remote", "run_remote", "run_share", "run_web"]
