"""Telling someone, wherever they are, that a session needs them: config.toml's ``[notify]``.

The worker runs when no one is attached, so it is the one that tells. `watch` gives a
`SessionWorker` a `Notifier`, a listener fed each event the worker writes and the state after
it. What it decides to tell goes on a queue that one task delivers, off the event path: a turn is
never delayed or failed by a slow or broken webhook. Each delivery has a timeout and a few
tries with backoff; what was told (or failed) is one `notified` event in the journal, so a new
worker tells nothing twice, and a failure is also one line in ``worker.log`` and the status row.

What is told, once each:
- ``question``: a question still pending `NotifySettings.after` seconds after it was asked (an
  answer from anywhere before that, a dismissal or the turn's end: nothing);
- ``turn_failed`` / ``turn_ended``: a turn that failed / any turn that ended;
- ``budget``: a turn stopped at the session's budget (`tui budget`; the next turn asks whether
  to raise it);
- ``worker_died``: a new worker found its predecessor dead (killed or crashed: nothing else can
  see that); the turn it ran failed with it, which this notice says.

Secrets stay here: the webhook's URL and headers are never written to the journal or a log, which
name the webhook by its host (``webhook (ntfy.sh)``) and a command by its name.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import logging
import os
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit, urlunsplit

import platformdirs

from tui.config import NotifySettings
from tui.errors import DiskFull
from tui.protocol import (
    Event,
    Notified,
    Option,
    Question,
    QuestionAsked,
    QuestionResolved,
    TurnEnded,
    TurnRecord,
    WorkerLeaving,
    WorkerStarted,
)
from tui.protocol.ids import short_id
from tui.protocol.state import RESTARTED, SessionState
from tui.redact import redact_json
from tui.terminal import visible

if TYPE_CHECKING:
    from tui.worker.core import SessionWorker

__all__ = ["Notice", "Notifier", "deliver", "question_notice", "sample_notice", "watch", "web_link"]

log = logging.getLogger("tui.worker.notify")

BACKOFF = 1.0
"""Seconds before the second try of a delivery; each next wait is twice the one before."""
CATCH_UP = timedelta(minutes=10)
"""A turn that ended this recently, untold because its worker died before telling, is told by
the next worker."""
USER_AGENT = "tui-notify"


@dataclass(frozen=True)
class Notice:
    """One thing to tell: the same fields reach the webhook's JSON, a command's placeholders and
    its ``TUI_NOTIFY_*`` variables."""

    key: str
    """Unique in the session (`Notified.key`)."""
    event: str
    session_id: str
    title: str
    """One line: ``tui 3f2a1b2c (deploy): a question``."""
    body: str
    """A few lines: what happened, and what to type."""
    session_title: str = ""
    question: dict[str, Any] | None = None
    answer: list[str] = field(default_factory=list)
    """The exact commands that answer a question (one an option, then free text), or that
    attach the session."""
    link: str | None = None
    """The session on `tui web`, when one runs."""
    turn: dict[str, Any] | None = None
    at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())

    def as_json(self) -> dict[str, Any]:
        """The webhook's JSON body."""
        return {
            "event": self.event,
            "key": self.key,
            "session_id": self.session_id,
            "short_id": short_id(self.session_id),
            "session_title": self.session_title,
            "title": self.title,
            "body": self.body,
            "question": self.question,
            "answer": {"commands": list(self.answer), "link": self.link},
            "turn": self.turn,
            "at": self.at,
        }

    def text(self) -> str:
        """The plain-text message: the title, then the body."""
        return f"{self.title}\n{self.body}"

    def fields(self) -> dict[str, str]:
        """What a command's ``{placeholders}`` stand for."""
        return {
            "event": self.event,
            "session_id": self.session_id,
            "short_id": short_id(self.session_id),
            "session_title": self.session_title,
            "title": self.title,
            "body": self.body,
            "question": (self.question or {}).get("text", ""),
            "answer": "\n".join(self.answer),
            "link": self.link or "",
        }

    def environment(self, fields: Mapping[str, str] | None = None) -> dict[str, str]:
        """The ``TUI_NOTIFY_*`` variables a command gets (``TUI_NOTIFY_JSON``: the whole body),
        of `fields` (this notice's by default)."""
        given = self.fields() if fields is None else fields
        env = {f"TUI_NOTIFY_{name.upper()}": value for name, value in given.items()}
        env["TUI_NOTIFY_JSON"] = visible(json.dumps(self.as_json(), ensure_ascii=False))
        return env


