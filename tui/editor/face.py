"""The ACP agent side of `tui acp`: an editor's requests made on tui sessions.

Each session the editor opens (``session/new``, ``load``, ``resume``) is an `EditorSession`
(`tui.editor.session`), which follows it and tells the editor what it says. This module answers
the editor's requests, tells it ``session/update``s (one at a time, or a load's replay in one
write), asks it the sessions' questions (``session/request_permission``, ``elicitation/create``)
and withdraws one (``$/cancel_request``) when another client answers it first. Closing a session,
or the editor, only lets go of it: the session and its worker go on.
"""

from __future__ import annotations

import contextlib
from typing import Any

import acp
from acp import schema
from acp.connection import Connection, StreamDirection, StreamEvent
from acp.meta import CLIENT_METHODS
from pydantic import TypeAdapter

from tui import __version__
from tui.access.base import SessionAccess
from tui.editor.lines import EditorLines
from tui.editor.session import EditorSession, dump, notification, request_error
from tui.editor.shapes import MODE, Update, prompt_text
from tui.errors import TuiError
from tui.link.base import AttachLink
from tui.link.watch import SessionWatch
from tui.protocol import Info

__all__ = ["EditorFace"]

_ASKING = (CLIENT_METHODS["session_request_permission"], CLIENT_METHODS["elicitation_create"])
"""The requests that ask the editor a question."""
_ELICITED: TypeAdapter[schema.CreateElicitationResponse] = TypeAdapter(schema.CreateElicitationResponse)

CANCEL_REQUEST = "$/cancel_request"
"""ACP's notification that withdraws a request the editor has not answered."""


