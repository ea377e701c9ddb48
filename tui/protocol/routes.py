"""The route table: every route of the bridge and of the web bridge, declared once.

A `RouteSpec` says a route's method and path, what it takes (query, JSON body model, or raw
bytes), what it answers (status and model), and the `Permission` it needs through the web
bridge. Everything else is derived from this table: the worker's Starlette routes
(`tui.worker.bridge`), the web bridge's own routes and its forwarded ``/api/sessions/{id}``
mount (`tui.web.app`), the clients' requests (`tui.link.client`, `tui.link.remote`,
`tui.access.remote`) and the OpenAPI document (`tui.web.openapi`). A new route is one entry here
and one handler on each side that serves it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Literal
from urllib.parse import quote

from pydantic import BaseModel, TypeAdapter

from tui.protocol import messages as m
from tui.protocol import page as pg
from tui.protocol import web as w
from tui.protocol.principal import Permission

__all__ = [
    "BRIDGE",
    "SESSION_PREFIX",
    "WEB",
    "Param",
    "RouteSpec",
    "forwarded",
]

Method = Literal["GET", "POST", "DELETE"]

SESSION_PREFIX = "/api/sessions/{id}"
"""Where the web bridge serves a session's bridge routes."""


@dataclass(frozen=True)
class Param:
    """A query parameter."""

    name: str
    kind: Literal["string", "integer", "boolean"] = "string"
    description: str = ""


@dataclass(frozen=True)
class RouteSpec:
    """One route.

    Attributes:
        name: its name in code (``turn``, ``participants_add``).
        method: the HTTP method.
        path: the path, with ``{name}`` parameters.
        summary: what it does, in a few words.
        permission: what it needs through the web bridge; None for a worker route that the web
            bridge does not forward (``/leave``: the owner stops a session with ``…/stop``).
        status: its success status.
        request: the JSON body's model, None when it takes no JSON body.
        answer: the success body's type (a model, or ``list[Model]``); None for a stream or a
            document described elsewhere.
        query: its query parameters.
        media: the success body's media type.
        upload: a raw request body's media type (``image/*``), instead of JSON.
        spends_turn: a collaborator's turn limit counts it when it starts a turn (a prompt, run
            or queued; a note with ``now`` that started one).
    """

    name: str
    method: Method
    path: str
    summary: str
    permission: Permission | None
    status: int = 200
    request: type[BaseModel] | None = None
    answer: Any = None
    query: tuple[Param, ...] = ()
    media: str = "application/json"
    upload: str | None = None
    spends_turn: bool = False

    def url(self, **params: str) -> str:
        """The path with its parameters filled in (each quoted)."""
        return self.path.format(**{k: quote(v, safe="") for k, v in params.items()})

    def params(self, **values: Any) -> dict[str, Any]:
        """A query of this route: the values given, those that are None left out.

        Raises:
            TypeError: a name that is not one of the route's `query` parameters (a mistake in code).
        """
        names = {param.name for param in self.query}
        unknown = sorted(set(values) - names)
        if unknown:
            given = ", ".join(unknown)
            raise TypeError(f"{self.name} takes no query parameter {given} (only {sorted(names)})")
        return {name: value for name, value in values.items() if value is not None}

    @cached_property
    def _adapter(self) -> TypeAdapter[Any] | None:
        return TypeAdapter(self.answer) if self.answer is not None else None

    def read_answer(self, data: Any) -> Any:
        """The success body decoded into the route's answer type.

        Raises:
            pydantic.ValidationError: the body is not what the route answers.
        """
        return data if self._adapter is None else self._adapter.validate_python(data)

    def answer_schema(self, ref_template: str) -> dict[str, Any] | None:
        """The JSON schema of the success body (None for a stream)."""
        if self._adapter is None:
            return None
        return self._adapter.json_schema(ref_template=ref_template)


