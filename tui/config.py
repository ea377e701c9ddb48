"""Where tui keeps its files, and the user's settings (``config.toml`` in the config dir).

The settings (agents.md, "Configuration") are read by `load_config`: a missing file is an empty
configuration, a broken one a `TuiError` naming the file and the line, never a traceback.
"""

from __future__ import annotations

import contextlib
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tui.errors import InvalidModel, TuiError
from tui.places import config_dir, config_path, state_dir

__all__ = [
    "BUILTIN_AGENTS",
    "PROVIDERS",
    "AgentProfile",
    "BudgetSettings",
    "CheckpointSettings",
    "ChildrenSettings",
    "ClusterSettings",
    "Config",
    "ModelProfile",
    "NotifySettings",
    "SandboxSettings",
    "WorkerSettings",
    "config_dir",
    "config_path",
    "default_token_file",
    "load_config",
    "make_private_dir",
    "parse_duration",
    "remember_token_file",
    "save_setting",
    "state_dir",
    "token_files",
    "tokens_dir",
]

PROVIDERS: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "google": "GEMINI_API_KEY",
}
"""The providers a model session speaks to, each with the variable its key is read from by default."""


# --- token files ---------------------------------------------------------------------------------
# Token files hold bearer tokens for `tui web` (the owner's, a guest's) and for other machines'
# bridges (`tui remote add`). They belong in the config dir, which programs and agents of a
# session cannot reach; a token file in a working folder (the home folder, say) could be read by
# every program run there. `token_files` is the one list of every token file tui knows of, for
# whatever must keep them out of a session's reach.

TOKENS = "tokens"
"""The folder of the config dir where token files go by default (0700, each file 0600)."""
TOKEN_FILES_RECORD = "token-files"
"""A file of the state dir: the token files tui was given or wrote outside `tokens_dir`, one
absolute path a line."""
REMOTES_FILE = "remotes.toml"
"""A file of the state dir: other machines' bridges, each with the path of its token file."""


def tokens_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """``tokens/`` in the config dir (see `config_dir`): where token files go. Nothing is made."""
    return config_dir(override) / TOKENS


def default_token_file(name: str, override: str | os.PathLike[str] | None = None) -> Path:
    """The token file called `name` in `tokens_dir` (e.g. ``web-owner``, ``lab``)."""
    return tokens_dir(override) / name


def make_private_dir(path: Path) -> None:
    """Make `path` and every missing folder above it with mode 0700 (only the owner may enter)."""
    missing: list[Path] = []
    at = path
    while not at.exists() and at != at.parent:
        missing.append(at)
        at = at.parent
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)


def remember_token_file(path: str | os.PathLike[str], state: str | os.PathLike[str] | None = None) -> None:
    """Add `path` to the token files tui knows of (`token_files`); one inside `tokens_dir` needs no
    record."""
    where = Path(path).expanduser().resolve()
    if where.is_relative_to(tokens_dir()):
        return
    record = state_dir(state) / TOKEN_FILES_RECORD
    try:
        known = record.read_text().splitlines()
    except FileNotFoundError:
        known = []
    if str(where) in known:
        return
    with record.open("a") as f:
        f.write(f"{where}\n")
    record.chmod(0o600)