class EditorFace:
    """The ACP agent an editor talks to (`acp.interfaces.Agent`'s methods).

    Args:
        access: where sessions are (this machine, or a remote).
        agent: what a new session runs (None: the machine's default).
        model: a new model session's model.
        client_id: this process, as the sessions' turns and presence name it.
    """

    def __init__(
        self,
        access: SessionAccess,
        *,
        agent: str | None,
        model: str | None,
        client_id: str,
        images: bool = False,
        redact: bool = False,
    ) -> None:
        self.access = access
        self.agent = agent
        self.model = model
        self.client_id = client_id
        self.images = images
        self.redact = redact
        """What the editor is told has its secrets replaced (`tui acp --redact`)."""
        self.elicits = False
        """Whether the editor said it fills forms (``elicitation.form``)."""
        self.conn: Connection | None = None
        self.lines: EditorLines | None = None
        """The editor's stdin and stdout, which `conn` speaks on (`tell_many` writes there)."""
        self.sessions: dict[str, EditorSession] = {}
        self._requests: dict[str, Any] = {}
        """The JSON-RPC id of each permission request sent, by question id."""

    # --- to the editor ---------------------------------------------------------------------------
    async def tell(self, session_id: str, update: Update) -> None:
        """One ``session/update`` to the editor."""
        assert self.conn is not None
        with contextlib.suppress(ConnectionError):
            await self.conn.send_notification(
                CLIENT_METHODS["session_update"], notification(session_id, update)
            )

    async def tell_many(self, notes: list[dict[str, Any]]) -> None:
        """``session/update``s (`notification`'s) to the editor in order, in one write on stdout.

        Their messages pass none of the connection's observers: `seen` looks at questions only.
        """
        if self.lines is None:  # not on stdio: one at a time, through the connection
            assert self.conn is not None
            for note in notes:
                with contextlib.suppress(ConnectionError):
                    await self.conn.send_notification(CLIENT_METHODS["session_update"], note)
            return
        method = CLIENT_METHODS["session_update"]
        with contextlib.suppress(ConnectionError):
            await self.lines.send_many([{"jsonrpc": "2.0", "method": method, "params": n} for n in notes])

    async def ask(
        self,
        session_id: str,
        question_id: str,
        tool_call: schema.ToolCallUpdate,
        options: list[schema.PermissionOption],
    ) -> schema.RequestPermissionResponse:
        """``session/request_permission``, as the editor answers it."""
        assert self.conn is not None
        request = schema.RequestPermissionRequest(
            session_id=session_id,
            tool_call=tool_call,
            options=options,
            field_meta={"tuiQuestionId": question_id},
        )
        try:
            raw = await self.conn.send_request(CLIENT_METHODS["session_request_permission"], dump(request))
        finally:
            self._requests.pop(question_id, None)
        return schema.RequestPermissionResponse.model_validate(raw)

    async def elicit(
        self, session_id: str, question_id: str, text: str, call: str
    ) -> schema.CreateElicitationResponse:
        """``elicitation/create``: a form of one text field, as the editor answers it."""
        assert self.conn is not None
        request = schema.CreateFormSessionElicitationRequest(
            mode="form",
            session_id=session_id,
            tool_call_id=call,
            message=text,
            requested_schema=schema.ElicitationSchema(
                properties={"answer": schema.ElicitationStringPropertySchema(type="string", title="Answer")},
                required=["answer"],
            ),
            field_meta={"tuiQuestionId": question_id},
        )
        try:
            raw = await self.conn.send_request(CLIENT_METHODS["elicitation_create"], dump(request))
        finally:
            self._requests.pop(question_id, None)
        answer: schema.CreateElicitationResponse = _ELICITED.validate_python(raw)
        return answer

    def seen(self, event: StreamEvent) -> None:
        """Each message on the wire: the id of each question's request (a permission, a form) is
        kept, so that it can be withdrawn."""
        message = event.message
        if event.direction is StreamDirection.OUTGOING and message.get("method") in _ASKING:
            meta = (message.get("params") or {}).get("_meta") or {}
            if "tuiQuestionId" in meta:
                self._requests[meta["tuiQuestionId"]] = message.get("id")

    async def withdraw(self, question_id: str) -> None:
        """Withdraw the request of `question_id` (another client answered it)."""
        request_id = self._requests.pop(question_id, None)
        if request_id is not None and self.conn is not None:
            with contextlib.suppress(ConnectionError):
                await self.conn.send_notification(CANCEL_REQUEST, {"requestId": request_id})

    # --- sessions --------------------------------------------------------------------------------
    async def connect(self, session_id: str) -> tuple[AttachLink, SessionWatch, Info, int]:
        """A link to the session (its worker started if none runs), a watch on it from now, its
        info, and the journal's last seq now (where a load's replay ends and the watch begins)."""
        try:
            sid = await self.access.resolve(session_id)
            await self.access.wake(sid)
            link = await self.access.link(sid, client_id=self.client_id)
        except TuiError as exc:
            raise request_error(exc) from None
        # Following a session is reading it: the journal names the editor once it acts.
        link.reads = True
        try:
            now = await link.transcript(limit=0)
            info = await link.info()
        except TuiError as exc:
            await link.close()
            raise request_error(exc) from None
        return link, SessionWatch(link, now), info, now.cursor

    async def _open(self, session_id: str, *, replay: bool) -> EditorSession:
        link, watch, info, cursor = await self.connect(session_id)
        if link.session_id in self.sessions:
            await self.sessions.pop(link.session_id).close()
        session = EditorSession(self, link, watch, info)
        self.sessions[link.session_id] = session
        session.start(until=cursor if replay else 0)
        return session

    def _session(self, session_id: str) -> EditorSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise acp.RequestError.invalid_params(
                {
                    "sessionId": session_id,
                    "detail": "no such session open here: session/load or session/resume it first",
                }
            )
        return session

    async def close(self) -> None:
        for session in list(self.sessions.values()):
            await session.close()
        self.sessions.clear()
        await self.access_close()

    async def access_close(self) -> None:
        closing = getattr(self.access, "close", None)
        if closing is not None:
            with contextlib.suppress(Exception):
                await closing()

    # --- the ACP agent ---------------------------------------------------------------------------
    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: schema.ClientCapabilities | None = None,
        **kwargs: Any,
    ) -> schema.InitializeResponse:
        forms = client_capabilities.elicitation if client_capabilities is not None else None
        self.elicits = forms is not None and forms.form is not None
        return schema.InitializeResponse(
            protocol_version=min(protocol_version, acp.PROTOCOL_VERSION),
            agent_capabilities=schema.AgentCapabilities(
                load_session=True,
                prompt_capabilities=schema.PromptCapabilities(
                    image=self.images, audio=False, embedded_context=True
                ),
                session_capabilities=schema.SessionCapabilities(
                    list=schema.SessionListCapabilities(),
                    resume=schema.SessionResumeCapabilities(),
                    close=schema.SessionCloseCapabilities(),
                ),
            ),
            agent_info=schema.Implementation(name="tui", title="tui", version=__version__),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> schema.NewSessionResponse:
        try:
            sid = await self.access.create(working_directory=cwd, agent=self.agent, model=self.model)
        except TuiError as exc:
            raise request_error(exc) from None
        session = await self._open(sid, replay=False)
        return schema.NewSessionResponse(
            session_id=sid, config_options=session.options() or None, modes=session.modes()
        )

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> schema.LoadSessionResponse:
        session = await self._open(session_id, replay=True)
        await session.live.wait()
        if session.failure is not None:
            raise request_error(session.failure)
        return schema.LoadSessionResponse(config_options=session.options() or None, modes=session.modes())

    async def resume_session(self, session_id: str, cwd: str, **kwargs: Any) -> schema.ResumeSessionResponse:
        session = await self._open(session_id, replay=False)
        return schema.ResumeSessionResponse(config_options=session.options() or None, modes=session.modes())

    async def close_session(self, session_id: str, **kwargs: Any) -> schema.CloseSessionResponse:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            await session.close()
        return schema.CloseSessionResponse()

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> schema.ListSessionsResponse:
        try:
            rows = await self.access.list_sessions()
        except TuiError as exc:
            raise request_error(exc) from None
        return schema.ListSessionsResponse(
            sessions=[
                schema.SessionInfo(
                    session_id=row.id,
                    cwd=row.folder,
                    title=row.title or None,
                    updated_at=(row.updated_at or row.created_at).isoformat(),
                )
                for row in rows
                if cwd is None or row.folder == cwd
            ]
        )

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> schema.PromptResponse:
        session = self._session(session_id)
        try:
            text, pictures = prompt_text(prompt)
        except ValueError as exc:
            raise acp.RequestError.invalid_params({"detail": str(exc)}) from None
        try:
            return await session.prompt(text, pictures)
        except TuiError as exc:
            raise request_error(exc) from None

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            with contextlib.suppress(TuiError):
                await session.cancel()

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> schema.SetSessionModeResponse:
        try:
            await self._session(session_id).set_option(MODE, mode_id)
        except TuiError as exc:
            raise request_error(exc) from None
        return schema.SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> schema.SetSessionConfigOptionResponse:
        session = self._session(session_id)
        try:
            await session.set_option(config_id, str(value))
        except TuiError as exc:
            raise request_error(exc) from None
        return schema.SetSessionConfigOptionResponse(config_options=session.options())


async def serve(
    access: SessionAccess,
    *,
    agent: str | None,
    model: str | None,
    client_id: str,
    images: bool = False,
    redact: bool = False,
) -> None:
    """Be the ACP agent on stdin/stdout until the editor closes them (`images`: whether the agent
    behind the sessions takes images; `redact`: secrets replaced in what the editor is told)."""
    from acp.agent.router import build_agent_router
    from acp.stdio import stdio_streams

    face = EditorFace(access, agent=agent, model=model, client_id=client_id, images=images, redact=redact)
    reader, writer = await stdio_streams(limit=2**20)
    face.lines = EditorLines(reader, writer)  # every bad line answered with a JSON-RPC error
    conn = Connection(
        build_agent_router(face, use_unstable_protocol=True),  # type: ignore[arg-type]
        face.lines,
        observers=[face.seen],
        listening=False,
    )
    face.conn = conn
    try:
        await conn.main_loop()
    finally:
        await face.close()
        await conn.close()