def _routes(*specs: RouteSpec) -> dict[str, RouteSpec]:
    return {spec.name: spec for spec in specs}


BRIDGE = _routes(
    RouteSpec("info", "GET", "/info", "its worker's info", "read", answer=m.Info),
    RouteSpec(
        "events",
        "GET",
        "/events",
        "its event stream",
        "read",
        query=(
            Param("cursor", "integer", "the last seq already seen"),
            Param("client_id", description="who follows, for /stats"),
            Param(
                "presence",
                description="later: a reader; its opening writes no status, the next one names it",
            ),
        ),
        media="text/event-stream",
    ),
    RouteSpec(
        "transcript",
        "GET",
        "/transcript",
        "its last turns",
        "read",
        answer=m.Transcript,
        query=(
            Param("limit", "integer"),
            Param("before", description="a turn id: the page before it"),
            Param("after", description="a turn id: the page after it, oldest first"),
            Param("around", description="a turn id: a page holding it, about half before it"),
            Param("first", "boolean", "the session's first turns"),
        ),
    ),
    RouteSpec(
        "search",
        "GET",
        "/search",
        "find text in every turn (case-insensitive), oldest first",
        "read",
        answer=m.SearchResult,
        query=(
            Param("q", description="the text to find"),
            Param("limit", "integer", "at most this many hits (200 unless given)"),
        ),
    ),
    RouteSpec(
        "turn_output",
        "GET",
        "/turns/{turn_id}/output",
        "a turn's whole reply, or one tool call's whole output, streamed",
        "read",
        query=(Param("call_id", description="a tool call of that turn: its output instead"),),
        media="text/plain",
    ),
    RouteSpec(
        "turn_files",
        "GET",
        "/turns/{turn_id}/files",
        "what a turn did to the session's files: a unified diff, or its stat",
        "read",
        query=(Param("stat", "boolean", "files and lines changed instead of the whole diff"),),
        media="text/plain",
    ),
    RouteSpec("stats", "GET", "/stats", "its figures", "read", answer=m.Stats),
    RouteSpec(
        "turn",
        "POST",
        "/turn",
        "send a turn",
        "write",
        status=202,
        request=m.TurnRequest,
        answer=m.TurnAccepted,
        spends_turn=True,
    ),
    RouteSpec(
        "answer",
        "POST",
        "/answer",
        "answer its question",
        "write",
        request=m.AnswerRequest,
        answer=m.Answered,
    ),
    RouteSpec(
        "dismiss",
        "POST",
        "/question/dismiss",
        "dismiss its question",
        "write",
        request=m.DismissRequest,
        answer=m.Dismissed,
    ),
    RouteSpec(
        "interrupt",
        "POST",
        "/interrupt",
        "end the running turn",
        "write",
        request=m.InterruptRequest,
        answer=m.Interrupted,
    ),
    RouteSpec(
        "note",
        "POST",
        "/notes",
        "leave a note the agent is given with its next turn",
        "write",
        request=m.NoteRequest,
        answer=m.Noted,
        spends_turn=True,
    ),
    RouteSpec(
        "rewind",
        "POST",
        "/rewind",
        "put its files and conversation back as they were before a turn",
        "owner",
        request=m.RewindRequest,
        answer=m.RewindDone,
    ),
    RouteSpec(
        "budget",
        "GET",
        "/budget",
        "its limits (cost, tokens, turns, wall time) and what it spent of each",
        "read",
        answer=m.BudgetView,
    ),
    RouteSpec(
        "budget_set",
        "POST",
        "/budget",
        "change its limits; a turn stopped at one may go on",
        "owner",
        request=m.BudgetRequest,
        answer=m.BudgetView,
    ),
    RouteSpec(
        "context_list",
        "GET",
        "/context",
        "its context sources and their values",
        "read",
        answer=m.ContextList,
    ),
    RouteSpec(
        "context_add",
        "POST",
        "/context",
        "add a context source (a command, a file, or pushed values)",
        "owner",
        status=201,
        request=m.ContextAddRequest,
        answer=m.ContextEntry,
    ),
    RouteSpec(
        "context_remove",
        "DELETE",
        "/context/{name}",
        "remove a context source",
        "owner",
        answer=m.ContextRemoved,
    ),
    RouteSpec(
        "context_push",
        "POST",
        "/context/{name}/push",
        "a pushed source's new value",
        "write",
        request=m.ContextPushRequest,
        answer=m.ContextPushed,
    ),
    RouteSpec(
        "unqueue", "DELETE", "/queue/{queue_id}", "take a queued prompt back", "write", answer=m.Unqueued
    ),
    RouteSpec(
        "queue_resume",
        "POST",
        "/queue/resume",
        "run a queue held after an interrupt",
        "write",
        answer=m.QueueResumed,
    ),
    RouteSpec(
        "images",
        "POST",
        "/images",
        "store an image (raw bytes)",
        "write",
        status=201,
        answer=m.ImageRef,
        query=(Param("name", description="the image's file name"),),
        upload="image/*",
    ),
    RouteSpec(
        "model", "POST", "/model", "switch its model", "owner", request=m.ModelRequest, answer=m.ModelSet
    ),
    RouteSpec(
        "child_adopt",
        "POST",
        "/children",
        "follow a child made from outside (`tui send --new --parent`) as one it delegated to",
        "owner",
        request=m.ChildAdoptRequest,
        answer=m.ChildAdopted,
    ),
    RouteSpec(
        "share_record",
        "POST",
        "/shares",
        "write a share made or revoked into the journal",
        None,
        request=m.ShareRecord,
        answer=m.Recorded,
    ),
    RouteSpec("leave", "POST", "/leave", "stop the worker", None, request=m.LeaveRequest, answer=m.Left),
)
"""The worker's bridge (protocol.md), served at ``/`` of its socket and forwarded by the web
bridge under `SESSION_PREFIX`."""

