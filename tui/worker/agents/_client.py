"""The ACP client side of the `acp` agent kind (`tui.worker.agents.acp`): what the coding agent
calls (``acp.interfaces.Client``), each call handed to the `AcpAgent`, and the context sources'
values as the embedded resources a prompt carries."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import acp
from acp import schema

from tui.worker.agent import TurnIO, source_header, sources_of

if TYPE_CHECKING:
    from tui.worker.agents.acp import AcpAgent

__all__: list[str] = []


class _Client:
    """The ACP client side the agent calls (``acp.interfaces.Client``), handing each call to the agent."""

    def __init__(self, agent: AcpAgent) -> None:
        self.agent = agent

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.agent.update(update)

    async def request_permission(
        self,
        session_id: str,
        tool_call: schema.ToolCallUpdate,
        options: list[schema.PermissionOption],
        **kwargs: Any,
    ) -> schema.RequestPermissionResponse:
        return await self.agent.permission(tool_call, options)

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> schema.ReadTextFileResponse:
        return schema.ReadTextFileResponse(content=self.agent.files.read(path, line, limit))

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> schema.WriteTextFileResponse:
        self.agent.files.write(path, content)
        return schema.WriteTextFileResponse()


def _sources(turn: TurnIO) -> list[schema.EmbeddedResourceContentBlock]:
    """The context sources' values, an embedded resource each (``tui-context:NAME``)."""
    return [
        acp.resource_block(
            acp.embedded_text_resource(
                f"tui-context:{entry.name}", f"{source_header(entry)}\n{entry.value}", mime_type="text/plain"
            )
        )
        for entry in sources_of(turn)
    ]