# --- what is told ---------------------------------------------------------------------------------


def _command(state_root: Path | None, *words: str) -> str:
    """A `tui` command line as the user types it (``--state-dir`` when the state dir is not the
    default one, so that it works as printed)."""
    line = ["tui"]
    default = Path(platformdirs.user_state_dir("tui")).expanduser().resolve()
    if state_root is not None and state_root != default:
        line += ["--state-dir", str(state_root)]
    return shlex.join([*line, *words])


def _label(session_id: str, title: str) -> str:
    short = short_id(session_id)
    if len(title) > 40:
        title = title[:39].rstrip() + "…"
    return f"tui {short} ({title})" if title else f"tui {short}"


def question_notice(
    session_id: str,
    question: Question,
    *,
    title: str = "",
    state_root: Path | None = None,
    link: str | None = None,
) -> Notice:
    """The notice of a question waiting for an answer."""
    short = short_id(session_id)
    commands = [
        _command(state_root, "answer", short, "--option", str(i)) for i, _ in enumerate(question.options, 1)
    ]
    if question.freeform or not question.options:
        commands.append(_command(state_root, "answer", short, "--text", "your answer"))
    lines = [question.text]
    width = max((len(o.label) for o in question.options), default=0)
    for i, option in enumerate(question.options):
        lines.append(f"  {i + 1}. {option.label.ljust(width)}   {commands[i]}")
    if question.freeform or not question.options:
        lines.append(f"free text: {commands[-1]}")
    if link:
        lines.append(f"on the web: {link}")
    return Notice(
        key=f"question:{question.question_id}",
        event="question",
        session_id=session_id,
        session_title=title,
        title=f"{_label(session_id, title)}: a question",
        body="\n".join(lines),
        question={
            "question_id": question.question_id,
            "text": question.text,
            "options": [o.model_dump() for o in question.options],
            "multiple": question.multiple,
            "freeform": question.freeform,
        },
        answer=commands,
        link=link,
    )


def _tail(text: str, limit: int = 400) -> str:
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def turn_notice(
    session_id: str,
    record: TurnRecord,
    event: str,
    *,
    title: str = "",
    state_root: Path | None = None,
    link: str | None = None,
) -> Notice:
    """The notice of a turn that ended (`event`: ``turn_failed``, ``turn_ended``, or ``budget``:
    it stopped at the session's budget, and the next turn asks whether to raise it)."""
    attach = _command(state_root, "attach", short_id(session_id))
    said = record.error if record.outcome != "completed" and record.error else record.reply
    lines = [_tail(said or "(no reply)"), f"see it: {attach}"]
    how: str = record.outcome or "ended"
    if event == "budget":
        how = "stopped at the session's budget"
        lines.insert(
            1, f"raise it: answer its question, or {_command(state_root, 'budget', short_id(session_id))}"
        )
    if link:
        lines.append(f"on the web: {link}")
    return Notice(
        key=f"{event}:{record.turn_id}",
        event=event,
        session_id=session_id,
        session_title=title,
        title=f"{_label(session_id, title)}: turn {record.number} {how}",
        body="\n".join(lines),
        answer=[attach],
        link=link,
        turn={
            "turn_id": record.turn_id,
            "number": record.number,
            "outcome": record.outcome,
            "error": record.error,
            "prompt": _tail(record.prompt, 200),
        },
    )


def death_notice(
    session_id: str,
    epoch: int,
    record: TurnRecord | None,
    *,
    title: str = "",
    state_root: Path | None = None,
    link: str | None = None,
) -> Notice:
    """The notice of a worker found dead by the next one (`record`: the turn it was running)."""
    attach = _command(state_root, "attach", short_id(session_id))
    lines = ["its worker stopped without leaving (killed or crashed); a new one runs the session"]
    if record is not None:
        lines.append(f"turn {record.number}, running then, failed")
    lines.append(f"see it: {attach}")
    return Notice(
        key=f"worker_died:{epoch}",
        event="worker_died",
        session_id=session_id,
        session_title=title,
        title=f"{_label(session_id, title)}: its worker died",
        body="\n".join(lines),
        answer=[attach],
        link=link,
        turn=None if record is None else {"turn_id": record.turn_id, "number": record.number},
    )