def token_files(state: str | os.PathLike[str] | None = None) -> list[Path]:
    """Every token file tui knows of, each once (absolute paths; one may not exist yet): the
    files of `tokens_dir`, those `tui web --token-file` and `tui share --token-file` were given
    (recorded by `remember_token_file`) and each remote's (``remotes.toml`` in the state dir)."""
    found: list[Path] = []
    folder = tokens_dir()
    if folder.is_dir():
        found += sorted(p for p in folder.iterdir() if p.is_file())
    root = state_dir(state)
    with contextlib.suppress(OSError):
        found += [Path(line) for line in (root / TOKEN_FILES_RECORD).read_text().splitlines() if line.strip()]
    try:
        remotes = tomllib.loads((root / REMOTES_FILE).read_text()).get("remotes", {})
    except (OSError, tomllib.TOMLDecodeError):
        remotes = {}
    for entry in remotes.values() if isinstance(remotes, dict) else ():
        if isinstance(entry, dict) and isinstance(entry.get("token_file"), str) and entry["token_file"]:
            found.append(Path(entry["token_file"]).expanduser())
    unique: dict[Path, None] = {}
    for p in found:
        unique.setdefault(p if p.is_absolute() else p.resolve(), None)
    return list(unique)


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelProfile(_Settings):
    """A ``[models.NAME]`` table: one language model and how to reach it."""

    provider: str
    """``openai`` (any OpenAI-compatible server), ``anthropic``, ``google`` …"""
    model: str
    """The provider's name of the model."""
    base_url: str | None = None
    """The server's URL (a local OpenAI-compatible server); the provider's own when unset."""
    api_key_env: str | None = None
    """The environment variable holding the key; never the key itself."""
    context_window: int | None = Field(default=None, gt=0)
    """Tokens the model takes in; known models have a default."""
    api: Literal["chat", "responses"] | None = None
    """OpenAI only: ``responses`` opts into the Responses API (Chat Completions otherwise)."""
    answers_children: Literal["never", "options", "always"] = "never"
    """Whether a session of this model answers its children's questions itself: ``options``
    those with options (it picks one), ``always`` free-text ones too."""
    price_input: float | None = Field(default=None, ge=0)
    """USD per million input tokens, for a model the price table (genai-prices) does not know."""
    price_output: float | None = Field(default=None, ge=0)
    """USD per million output tokens."""

    @property
    def key_variable(self) -> str | None:
        """The environment variable the key is read from; None when none is needed.

        An OpenAI-compatible server of one's own (a ``base_url``, no ``api_key_env``) needs no key.
        """
        if self.api_key_env is not None:
            return self.api_key_env
        if self.provider == "openai" and self.base_url is not None:
            return None
        return PROVIDERS.get(self.provider)

    def api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The key from `environ` (the process's environment by default); None when unset or not needed."""
        variable = self.key_variable
        if variable is None:
            return None
        return (os.environ if environ is None else environ).get(variable) or None

    def missing_key(self, name: str, environ: Mapping[str, str] | None = None) -> str | None:
        """None when the model can be called, else a sentence saying which variable to set."""
        variable = self.key_variable
        if variable is None or self.api_key(environ) is not None:
            return None
        return (
            f"model {name!r} needs a key: set {variable} in the environment tui runs in "
            f"(or name another variable with api_key_env in its [models] profile)"
        )


class AgentProfile(_Settings):
    """An ``[agents.NAME]`` table: an external agent spoken to over ACP."""

    command: list[str] = Field(min_length=1)
    """The command that starts it, as a list of words."""
    env: dict[str, str] = {}
    """Extra environment variables for it."""
    install: str | None = None
    """The one line that installs it, said when its command is not found."""
    login: str | None = None
    """How to log in to it, said when it answers that it needs a login."""
    builtin: bool = Field(default=False, exclude=True)
    """Whether it is one of `BUILTIN_AGENTS` (possibly changed by an ``[agents]`` table)."""


BUILTIN_AGENTS: dict[str, dict[str, Any]] = {
    "claude": {
        "command": ["claude-agent-acp"],
        "install": "npm install -g @agentclientprotocol/claude-agent-acp",
        "login": "run `claude` in a terminal and type /login, or set ANTHROPIC_API_KEY",
    },
    "codex": {
        "command": ["codex-acp"],
        "install": "npm install -g @zed-industries/codex-acp",
        "login": "run `codex login` in a terminal, or set OPENAI_API_KEY",
    },
    "gemini": {
        "command": ["gemini", "--acp"],
        "install": "npm install -g @google/gemini-cli",
        "login": "run `gemini` in a terminal and sign in, or set GEMINI_API_KEY",
    },
    "opencode": {
        "command": ["opencode", "acp"],
        "install": "npm install -g opencode-ai",
        "login": "run `opencode auth login` in a terminal",
    },
}
"""The coding agents tui knows without configuration: each one's ACP command and install line. An
``[agents.NAME]`` table of the same name changes what it gives (``command``, ``env``)."""


class SandboxSettings(_Settings):
    """The ``[sandbox]`` table: what programs (and confined agents) may not reach, and how much they write."""

    hidden: list[Path] = []
    """More folders or files programs must not see (``~`` is expanded), besides tui's own."""
    read_only: list[Path] = []
    """More folders or files programs must not change, besides tui's installation and ``.git``."""
    write_limit: int | None = Field(default=None, gt=0)
    """Bytes one program may write in total; unset: Code Mode's default (``Limits.write_bytes``, 4 GiB)."""
    tui_paths_writable: bool = False
    """Leave tui's installation writable, to develop tui from inside a session (said when on)."""

    @field_validator("hidden", "read_only")
    @classmethod
    def _expand(cls, paths: list[Path]) -> list[Path]:
        return [path.expanduser() for path in paths]


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str | float, *, off: bool = False, unit: bool = False) -> float:
    """Seconds of a duration: ``30m``, ``2h``, ``1h30m``, ``90s`` or plain seconds.

    Args:
        text: the duration, or a number of seconds.
        off: ``off``, ``never`` and 0 are allowed and mean 0 (never).
        unit: a number needs its unit (the command line: ``2`` could be minutes or seconds).

    Raises:
        ValueError: not a duration, saying what to write.
    """
    if isinstance(text, int | float) and not isinstance(text, bool):
        seconds = float(text)
    else:
        t = str(text).strip().lower()
        if off and t in ("off", "never", "0"):
            return 0.0
        try:
            seconds = float(t)
        except ValueError:
            parts = _DURATION.findall(t)
            if not parts or _DURATION.sub("", t).strip():
                raise ValueError(
                    f"{text!r} is not a duration; write e.g. 30m, 2h or 1h30m (units: s, m, h, d, w)"
                ) from None
            seconds = sum(float(n) * _UNITS[u] for n, u in parts)
        else:
            if unit:
                raise ValueError(f"{text!r} has no unit; write e.g. {t}s, {t}m or {t}h (units: s m h d w)")
    if seconds < 0 or (seconds == 0 and not off):
        raise ValueError(f"{text!r} must be longer than nothing; write e.g. 30m or 2h")
    return seconds


