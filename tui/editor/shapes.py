"""What a tui session says, in ACP's terms: the events of its journal as ``session/update``s, its
question as permission options, its turn's ending as a stop reason and usage, its agent's modes and
settings as config options, and an editor's prompt as a tui prompt.
"""

from __future__ import annotations

import base64
import mimetypes
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import acp
import acp.helpers
from acp import schema

from tui.protocol import (
    AgentInfo,
    Event,
    Info,
    ModelChanged,
    Note,
    Plan,
    Question,
    QuestionResolved,
    StopReason,
    TextChunk,
    Thinking,
    ToolEnded,
    ToolOutput,
    ToolStarted,
    ToolUpdated,
    TurnEnded,
    TurnStarted,
    decode_event,
)
from tui.protocol.events import By, Diff
from tui.protocol.ids import client_label
from tui.protocol.state import note_line
from tui.redact import StreamRedactor, frame_data

__all__ = [
    "OUTPUT_KEPT",
    "Picture",
    "Shaper",
    "Update",
    "config_options",
    "dump",
    "permission_options",
    "prompt_text",
    "stop_reason",
    "usage_of",
    "who",
]

Update = Any
"""One of ACP's session updates (`acp.schema.SessionUpdate`'s members)."""

OUTPUT_KEPT = 16 * 1024
"""The most characters of a tool call's output sent again with each of its updates (ACP's content
replaces the call's whole content, so a long output is cut to its end)."""

_KINDS: tuple[str, ...] = get_args(schema.ToolKind)
_PERMISSION_KINDS: tuple[str, ...] = get_args(schema.PermissionOptionKind)


def who(by: By, client_id: str | None) -> str:
    """Who did something, for people: ``ana (terminal)``, ``the owner (tui send)``."""
    name = by.name or ("the owner" if by.kind == "owner" else "a participant")
    label = client_label(client_id)
    return f"{name} ({label})" if label else name


@dataclass
class _Call:
    output: str = ""
    diffs: list[Diff] = field(default_factory=list)


