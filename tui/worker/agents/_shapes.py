"""What an ACP agent says, in tui's terms: its settings and models (`setting_of`,
`models_setting`), its errors (`error_said`), costs, option labels, and whether Gemini CLI trusts
the working folder (`gemini_distrusts`)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import acp
from acp import schema

from tui.protocol import AgentChoice, AgentSetting

__all__ = [
    "GEMINI_PLAIN_MODES",
    "GEMINI_UNTRUSTED",
    "MODELS_OF_SESSION",
    "AgentGone",
    "cost_text",
    "error_said",
    "gemini_distrusts",
    "keep_models",
    "models_setting",
    "setting_of",
    "text_of",
    "unique_labels",
]


GEMINI_UNTRUSTED = (
    "fails here: Gemini CLI does not trust this folder (run `gemini` in it once and trust it, "
    "or set GEMINI_CLI_TRUST_WORKSPACE=true)"
)
GEMINI_PLAIN_MODES = ("default", "plan")
"""Gemini CLI's approval modes that work in a folder it does not trust."""


def gemini_distrusts(workdir: Path, environ: Mapping[str, str]) -> bool:
    """Whether Gemini CLI refuses its privileged approval modes ("Allow for this session", Auto
    Edit, YOLO) in `workdir`: its folder trust, read as it reads it (its environment variables,
    ``security.folderTrust.enabled`` of ``~/.gemini/settings.json``, then the longest matching
    rule of ``~/.gemini/trustedFolders.json``; no rule is not trusted). False when unsure."""
    trust = environ.get("GEMINI_CLI_TRUST_WORKSPACE")
    if environ.get("GEMINI_RESTRICTED_MODE") == "true" or trust == "false":
        return True
    if trust == "true":
        return False
    home = Path(environ.get("HOME") or Path.home())

    def read(path: Path) -> Any:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            return None  # unreadable, or JSON with comments: unsure

    settings = read(home / ".gemini" / "settings.json")
    if not isinstance(settings, dict):
        return False
    folder_trust = (settings.get("security") or {}).get("folderTrust") or {}
    if isinstance(folder_trust, dict) and folder_trust.get("enabled") is False:
        return False
    rules = read(
        Path(environ.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH") or home / ".gemini" / "trustedFolders.json")
    )
    if not isinstance(rules, dict):
        return False
    where = workdir.resolve()
    longest, level = -1, None
    for path, rule in rules.items():
        base = Path(path).parent if rule == "TRUST_PARENT" else Path(path)
        with contextlib.suppress(OSError):
            base = base.resolve()
        if where.is_relative_to(base) and len(path) > longest:
            longest, level = len(path), rule
    return level not in ("TRUST_FOLDER", "TRUST_PARENT")


class AgentGone(Exception):
    """The agent process exited or broke the protocol; the message quotes its last stderr lines."""


def unique_labels(labels: Sequence[str]) -> list[str]:
    seen: dict[str, int] = {}
    unique = []
    for label in labels:
        label = label or "option"
        count = seen.get(label, 0) + 1
        seen[label] = count
        unique.append(label if count == 1 else f"{label} ({count})")
    return unique


def text_of(block: Any) -> str:
    if isinstance(block, schema.TextContentBlock):
        return block.text
    if isinstance(block, schema.ResourceContentBlock):
        return block.uri
    if isinstance(block, schema.EmbeddedResourceContentBlock):
        return getattr(block.resource, "text", "") or getattr(block.resource, "uri", "")
    return ""


def setting_of(option: Any) -> AgentSetting:
    """An ACP config option as tui keeps it: a select's values (groups flattened), or on/off."""
    category = option.category if isinstance(option.category, str) else None
    if isinstance(option, schema.SessionConfigOptionSelect):
        choices: list[AgentChoice] = []
        for item in option.options:
            for choice in item.options if isinstance(item, schema.SessionConfigSelectGroup) else [item]:
                choices.append(
                    AgentChoice(value=choice.value, name=choice.name, description=choice.description or "")
                )
        return AgentSetting(
            id=option.id, name=option.name, category=category, current=option.current_value, choices=choices
        )
    current = "on" if getattr(option, "current_value", False) else "off"
    return AgentSetting(
        id=option.id,
        name=option.name,
        category=category,
        current=current,
        choices=[AgentChoice(value="on"), AgentChoice(value="off")],
    )


MODELS_OF_SESSION = "models"
"""The id tui gives an agent's model when it says it in the session's ``models`` (an unstable part
of the protocol Gemini CLI sends) rather than as a config option: shown, not switched."""


def keep_models() -> None:
    """Keep what ``session/new`` and ``session/load`` answer beyond this package's schema: Gemini
    CLI says its model in ``models`` (``currentModelId``, ``availableModels``)."""
    for answer in (schema.NewSessionResponse, schema.LoadSessionResponse):
        if answer.model_config.get("extra") != "allow":
            answer.model_config["extra"] = "allow"
            answer.model_rebuild(force=True)


def models_setting(answer: Any) -> AgentSetting | None:
    """The model a session's answer says in ``models``, as a setting; None when it says none."""
    models = (getattr(answer, "model_extra", None) or {}).get("models")
    if not isinstance(models, dict) or not isinstance(models.get("currentModelId"), str):
        return None
    choices = [
        AgentChoice(
            value=str(m.get("modelId", "")),
            name=str(m.get("name") or ""),
            description=str(m.get("description") or ""),
        )
        for m in models.get("availableModels") or []
        if isinstance(m, dict) and m.get("modelId")
    ]
    return AgentSetting(
        id=MODELS_OF_SESSION,
        name="Model",
        category="model",
        current=models["currentModelId"],
        choices=choices,
    )


def error_said(exc: acp.RequestError) -> str:
    """An agent's error as one line: its message, and the details it gave (``Internal error`` alone
    says nothing)."""
    data = exc.data
    if isinstance(data, dict):
        data = data.get("details") or data.get("message") or data.get("reason") or ""
    detail = " ".join(str(data).split()) if data else ""
    return f"{exc}: {detail}" if detail and detail != str(exc) else str(exc)


def cost_text(cost: schema.Cost) -> str:
    """``$0.42``, or ``0.42 EUR`` for a currency without a sign here."""
    signs = {"USD": "$", "EUR": "€", "GBP": "£"}
    sign = signs.get(cost.currency.upper())
    return f"{sign}{cost.amount:.2f}" if sign else f"{cost.amount:.2f} {cost.currency}"
