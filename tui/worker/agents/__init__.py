"""The kinds of agent a session can run: a registry, one module a kind.

A kind is a module of this package named as the kind (``python.py`` is ``python``) whose agent
class registers itself with ``@register("python")``. The names are the modules found here, read
without importing any of them, so `check_agent` is cheap enough for ``tui`` commands and the web
bridge; `agent_class` imports a kind's module only when a worker needs it.

Adding a kind is adding one module; nothing else changes.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from tui.errors import InvalidRequest

if TYPE_CHECKING:
    from tui.config import Config
    from tui.worker.agent import Agent, AgentContext

__all__ = ["agent_class", "check_agent", "kind_of", "kinds", "make_agent", "register"]

A = TypeVar("A", bound="type[Agent]")

_registered: dict[str, type[Agent]] = {}

_NOT_NAMED = frozenset({"acp"})
"""Kinds a session does not name: an ACP session names its ``[agents]`` entry."""


def _modules() -> set[str]:
    return {m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")}


def kinds() -> list[str]:
    """The kinds of agent this version runs, sorted: the modules of this package (and any kind
    registered from elsewhere, as a test's fake agent is)."""
    return sorted(_modules() | set(_registered))


def register(name: str) -> Callable[[A], A]:
    """Class decorator: `name`'s agent class (a module of this package registers its own name)."""

    def add(cls: A) -> A:
        _registered[name] = cls
        return cls

    return add


def kind_of(name: str, config: Config) -> str:
    """The kind of agent a session of agent `name` runs: the kind itself, or ``acp`` for a
    configured ``[agents]`` entry (a kind's name wins over an entry of the same name)."""
    if name not in kinds() and name in config.agents:
        return "acp"
    return name


def check_agent(name: str, config: Config, model: str | None = None, *, command: bool = True) -> str | None:
    """Refuse, before anything is made, a session of an agent this version cannot run.

    Imports no agent: it runs in ``tui`` commands and in the web bridge.

    Args:
        name: the agent the session would run (``--agent``, or the config's ``default_agent``):
            a kind, or the name of an ``[agents]`` entry of the config (an ACP agent).
        config: the user's settings (`tui.config.load_config`), for the ``[agents]`` and
            ``[models]`` it names.
        model: the model a ``model`` session would use (``--model``): a ``[models]`` profile or
            ``provider:model``; the config's ``default_model`` when None.
        command: also refuse an ``[agents]`` entry whose command cannot be found on ``PATH``
            (the user's, or the entry's own ``env.PATH``).

    Returns:
        The model the session records (None for agents without one).

    Raises:
        InvalidRequest: ``invalid_request``, a sentence naming what cannot run and what to type
            instead (the kinds, the configured ``[agents]``, the command, the model profile or
            the variable holding its key).
    """
    where = f" ({config.path})" if config.path is not None else ""
    if kind_of(name, config) == "acp" and name != "acp":
        profile = config.agents[name]
        program = profile.command[0]
        search = profile.env.get("PATH", os.environ.get("PATH", os.defpath))
        if command and shutil.which(program, path=search) is None and profile.install:
            raise InvalidRequest(
                f"the agent {name!r} is not installed ({program!r} is not on PATH): install it with "
                f"`{profile.install}`, or set the command of [agents.{name}] in your config.toml{where}"
            )
        if command and shutil.which(program, path=search) is None:
            raise InvalidRequest(
                f"the command {program!r} of [agents.{name}] in your config.toml{where} cannot be found "
                "on PATH: install the agent, or set its command to the program's full path"
            )
        return None
    if name == "model":
        return _check_model(model or config.default_model, config)
    runnable = [k for k in kinds() if k not in _NOT_NAMED]
    if name in runnable:
        return model
    builtin = ", ".join(sorted(n for n, p in config.agents.items() if p.builtin))
    configured = ", ".join(sorted(n for n, p in config.agents.items() if not p.builtin))
    entries = f"; the ACP agents built in are {builtin}" if builtin else ""
    entries += f"; the [agents] of your config.toml{where} are {configured}" if configured else ""
    if name == "acp":
        why = f"an ACP session runs an agent named by an [agents.NAME] entry of your config.toml{entries}"
    else:
        why = f"there is no agent {name!r}{entries}"
    raise InvalidRequest(
        f"{why}. This version runs {', '.join(runnable)} sessions and ACP agents (built in, or "
        "[agents] entries): ask for agent python, model (with --model NAME), an ACP agent, or name no agent"
    )


def _check_model(model: str | None, config: Config) -> str:
    from tui.errors import InvalidModel

    if model is None:
        where = f" in {config.path}" if config.path is not None else " in config.toml"
        raise InvalidRequest(
            f"a model session needs a model: --model NAME (a [models] profile or PROVIDER:MODEL, "
            f"e.g. anthropic:claude-sonnet-4-5), or default_model{where}"
        )
    try:
        profile = config.model_profile(model)
    except InvalidModel as exc:
        raise InvalidRequest(exc.detail) from None
    missing = profile.missing_key(model)
    if missing is not None:
        raise InvalidRequest(missing)
    return model


def agent_class(name: str) -> type[Agent]:
    """The agent class of the kind `name`, its module imported now.

    Raises:
        InvalidRequest: no such kind (see `check_agent`).
    """
    if name not in _registered:
        if name not in _modules():
            from tui.config import Config

            check_agent(name, Config(), command=False)
        importlib.import_module(f"{__name__}.{name}")
        if name not in _registered:
            raise RuntimeError(f"{__name__}.{name} registers no agent class (@register({name!r}))")
    return _registered[name]


def make_agent(context: AgentContext) -> Agent:
    """The agent the session's record names, made from `context`.

    Raises:
        InvalidRequest: the record names an agent this version does not run.
    """
    # A model session whose profile or key went missing since it was made still starts: its
    # turns fail with the line that says what to fix, and `/model` can switch it. An ACP
    # session whose command went missing starts too: its turns fail saying so.
    kind = kind_of(context.record.agent, context.config)
    if kind not in kinds():
        check_agent(context.record.agent, context.config, command=False)
    return agent_class(kind).from_context(context)