class WorkerSettings(_Settings):
    """The ``[workers]`` table: when an idle worker lets go of its session (docs/cli.md, "Idle workers").

    A worker is idle with no turn running, no question, no queue and nobody attached. Each value
    is a duration (``30m``, ``2h``) or ``off``.
    """

    idle_timeout: float = 1800.0
    """Sessions that come back whole on the next attach (model sessions; ACP agents that load
    their session): their worker leaves after this long idle. 30 minutes by default."""
    python_idle_timeout: float = 0.0
    """Sessions whose worker holds what a restart loses (a python session's variables; an ACP
    agent that cannot load its session): off (never) by default."""

    @field_validator("idle_timeout", "python_idle_timeout", mode="before")
    @classmethod
    def _duration(cls, value: object) -> float:
        if not isinstance(value, str | int | float):
            raise ValueError("write a duration such as 30m or 2h, or off")
        return parse_duration(value, off=True)


class BudgetSettings(_Settings):
    """The ``[budget]`` table: the limits a new session starts with (docs/agents.md, "Budgets");
    ``tui budget ID`` changes a session's own. Each is unset (no limit) by default."""

    cost: float | None = Field(default=None, gt=0)
    """USD: a model's usage priced, or an ACP agent's own reported cost."""
    tokens: int | None = Field(default=None, gt=0)
    """Tokens in and out, together."""
    turns: int | None = Field(default=None, gt=0)
    """Turns started."""
    time: float | None = None
    """Wall time of its turns, together: a duration (``30m``, ``2h``)."""

    @field_validator("time", mode="before")
    @classmethod
    def _duration(cls, value: object) -> float | None:
        if value is None:
            return None
        if not isinstance(value, str | int | float):
            raise ValueError("write a duration such as 30m or 2h")
        return parse_duration(value) or None