_S = SESSION_PREFIX
WEB = _routes(
    RouteSpec(
        "web_info", "GET", "/api/info", "what this web bridge is, and who is asking", "any", answer=w.WebInfo
    ),
    RouteSpec("openapi", "GET", "/api/openapi.json", "this document", "any"),
    RouteSpec(
        "signin",
        "POST",
        "/api/signin",
        "a sign-in link's one-time code for a session cookie and a page secret (no token needed)",
        "any",
        request=w.SignInRequest,
        answer=w.SignedIn,
    ),
    RouteSpec("signout", "POST", "/api/signout", "end the page's sign-in", "any", answer=w.SignedOut),
    RouteSpec(
        "sessions",
        "GET",
        "/api/sessions",
        "every session (a participant: the one shared with it)",
        "read",
        answer=list[w.SessionSummary],
        query=(
            Param("archived", "boolean"),
            Param("live", "boolean"),
            Param("working_directory"),
            Param("limit", "integer"),
            Param("sort"),
            Param("order"),
        ),
    ),
    RouteSpec(
        "search_all",
        "GET",
        "/api/search",
        "find text in every session, newest first (a participant: in the one shared with it)",
        "read",
        answer=w.Found,
        query=(
            Param("q", description="the words, in that order; a final * makes the last a prefix"),
            Param("in", description="kinds of text, comma-separated: prompt, reply, tool, error, note, …"),
            Param("working_directory"),
            Param("agent"),
            Param("since", description="an ISO 8601 time"),
            Param("active", "boolean"),
            Param("limit", "integer"),
            Param("before", "integer", description="the previous page's next"),
        ),
    ),
    RouteSpec(
        "create",
        "POST",
        "/api/sessions",
        "a new session",
        "owner",
        status=201,
        request=w.CreateRequest,
        answer=w.Created,
    ),
    RouteSpec(
        "resolve",
        "GET",
        "/api/sessions/resolve",
        "the full id of a prefix",
        "read",
        answer=w.Resolved,
        query=(Param("id", description="an id or unique prefix"),),
    ),
    RouteSpec("show", "GET", _S, "one session", "read", answer=w.SessionSummary),
    RouteSpec(
        "delete",
        "DELETE",
        _S,
        "remove a session",
        "owner",
        answer=w.Deleted,
        query=(Param("force", "boolean", "stop a live worker first"),),
    ),
    RouteSpec(
        "stop", "POST", f"{_S}/stop", "stop its worker", "owner", request=w.StopRequest, answer=w.Stopped
    ),
    RouteSpec(
        "restart", "POST", f"{_S}/restart", "a new worker", "owner", request=w.WakeRequest, answer=w.Restarted
    ),
    RouteSpec("archive", "POST", f"{_S}/archive", "hide it from lists", "owner", answer=w.Archived),
    RouteSpec(
        "unarchive", "POST", f"{_S}/unarchive", "list it again after an archive", "owner", answer=w.Archived
    ),
    RouteSpec(
        "wake",
        "POST",
        f"{_S}/wake",
        "start its worker if none runs",
        "read",
        request=w.WakeRequest,
        answer=w.WorkerView,
    ),
    RouteSpec("worker", "GET", f"{_S}/worker", "its worker now", "read", answer=w.WorkerView),
    RouteSpec(
        "changes",
        "GET",
        f"{_S}/changes",
        "its changes as the page draws them, in words (the web bridge's attachment), streamed",
        "read",
        query=(
            Param("cursor", description="the id of the last change drawn (also Last-Event-ID)"),
            Param("client_id", description="who follows, for /stats"),
            Param(
                "presence",
                description="later: a reader; its opening writes no status, the next one names it",
            ),
        ),
        media="text/event-stream",
    ),
    RouteSpec(
        "turns",
        "GET",
        f"{_S}/turns",
        "older turns as the page draws them, in words",
        "read",
        answer=pg.TurnPage,
        query=(
            Param("before", description="a turn id: the turns before it"),
            Param("limit", "integer", "at most this many (20 unless given)"),
        ),
    ),
    RouteSpec(
        "export",
        "GET",
        f"{_S}/export",
        "its whole transcript, streamed from its journal (no worker needed)",
        "read",
        query=(Param("format", description="text (the default), markdown or jsonl"),),
        media="text/plain",
    ),
    RouteSpec(
        "verify",
        "GET",
        f"{_S}/verify",
        "its journal's chain checked where the journal is (`tui verify`)",
        "owner",
        answer=w.Verified,
        query=(Param("head", description="SEQ:HASH, a chain head kept elsewhere: is it still a link?"),),
    ),
    RouteSpec(
        "audit",
        "GET",
        f"{_S}/audit",
        "who did what, from its journal, with the chain's head (`tui audit`)",
        "owner",
        answer=w.AuditReport,
    ),
    RouteSpec(
        "participants", "GET", f"{_S}/participants", "who it is shared with", "owner", answer=w.Participants
    ),
    RouteSpec(
        "share",
        "POST",
        f"{_S}/participants",
        "share it",
        "owner",
        status=201,
        request=w.ShareRequest,
        answer=w.Shared,
    ),
    RouteSpec(
        "revoke",
        "DELETE",
        f"{_S}/participants",
        "revoke shares",
        "owner",
        answer=w.Revoked,
        query=(Param("participant", description="one participant's name; all when absent"),),
    ),
)
"""The web bridge's own routes (remote.md); the session's bridge routes come under `SESSION_PREFIX`."""


def forwarded() -> list[RouteSpec]:
    """The bridge routes a remote may use, at their web bridge paths (under `SESSION_PREFIX`)."""
    return [
        replace(spec, path=SESSION_PREFIX + spec.path)
        for spec in BRIDGE.values()
        if spec.permission is not None
    ]