def sample_notice(session_id: str = "0" * 16, *, title: str = "", state_root: Path | None = None) -> Notice:
    """What `tui notify test` sends: a question as one would come (nothing to answer)."""
    question = Question(
        turn_id="t-sample",
        question_id="ask-sample",
        text="tui notify test: this is how a question reaches you. Proceed?",
        options=[Option(label="yes"), Option(label="no")],
    )
    notice = question_notice(session_id, question, title=title, state_root=state_root)
    return dataclasses.replace(notice, key="test", event="test")


def web_link(state_root: Path, session_id: str) -> str | None:
    """The session's page on the `tui web` of this state dir, when one runs (``web/server.json``, which
    `tui web` writes while it serves, names its address and pid)."""
    try:
        data = json.loads((state_root / "web" / "server.json").read_text())
        url, pid = str(data["url"]), int(data["pid"])
        os.kill(pid, 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return f"{url.rstrip('/')}/#s={session_id}"


# --- delivering -----------------------------------------------------------------------------------


def webhook_name(url: str) -> str:
    """The webhook as logs and the journal name it: its host only (the URL may hold a secret)."""
    return f"webhook ({urlsplit(url).hostname or 'no host'})"


def command_name(argv: list[str]) -> str:
    """A command as logs name it: its program's name only (its arguments may hold a secret)."""
    return f"command ({os.path.basename(argv[0]) if argv else 'none'})"


class _Failed(Exception):
    """One try failed; `again` says whether another try may do better."""

    def __init__(self, why: str, *, again: bool = True) -> None:
        super().__init__(why)
        self.again = again


def _body(settings: NotifySettings, notice: Notice) -> tuple[bytes, str]:
    if settings.format == "text":
        return notice.text().encode(), "text/plain; charset=utf-8"
    if settings.format == "slack":
        data: dict[str, Any] = {"text": notice.text()}
    elif settings.format == "discord":
        data = {"content": notice.text()[:2000]}
    else:
        data = notice.as_json()
    return json.dumps(data, ensure_ascii=False).encode(), "application/json"


def _headers(settings: NotifySettings, environ: Mapping[str, str], content_type: str) -> dict[str, str]:
    headers = {"Content-Type": content_type, "User-Agent": USER_AGENT, **settings.headers}
    for header, variable in settings.headers_env.items():
        value = environ.get(variable)
        if not value:
            raise _Failed(f"header {header}: {variable} is not set in the environment", again=False)
        headers[header] = value
    return headers


def _post(url: str, data: bytes, headers: dict[str, str], timeout: float) -> None:
    """One POST; the reasons it raises never hold the URL. A user and password in the URL are
    sent as basic authentication."""
    import urllib.error  # here: a worker that tells nothing does not load http.client and ssl
    import urllib.request

    parts = urlsplit(url)
    if parts.username is not None:
        credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        headers = {"Authorization": "Basic " + base64.b64encode(credentials).decode(), **headers}
        url = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read(65536)
    except urllib.error.HTTPError as exc:
        exc.close()
        raise _Failed(f"HTTP {exc.code}", again=exc.code >= 500 or exc.code == 429) from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        why = getattr(reason, "strerror", None) or str(reason)
        raise _Failed(why.lower() if "timed out" in why.lower() else why) from None
    except TimeoutError:
        raise _Failed("timed out") from None
    except OSError as exc:
        raise _Failed(exc.strerror or type(exc).__name__) from None
    except ValueError as exc:
        raise _Failed(f"not a URL one can POST to ({type(exc).__name__})", again=False) from None


async def _webhook(settings: NotifySettings, notice: Notice, environ: Mapping[str, str]) -> None:
    assert settings.webhook is not None
    data, content_type = _body(settings, notice)
    headers = _headers(settings, environ, content_type)
    try:
        await asyncio.wait_for(
            asyncio.to_thread(_post, settings.webhook, data, headers, settings.timeout), settings.timeout + 1
        )
    except TimeoutError:
        raise _Failed("timed out") from None


_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def fill(argv: list[str], fields: Mapping[str, str]) -> list[str]:
    """`argv` with each known ``{placeholder}`` replaced (an unknown one stays as written).

    The text filled in is a session's (a question a program or a model wrote): a word it makes
    start with ``-`` when the word as written did not gets a space before it, so that it can
    never be read as an option of the command.
    """
    filled = []
    for word in argv:
        made = _PLACEHOLDER.sub(lambda m: fields.get(m.group(1), m.group(0)), word)
        filled.append(" " + made if made.startswith("-") and not word.startswith("-") else made)
    return filled


def shown_fields(notice: Notice) -> dict[str, str]:
    """A notice's fields as a command gets them: control characters shown, never acting (ESC
    as ``␛``, `tui.terminal.visible`); newlines and tabs are kept."""
    return {name: visible(value) for name, value in notice.fields().items()}


async def _run(settings: NotifySettings, notice: Notice, environ: Mapping[str, str]) -> None:
    fields = shown_fields(notice)
    argv = fill(settings.command, fields)
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            env={**environ, **notice.environment(fields)},
            start_new_session=True,
        )
    except FileNotFoundError:
        raise _Failed("not found on PATH", again=False) from None
    except OSError as exc:
        raise _Failed(exc.strerror or type(exc).__name__, again=False) from None
    try:
        code = await asyncio.wait_for(process.wait(), settings.timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        raise _Failed("timed out") from None
    if code != 0:
        raise _Failed(f"exit {code}")


async def _tries(
    name: str, attempt: Callable[[], Any], settings: NotifySettings, sleep: Callable[[float], Any]
) -> str | None:
    """Try `attempt` up to ``1 + retries`` times; None when it took, else why it did not."""
    delay = BACKOFF
    tries = 0
    while True:
        tries += 1
        try:
            await attempt()
            return None
        except _Failed as exc:
            if not exc.again or tries > settings.retries:
                return f"{name}: {exc}{f' ({tries} tries)' if tries > 1 else ''}"
        await sleep(delay)
        delay *= 2


async def deliver(
    settings: NotifySettings,
    notice: Notice,
    environ: Mapping[str, str] | None = None,
    sleep: Callable[[float], Any] = asyncio.sleep,
) -> tuple[list[str], list[str]]:
    """Tell the webhook and run the command that `settings` name, at once, each with its tries.

    Returns:
        The places told (``webhook (HOST)``, ``command (NAME)``), and those that failed with why.
    """
    env = dict(os.environ if environ is None else environ)
    notice = redacted(notice)
    jobs: list[tuple[str, Callable[[], Any]]] = []
    if settings.webhook is not None:
        jobs.append((webhook_name(settings.webhook), lambda: _webhook(settings, notice, env)))
    if settings.command:
        jobs.append((command_name(settings.command), lambda: _run(settings, notice, env)))
    results = await asyncio.gather(*(_tries(name, job, settings, sleep) for name, job in jobs))
    told = [name for (name, _), failed in zip(jobs, results, strict=True) if failed is None]
    failed = [why for why in results if why is not None]
    return told, failed


def redacted(notice: Notice) -> Notice:
    """`notice` with the secrets of what it quotes (title, body, question, turn) replaced: a
    notification leaves the owner's own view (`tui.redact`)."""
    said = {
        "title": notice.title,
        "body": notice.body,
        "session_title": notice.session_title,
        "question": notice.question,
        "turn": notice.turn,
    }
    raw = json.dumps(said, ensure_ascii=False).encode()
    clean = redact_json(raw)
    return notice if clean is raw else dataclasses.replace(notice, **json.loads(clean))


# --- the worker's listener ------------------------------------------------------------------------


class Notifier:
    """What a worker tells, decided from the events it writes (`saw`), delivered by a task."""

    def __init__(self, worker: SessionWorker, settings: NotifySettings, *, died: int | None = None) -> None:
        self.worker = worker
        self.settings = settings
        self.died = died
        """The epoch of the predecessor that died without leaving (told once the new one started)."""
        self._state: SessionState = worker.writer.state
        self._queued: set[str] = set()
        self._waiting: dict[str, asyncio.TimerHandle] = {}
        """Questions waiting out `after`, by id."""
        self._queue: asyncio.Queue[Notice | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    @property
    def state_root(self) -> Path:
        return self.worker.writer.paths.root.parent.parent

    def _told(self, key: str) -> bool:
        return key in self._queued or key in self._state.notified

    def _tell(self, notice: Notice) -> None:
        if self._told(notice.key) or self.worker.writer.leaving:
            return
        self._queued.add(notice.key)
        self._queue.put_nowait(notice)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._deliver(), name="notify")

    def _common(self) -> dict[str, Any]:
        sid = self.worker.control.record.id
        return {
            "title": self.worker.control.record.title,
            "state_root": self.state_root,
            "link": web_link(self.state_root, sid),
        }

    def catch_up(self) -> None:
        """Tell what the last worker did not get to (it died first): its last ended turn."""
        record = next(reversed(self._state.turns.values()), None)
        if record is None or record.ended_at is None or record.error == RESTARTED:
            return
        with contextlib.suppress(ValueError):
            if datetime.now(UTC) - datetime.fromisoformat(record.ended_at) <= CATCH_UP:
                self._turn(record)

    def saw(self, event: Event, state: SessionState) -> None:
        """The listener: `event` was written, `state` is the session after it. Never raises: a
        notice lost is one line in the log, never a failed event."""
        try:
            self._saw(event, state)
        except Exception:
            log.exception("notify: %s could not be looked at", event.type)

    def _saw(self, event: Event, state: SessionState) -> None:
        self._state = state
        on = self.settings.on
        match event:
            case QuestionAsked() if "question" in on:
                key = f"question:{event.question_id}"
                if not self._told(key):
                    after = self.settings.after
                    self._waiting[event.question_id] = asyncio.get_running_loop().call_later(
                        after, self._question_due, event.question_id
                    )
            case QuestionResolved():
                self._stop_waiting(event.question_id)
            case TurnEnded():
                for handle in self._waiting.values():
                    handle.cancel()
                self._waiting.clear()
                record = state.turns.get(event.turn_id)
                if record is not None and not (event.error == RESTARTED and "worker_died" in on):
                    self._turn(record)
            case WorkerStarted() if self.died is not None and "worker_died" in on:
                ended = next(reversed(state.turns.values()), None)
                orphan = ended if ended is not None and ended.error == RESTARTED else None
                self._tell(death_notice(self.worker.control.record.id, self.died, orphan, **self._common()))
            case WorkerLeaving():
                for handle in self._waiting.values():
                    handle.cancel()
                self._waiting.clear()
                if self._task is not None:
                    self._queue.put_nowait(None)
            case _:
                pass

    def _turn(self, record: TurnRecord) -> None:
        on = self.settings.on
        if record.stop_reason == "budget" and "budget" in on:
            event = "budget"
        elif record.outcome == "failed" and "turn_failed" in on:
            event = "turn_failed"
        elif "turn_ended" in on:
            event = "turn_ended"
        else:
            return
        self._tell(turn_notice(self.worker.control.record.id, record, event, **self._common()))

    def _stop_waiting(self, question_id: str) -> None:
        handle = self._waiting.pop(question_id, None)
        if handle is not None:
            handle.cancel()

    def _question_due(self, question_id: str) -> None:
        self._waiting.pop(question_id, None)
        question = self._state.question
        if question is None or question.question_id != question_id:
            return  # answered, dismissed or withdrawn meanwhile
        self._tell(question_notice(self.worker.control.record.id, question, **self._common()))

    async def _deliver(self) -> None:
        while (notice := await self._queue.get()) is not None:
            try:
                told, failed = await deliver(self.settings, notice)
            except Exception as exc:  # never a traceback per notice: one line, and go on
                told, failed = [], [f"notify: {type(exc).__name__}"]
            self._done(notice, told, failed)

    def _done(self, notice: Notice, told: list[str], failed: list[str]) -> None:
        worker = self.worker
        if told:
            log.info("told %s of %s (%s)", ", ".join(told), notice.event, notice.key)
        for why in failed:
            log.warning("notify: %s (%s) not told: %s", notice.event, notice.key, why)
        if failed:
            worker.writer.activity = f"notify: {failed[0]}"
            worker.writer.status_changed()
        if worker.writer.leaving:
            return
        with contextlib.suppress(DiskFull):
            worker.writer.emit(Notified(key=notice.key, event=notice.event, told=told, failed=failed))


def watch(worker: SessionWorker, settings: NotifySettings) -> Notifier | None:
    """Give `worker` a `Notifier` when `settings` tell anyone; call it after `load`, before `begin`.

    Whether the last worker died (rather than left) is read here, from the journal's last line.
    """
    if not settings.anywhere:
        return None
    last = worker.writer.journal.last_line()
    died = worker.writer.state.epoch if last is not None and last.type != "worker_leaving" else None
    notifier = Notifier(worker, settings, died=died)
    worker.writer.listeners.append(notifier.saw)
    notifier.catch_up()
    return notifier