@dataclass
class Shaper:
    """The updates of one session's events, in order.

    Args:
        own_requests: the request ids of this editor's turns (their prompts are not said back).
        own_turns: the ids of this editor's turns (their failure is the prompt's answer).
    """

    own_requests: set[str] = field(default_factory=set)
    own_turns: set[str] = field(default_factory=set)
    calls: dict[str, _Call] = field(default_factory=dict)
    redact: bool = False
    """Each event's secrets are replaced first (`tui acp --redact`, `tui.redact`), read as a
    stream is: a piece of output that ends mid-line is held (`held`) until the next piece of the
    same output, so a secret split across two pieces is still caught; `flush` lets it go."""
    stream: StreamRedactor = field(default_factory=StreamRedactor, repr=False)

    @property
    def held(self) -> bool:
        """Whether a piece of output is held back for the rest of its line (`redact` only)."""
        return self.stream.held is not None

    def updates(self, event: Event) -> list[Update]:
        """What the editor is told of `event` (nothing for most events outside a turn), with
        what a held piece of output let go, in order (`redact`)."""
        if not self.redact:
            return self._updates(event)
        frame = b"id: %d\nevent: %s\ndata: %s" % (
            event.seq,
            event.type.encode(),
            event.model_dump_json().encode(),
        )
        return self._told(self.stream.feed(frame))

    def flush(self) -> list[Update]:
        """The updates of the piece of output held back, if any (`HOLD` seconds passed)."""
        return self._told(self.stream.flush())

    def _told(self, frames: list[bytes]) -> list[Update]:
        return [u for frame in frames for u in self._updates(decode_event(frame_data(frame)))]

    def _updates(self, event: Event) -> list[Update]:
        if isinstance(event, TurnStarted):
            self.calls.clear()
            text = self._prompt(event)
            return [] if text is None else [acp.update_user_message_text(text)]
        if isinstance(event, TextChunk):
            return [acp.update_agent_message_text(event.text)]
        if isinstance(event, Thinking):
            return [acp.update_agent_thought_text(event.text)]
        if isinstance(event, Plan):
            return [acp.update_plan([acp.plan_entry(e.content, status=e.status) for e in event.entries])]
        if isinstance(event, (ToolStarted, ToolUpdated, ToolOutput, ToolEnded)):
            return [self._tool(event)]
        if isinstance(event, TurnEnded) and event.outcome == "failed" and event.turn_id not in self.own_turns:
            return [
                acp.update_agent_message_text(f"\n(the turn failed: {event.error or 'no reason given'})\n")
            ]
        if isinstance(event, Note):
            said = note_line(event) if event.by is not None else event.text
            return [acp.update_agent_message_text(f"\n({said})\n")]
        return []

    def dumped(self, event: Event) -> list[dict[str, Any]]:
        """What `updates` gives for `event`, dumped as the editor reads it (`dump`): a prompt, a
        reply's text and a thought are built straight as the dicts their models dump (the most
        of a load's replay), the rest dumped from their models."""
        if not self.redact:
            if isinstance(event, TextChunk):
                return [_chunk("agent_message_chunk", event.text)]
            if isinstance(event, Thinking):
                return [_chunk("agent_thought_chunk", event.text)]
            if isinstance(event, TurnStarted):
                self.calls.clear()
                text = self._prompt(event)
                return [] if text is None else [_chunk("user_message_chunk", text)]
        return [dump(update) for update in self.updates(event)]

    def _prompt(self, event: TurnStarted) -> str | None:
        """A turn's prompt as the editor is told it (None: this editor's own, not said back)."""
        if event.request_id is not None and event.request_id in self.own_requests:
            return None
        if event.origin == "user":
            return f"[{who(event.by, event.client_id)}] {event.prompt}"
        return event.prompt

    def _tool(self, event: ToolStarted | ToolUpdated | ToolOutput | ToolEnded) -> Update:
        call = self.calls.setdefault(event.call_id, _Call())
        if isinstance(event, ToolStarted):
            return acp.start_tool_call(
                event.call_id,
                event.title or event.name,
                kind=_kind(event.kind),
                status="in_progress",
                raw_input=event.args or None,
                locations=[schema.ToolCallLocation(path=p) for p in event.locations] or None,
            )
        if isinstance(event, ToolUpdated):
            if event.output is not None:
                call.output = event.output[-OUTPUT_KEPT:]
            if event.diffs is not None:
                call.diffs = list(event.diffs)
            return acp.update_tool_call(
                event.call_id,
                title=event.title,
                kind=_kind(event.kind) if event.kind is not None else None,
                raw_input=event.args,
                locations=[schema.ToolCallLocation(path=p) for p in event.locations]
                if event.locations is not None
                else None,
                content=self._content(call) if event.output is not None or event.diffs is not None else None,
            )
        if isinstance(event, ToolOutput):
            if event.diff is not None:
                call.diffs.append(event.diff)
            call.output = (call.output + event.text)[-OUTPUT_KEPT:]
            return acp.update_tool_call(event.call_id, content=self._content(call))
        status: Literal["completed", "failed", "in_progress"] = (
            "completed"
            if event.status == "completed"
            else "in_progress"
            if event.status == "still_working"
            else "failed"
        )
        raw: dict[str, Any] = {}
        if event.value is not None:
            raw["value"] = event.value
        if event.error:
            raw["error"] = event.error
        return acp.update_tool_call(event.call_id, status=status, raw_output=raw or None)

    @staticmethod
    def _content(call: _Call) -> list[Any]:
        content: list[Any] = [acp.tool_diff_content(d.path, d.new, d.old) for d in call.diffs]
        if call.output:
            content.append(acp.tool_content(acp.text_block(call.output)))
        return content


def dump(model: Any) -> Any:
    """A model of the package as the editor reads it (JSON, by alias, no None)."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _chunk(kind: str, text: str) -> dict[str, Any]:
    """A text chunk update (a prompt, a reply, a thought) as `dump` gives it, keys in its order."""
    return {"content": {"text": text, "type": "text"}, "sessionUpdate": kind}


def _kind(kind: str | None) -> Any:
    return kind if kind in _KINDS else "other"


def permission_options(question: Question) -> list[schema.PermissionOption]:
    """The question's options as permission options (option id: the option's number, from 1).

    A hosted ACP agent's own options carry their kind in their description (``allow once``); other
    options are told apart by their words (``no``, ``reject``, ``deny`` … reject; else allow).
    """
    options = []
    for i, option in enumerate(question.options, 1):
        said = option.description.split(" — ")[0].replace(" ", "_")
        if said in _PERMISSION_KINDS:
            kind = said
        else:
            first = option.label.strip().lower().split(" ")[0] if option.label.strip() else ""
            kind = (
                "reject_once"
                if first in ("no", "reject", "deny", "cancel", "stop", "abort")
                else "allow_once"
            )
        options.append(schema.PermissionOption(option_id=str(i), name=option.label, kind=kind))  # type: ignore[arg-type]
    return options


def resolved_text(event: QuestionResolved) -> str:
    """What another client's resolution of a question said, naming who it was."""
    by = who(event.by, event.client_id)
    if event.how == "answered":
        said = ", ".join([*event.selected, *([repr(event.freeform)] if event.freeform is not None else [])])
        return f"answered by {by}: {said}"
    if event.how == "dismissed":
        return f"dismissed by {by}"
    return "the question was withdrawn"


def stop_reason(outcome: str, stopped: StopReason | None = None) -> schema.StopReason:
    """An ended turn's outcome, and why its agent stopped when it said, as ACP's stop reason (a
    failed turn is an error, not a reason). A turn stopped at the session's budget is ACP's
    nearest: a limit of the turn reached (``max_turn_requests``)."""
    if outcome == "interrupted":
        return "cancelled"
    if stopped == "budget":
        return "max_turn_requests"
    return stopped or "end_turn"