class ChildrenSettings(_Settings):
    """The ``[children]`` table: what a session's own ``delegate`` may start (docs/agents.md,
    "Children: what they may reach").

    A child started by ``delegate`` (a python program's or a model's tool) reaches what its kind
    reaches, whatever started it: an ACP agent has your files and your network, a model spends
    your keys. So by default a delegated child is a python session (the sandbox a program has);
    an agent or a model child needs its line here. ``tui send --new --parent`` (you, on the
    command line) is not limited by `agents` and `models`; its children count in the limits.
    """

    agents: list[str] = []
    """``[agents]`` names a delegated child may run (``["claude"]``; ``["*"]``: any of them)."""
    models: bool = False
    """Whether a delegated child may be a model session (which spends the model's key)."""
    max_live: int = Field(default=4, ge=0, le=256)
    """Children of one session whose workers run at once (a finished, idle one is stopped to make
    room: its session stays, and starts again when sent a turn)."""
    max_total: int = Field(default=16, ge=0, le=1024)
    """Child sessions whose workers run at once on this machine, whoever started them."""
    max_depth: int = Field(default=3, ge=0, le=32)
    """How deep children nest: 1 lets a session start children, 2 lets those start their own …"""

    def allows_agent(self, name: str) -> bool:
        """Whether a delegated child may run the ``[agents]`` entry `name`."""
        return "*" in self.agents or name in self.agents


class NotifySettings(_Settings):
    """The ``[notify]`` table: who is told when a session needs someone (docs/cli.md, "Notifications").

    The session's worker tells a `webhook` and runs a `command` (either or both), so a session
    no one is attached to is heard of; the app rings the terminal it runs in (`terminal`).
    """

    on: list[Literal["question", "turn_failed", "turn_ended", "worker_died", "budget"]] = [
        "question",
        "turn_failed",
        "budget",
    ]
    """What is told: a question waiting `after` seconds, a failed turn, every ended turn, a
    worker found dead by the next one."""
    after: float = 30.0
    """Seconds a question waits unanswered before anyone is told (0: at once); a duration."""
    webhook: str | None = None
    """An ``http(s)://`` URL the worker POSTs to. A secret: never written to a journal or a log."""
    format: Literal["json", "text", "slack", "discord"] = "json"
    """The webhook's body: ``json`` (every field), ``text`` (plain text, e.g. ntfy), ``slack``
    (``{"text": …}``) or ``discord`` (``{"content": …}``)."""
    headers: dict[str, str] = {}
    """Headers sent with the webhook (secrets too: they are never logged)."""
    headers_env: dict[str, str] = {}
    """Headers whose value is read from an environment variable of the worker: header → variable."""
    command: list[str] = []
    """A command run for each notification: argv with ``{title}``, ``{body}``, ``{event}``,
    ``{session_id}``, ``{short_id}``, ``{question}``, ``{answer}``, ``{link}``; the same in
    ``TUI_NOTIFY_*`` variables."""
    timeout: float = Field(default=10.0, gt=0)
    """Seconds one try of the webhook or the command may take."""
    retries: int = Field(default=2, ge=0, le=10)
    """Tries after a failed one (1 s, 2 s, 4 s … apart)."""
    terminal: Literal["auto", "osc9", "osc99", "osc777", "bell", "off"] = "auto"
    """The app's desktop notification when its terminal is not in front: ``auto`` (OSC 9, OSC 99
    or OSC 777 where the terminal is known to show them, else the bell), one of those, or
    ``off``; ``true``/``false`` read as ``auto``/``off``."""

    @field_validator("after", mode="before")
    @classmethod
    def _after(cls, value: object) -> float:
        if (
            not isinstance(value, str | int | float)
            or isinstance(value, bool)
            or str(value).strip().lower() in ("off", "never")
        ):
            raise ValueError("write the seconds a question waits before anyone is told (30, 2m; 0: at once)")
        return parse_duration(value, off=True)

    @field_validator("webhook")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"https?://[^/\s]+", value):
            raise ValueError("the webhook must be an http:// or https:// URL")
        return value

    @field_validator("terminal", mode="before")
    @classmethod
    def _terminal(cls, value: object) -> object:
        if isinstance(value, bool):
            return "auto" if value else "off"
        return value

    @property
    def anywhere(self) -> bool:
        """Whether the worker tells anyone (a webhook or a command is set, and something is on)."""
        return bool(self.on) and (self.webhook is not None or bool(self.command))


class CheckpointSettings(_Settings):
    """The ``[checkpoints]`` table: the checkpoints of a session's folder at each turn's start and
    end, which ``tui diff``, ``tui rewind`` and ``tui fork`` read (docs/files.md)."""

    enabled: bool = True
    """Keep checkpoints (off: no session keeps any, and rewinding is refused)."""
    max_files: int = Field(default=20_000, ge=1)
    """A folder with more files than this (those not ignored) gets none: a session started in a
    home folder would spend long on each checkpoint. Its first screen says so."""
    max_file_size: int = Field(default=10 * 1024 * 1024, ge=0)
    """A file larger than this many bytes is left out of checkpoints (each says what it skipped)."""
    ignore: list[str] = []
    """More paths to leave out, as .gitignore patterns (``data/``, ``*.sqlite``), beside the
    folder's own ignore files and the defaults (``.venv/``, ``node_modules/``, caches)."""


class ClusterSettings(_Settings):
    """The ``[cluster]`` table: where sessions' workers run (docs/scale.md)."""

    engine: Literal["local", "ray"] = "local"
    """``local``: each worker a process of this machine. ``ray``: a Ray cluster's, each worker
    run by a detached actor on a node its scheduler picks (Ray is the optional dependency
    ``pip install 'tui[cluster]'``)."""
    address: str | None = None
    """The cluster to join (Ray's ``HOST:PORT``); None: the engine's own default."""
    resources: dict[str, float] = {}
    """Ray resources each session's actor asks for (``{ sessions = 0.01 }``): only nodes that
    have them run sessions. None asked: any node, spread."""