def usage_of(usage: dict[str, int]) -> schema.Usage | None:
    """A turn's tokens (``input``, ``output``, ``cached``) as ACP's usage; None when it said none."""
    if not usage:
        return None
    tokens_in, tokens_out = usage.get("input", 0), usage.get("output", 0)
    return schema.Usage(
        total_tokens=tokens_in + tokens_out,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        cached_read_tokens=usage.get("cached") or None,
    )


MODE = "mode"
"""The config option of an agent's modes."""
MODEL = "model"
"""The config option of a model session's models."""


def config_options(
    info: Info | AgentInfo, model: str | None = None, models: list[str] | None = None
) -> list[Any]:
    """The session's modes, its agent's settings and its models, as ACP config options."""
    options: list[Any] = []
    if info.modes:
        options.append(
            schema.SessionConfigOptionSelect(
                type="select",
                id=MODE,
                name="Mode",
                category="mode",
                current_value=info.mode or info.modes[0].value,
                options=[
                    schema.SessionConfigSelectOption(
                        value=m.value, name=m.name or m.value, description=m.description or None
                    )
                    for m in info.modes
                ],
            )
        )
    for setting in info.settings:
        if not setting.choices:
            continue
        category = (
            setting.category
            if setting.category in ("mode", "model", "model_config", "thought_level")
            else None
        )
        options.append(
            schema.SessionConfigOptionSelect(
                type="select",
                id=setting.id,
                name=setting.name or setting.id,
                category=category,  # type: ignore[arg-type]
                current_value=setting.current or setting.choices[0].value,
                options=[
                    schema.SessionConfigSelectOption(
                        value=c.value, name=c.name or c.value, description=c.description or None
                    )
                    for c in setting.choices
                ],
            )
        )
    if models and not any(o.id == MODEL for o in options):
        current = model if model in models else models[0]
        options.append(
            schema.SessionConfigOptionSelect(
                type="select",
                id=MODEL,
                name="Model",
                category="model",
                current_value=current,
                options=[schema.SessionConfigSelectOption(value=m, name=m) for m in models],
            )
        )
    return options


def updates_of_settings(event: AgentInfo | ModelChanged, info: Info) -> tuple[Info, list[Update]]:
    """The session's `info` as `event` changes it, and the updates that say so: its agent's
    commands, its mode (for editors that read modes) and its config options."""
    updates: list[Update] = []
    if isinstance(event, AgentInfo):
        if event.commands != info.commands:
            commands = [
                schema.AvailableCommand(name=c.name, description=c.description) for c in event.commands
            ]
            updates.append(acp.helpers.update_available_commands(commands))
        if event.mode is not None:  # said each time: the editor may have asked for it meanwhile
            updates.append(acp.helpers.update_current_mode(event.mode))
        info = info.model_copy(
            update={
                "commands": event.commands,
                "mode": event.mode,
                "modes": event.modes,
                "settings": event.settings,
            }
        )
    else:
        info = info.model_copy(update={"model": event.model})
    options = config_options(info, info.model, info.models)
    if options:
        updates.append(
            schema.ConfigOptionUpdate(session_update="config_option_update", config_options=options)
        )
    return info, updates


@dataclass(frozen=True)
class Picture:
    """An image of an editor's prompt: its bytes and a file name its type gives."""

    data: bytes
    name: str


def prompt_text(blocks: list[Any]) -> tuple[str, list[Picture]]:
    """An editor's prompt as one tui prompt: its text, each resource it embeds as a fenced block
    under its address, each one it links to as its address; and its images.

    Raises:
        ValueError: a block tui cannot take (a sound, an image that is not base64), naming it.
    """
    parts: list[str] = []
    pictures: list[Picture] = []
    for block in blocks:
        if isinstance(block, schema.TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, schema.ResourceContentBlock):
            parts.append(block.uri)
        elif isinstance(block, schema.EmbeddedResourceContentBlock):
            resource = block.resource
            if isinstance(resource, schema.TextResourceContents):
                parts.append(f"{resource.uri}:\n```\n{resource.text}\n```")
            else:
                parts.append(resource.uri)
        elif isinstance(block, schema.ImageContentBlock):
            try:
                data = base64.b64decode(block.data, validate=True)
            except ValueError:
                raise ValueError("an image of the prompt is not base64 data") from None
            suffix = mimetypes.guess_extension(block.mime_type) or ".png"
            pictures.append(Picture(data, f"image-{len(pictures) + 1}{suffix}"))
        else:
            raise ValueError(
                f"a {getattr(block, 'type', 'content')} block is not taken here: send text or images"
            )
    return "\n".join(parts), pictures