class Config(_Settings):
    """The user's settings; every field has a default, so an empty file is a whole configuration."""

    default_agent: str = "python"
    """What ``tui`` with no flags starts: ``python``, ``model`` or an ``[agents]`` name."""
    default_model: str | None = None
    """The model profile a model session uses when none is named."""
    models: dict[str, ModelProfile] = {}
    agents: dict[str, AgentProfile] = Field(default_factory=dict, validate_default=True)
    """The ``[agents]`` tables over `BUILTIN_AGENTS`."""
    sandbox: SandboxSettings = SandboxSettings()
    workers: WorkerSettings = WorkerSettings()
    notify: NotifySettings = NotifySettings()
    children: ChildrenSettings = ChildrenSettings()
    checkpoints: CheckpointSettings = CheckpointSettings()
    budget: BudgetSettings = BudgetSettings()
    cluster: ClusterSettings = ClusterSettings()
    theme: str | None = None
    """The app's colour theme (a Textual theme name), as last chosen in the command palette."""
    path: Path | None = Field(default=None, exclude=True)
    """The file it was read from (None when no file was there)."""

    @field_validator("agents", mode="before")
    @classmethod
    def _with_builtins(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        merged: dict[str, Any] = {name: {**entry, "builtin": True} for name, entry in BUILTIN_AGENTS.items()}
        if os.geteuid() == 0:
            # Claude Code refuses root unless told it runs in a sandbox, which tui's agent sandbox is.
            merged["claude"]["env"] = {"IS_SANDBOX": "1"}
        for name, entry in value.items():
            if isinstance(entry, AgentProfile):
                entry = entry.model_dump() | {"builtin": entry.builtin}
            if name in BUILTIN_AGENTS and isinstance(entry, dict):
                # a command of one's own is installed (and logged in to) one's own way
                dropped = ("install", "login") if "command" in entry else ()
                builtin = {k: v for k, v in merged[name].items() if k not in dropped}
                merged[name] = {**builtin, **entry}
                if isinstance(entry.get("env"), dict):  # the table's variables over the built-in ones
                    merged[name]["env"] = {**builtin.get("env", {}), **entry["env"]}
            else:
                merged[name] = entry
        return merged

    def model_profile(self, name: str) -> ModelProfile:
        """The profile of `name`: a ``[models.NAME]`` table, or ``provider:model`` (``openai:gpt-5``).

        Raises:
            InvalidModel: `name` is neither, saying what is configured and what to type.
        """
        if name in self.models:
            return self.models[name]
        provider, colon, model = name.partition(":")
        if colon and model and provider in PROVIDERS:
            return ModelProfile(provider=provider, model=model)
        where = f" of {self.path}" if self.path is not None else ""
        known = ", ".join(sorted(self.models)) or "none"
        raise InvalidModel(
            f"there is no model {name!r}: name a [models] profile{where} (configured: {known}) "
            f"or PROVIDER:MODEL with a provider of {', '.join(PROVIDERS)} (e.g. openai:gpt-5)"
        )


def load_config(directory: str | os.PathLike[str] | None = None) -> Config:
    """Read ``config.toml`` from the config dir (`directory`, else `config_dir`).

    Raises:
        TuiError: the file cannot be read, is not TOML, or holds a setting that is not one
            (the message names the file, the line and what to fix).
    """
    path = config_path(directory)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Config()
    except (OSError, UnicodeDecodeError) as exc:
        raise TuiError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TuiError(f"{path} is not valid TOML: {exc}; fix that line or move the file away") from exc
    data.pop("path", None)
    try:
        return Config.model_validate({**data, "path": path})
    except ValidationError as exc:
        first = exc.errors()[0]
        keys = [str(k) for k in first["loc"]]
        line = _line_of(text, keys)
        where = f"{path}, line {line}" if line else str(path)
        raise TuiError(
            f"{where}: {'.'.join(keys) or 'the file'}: {first['msg'].lower()}; fix it or move the file away"
        ) from exc


def save_setting(name: str, value: str, directory: str | os.PathLike[str] | None = None) -> Path:
    """Set the top-level setting `name` to `value` in ``config.toml`` (made when missing), keeping
    the rest of the file as the user wrote it: comments, order, spacing. Written atomically.

    Returns:
        The file written.

    Raises:
        TuiError: the file cannot be read or written, or is not TOML.
    """
    import tomlkit  # only when a setting is saved
    from tomlkit.exceptions import TOMLKitError

    path = config_path(directory)
    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        document = tomlkit.parse(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise TuiError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from exc
    except TOMLKitError as exc:
        raise TuiError(f"{path} is not valid TOML: {exc}; fix that line or move the file away") from exc
    if name in document or not document.body:
        document[name] = value
    else:
        # A new top-level key goes before the first table, or TOML would read it as the table's.
        tables = (i for i, (key, item) in enumerate(document.body) if isinstance(item, tomlkit.items.Table))
        first_table = next(tables, None)
        if first_table is None:
            document[name] = value
        else:
            document.body.insert(first_table, (None, tomlkit.nl()))
            document.body.insert(first_table, (tomlkit.key(name), tomlkit.item(value)))
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(tomlkit.dumps(document), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise TuiError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return path


def _line_of(text: str, keys: list[str]) -> int | None:
    """The line (1-based) where the setting at `keys` is written, best effort."""
    if not keys:
        return None
    key = keys[0]
    lines = text.splitlines()
    start = 0
    if len(keys) >= 2 and keys[0] in ("models", "agents"):
        header = re.compile(rf"^\s*\[\s*{re.escape(keys[0])}\s*\.\s*\"?{re.escape(keys[1])}\"?\s*\]")
        start = next((i for i, ln in enumerate(lines) if header.match(ln)), -1)
        if start < 0:
            return None
        if len(keys) == 2:
            return start + 1
        key = keys[2]
    elif len(keys) >= 2 and keys[0] in ("notify", "workers", "sandbox", "children"):
        header = re.compile(rf"^\s*\[\s*{re.escape(keys[0])}\s*\]")
        start = next((i for i, ln in enumerate(lines) if header.match(ln)), -1)
        if start < 0:
            return None
        key = keys[1]
    pattern = re.compile(rf"^\s*\"?{re.escape(key)}\"?\s*=")
    for i in range(start, len(lines)):
        if start and i > start and lines[i].lstrip().startswith("["):
            break
        if pattern.match(lines[i]):
            return i + 1
    return None
