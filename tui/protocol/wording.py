"""How a session's events read as words: who did something, a note's line, a turn's steps in
order, an agent's model and mode by name, and a tool call's record as its events build it. Used
by the reducer (`tui.protocol.state`, which also exports these names) and by what shows a turn."""

from __future__ import annotations

from typing import Any, Literal

from tui.protocol.events import (
    AgentChoice,
    AgentSetting,
    By,
    ChildEnded,
    ChildStarted,
    FilesChanged,
    Note,
    Presence,
    QuestionResolved,
    Rewound,
    ShareChanged,
    StopReason,
    ToolStarted,
    ToolUpdated,
    WorkerLeaving,
    WorkerStarted,
)
from tui.protocol.ids import BY_PARENT, client_label
from tui.protocol.messages import ToolRecord, Transcript, TurnRecord

__all__ = [
    "ASKING",
    "RUNNING",
    "Step",
    "agent_mode",
    "agent_model",
    "answered_line",
    "attached_text",
    "child_line",
    "files_line",
    "is_share_line",
    "leaving_line",
    "model_line",
    "new_worker_line",
    "note_line",
    "question_words",
    "restart_loses",
    "rewound_line",
    "setting_line",
    "share_line",
    "steps",
    "stop_said",
    "tool_record",
    "unknown_line",
    "unshared",
    "unshared_transcript",
    "update_tool",
    "who",
    "worker_lines",
    "worker_lost",
]

RUNNING = "running"
"""A tool call's status until it ends."""
ASKING = frozenset({"ask", "ask_user"})
"""Tools that put a question to the people attached (a program's ``ask``, a model's
``ask_user``): their call reads as the question and its options in words (`question_words`)."""
QUESTION_WIDTH = 90
"""How long a question's first line may read on its call's line."""
OPTIONS_WIDTH = 52
"""How long a question's options may read before the rest are counted, not shown."""


def first_line(text: str, limit: int) -> str:
    """The first line of `text` that says something, cut at `limit`, and how many lines follow
    (``x = 1 (+3 lines)``); "" when none does."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return ""
    first = lines[0].strip()
    more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
    if len(first) > limit:
        first = first[: limit - 1] + "…"
    return first + more


def _labels(options: list[Any], limit: int) -> str:
    """A question's options by their labels, ``staging / prod``: whole labels, then how many
    more (``a / b / …+3``)."""
    labels = [
        str(o["label"]) if isinstance(o, dict) and "label" in o else o if isinstance(o, str) else str(o)
        for o in options
    ]
    shown: list[str] = []
    for label in labels:
        if shown and len(" / ".join([*shown, label])) + 6 > limit:
            break
        shown.append(label if len(label) <= limit else label[: limit - 1] + "…")
    rest = len(labels) - len(shown)
    return " / ".join([*shown, *([f"…+{rest}"] if rest else [])])


def question_words(name: str, args: dict[str, Any]) -> str | None:
    """A question's call (`ASKING`) in words, as the question itself reads: ``ask: Deploy? ·
    staging / prod`` (``(several)`` when more than one may be chosen). None when the call is not
    a question's or its arguments are not a question's. The app's call line and the page's call
    card both say it."""
    question = args.get("question")
    options = args.get("options")
    if name not in ASKING or not isinstance(question, str) or not isinstance(options, list | None):
        return None
    parts = [f"{name}: {first_line(question, QUESTION_WIDTH) or '…'}"]
    if options:
        parts.append(_labels(options, OPTIONS_WIDTH) + (" (several)" if args.get("multiple") else ""))
    return " · ".join(parts)


def tool_record(event: ToolStarted) -> ToolRecord:
    """The record of the tool call `event` started, still running."""
    return ToolRecord(
        call_id=event.call_id,
        name=event.name,
        args=event.args,
        status=RUNNING,
        title=event.title,
        kind=event.kind,
        locations=list(event.locations),
    )


def update_tool(tool: ToolRecord, event: ToolUpdated) -> list[str] | None:
    """Apply what `event` says again of the call `tool` records (in place): each field it gives
    replaces the one before. Returns the call's output as it now stands when the event replaces
    it (None: the output is unchanged)."""
    for name in ("title", "kind", "args", "locations"):
        value = getattr(event, name)
        if value is not None:
            setattr(tool, name, list(value) if name == "locations" else value)
    if event.diffs is not None:
        tool.diffs = list(event.diffs)
    return None if event.output is None else [event.output] if event.output else []


def _named(choices: list[AgentChoice], value: str | None) -> str | None:
    if value is None:
        return None
    return next((c.name or c.value for c in choices if c.value == value), value)


def agent_model(settings: list[AgentSetting]) -> str | None:
    """The model an agent says it uses now (its setting of category ``model``), by name."""
    model = next((s for s in settings if s.category == "model"), None)
    return _named(model.choices, model.current) if model is not None else None


def agent_mode(mode: str | None, modes: list[AgentChoice], settings: list[AgentSetting]) -> str | None:
    """The mode an agent is in now, by name: its session mode, else its setting of category ``mode``."""
    if mode is not None:
        return _named(modes, mode)
    setting = next((s for s in settings if s.category == "mode"), None)
    return _named(setting.choices, setting.current) if setting is not None else None


def who(by: By, client_id: str | None = None) -> str:
    """A person as the transcript names them: the owner's name, or a participant's, and what
    they did it with when it was not a terminal (``root (tui send)``)."""
    if by.kind == "participant":
        name = f"{by.name} (participant)" if by.name else "a participant"
    else:
        name = by.name or "owner"
    label = client_label(client_id)
    return name if label in (None, "terminal") else f"{name} ({label})"


def note_line(event: Note) -> str:
    """A note as the transcript shows it: ``note from claude: …``; one left for the agent names
    who left it and with what (``note from root via ci: …``)."""
    if event.by is not None:
        sender = who(event.by) + (f" via {event.source}" if event.source else "")
        return f"note from {sender}: {event.text}"
    return f"note{f' from {event.source}' if event.source else ''}: {event.text}"


def answered_line(event: QuestionResolved) -> str:
    """How a question was resolved, as the turn shows it: ``answered by ana (participant): blue``,
    ``answered by parent 1b5bdb75: yes`` (the parent session's model, not a person),
    ``question dismissed by root``, ``question cancelled``."""
    if event.how == "answered":
        answer = ", ".join([*event.selected, *([event.freeform] if event.freeform else [])])
        surface, _, rest = (event.client_id or "").partition(":")
        if surface == BY_PARENT:
            return f"answered by parent {rest.split(':')[0]}: {answer}"
        return f"answered by {who(event.by)}: {answer}"
    if event.how == "dismissed":
        return f"question dismissed by {who(event.by)}"
    return "question cancelled"


def model_line(model: str) -> str:
    """The line saying the session's model changed."""
    return f"model: {model}"


def setting_line(setting: str, value: str) -> str:
    """The line saying one of the agent's settings was set (``mode: code``), as `model_line`."""
    return f"{setting}: {value}"


def new_worker_line(version: str) -> str:
    """The line saying a new worker took the session (after a restart, or a crash)."""
    return f"a new worker runs the session: tui {version}"


def leaving_line(event: WorkerLeaving) -> str:
    """The line saying the worker leaves (``the worker is restarting: /restart``)."""
    going = "restarting" if event.restarting else "leaving"
    return f"the worker is {going}{f': {event.reason}' if event.reason else ''}"


def worker_lost(event: WorkerStarted, turns: int) -> str | None:
    """What a new worker of a session that ran `turns` turns does not have, in one line (None
    for a session's first worker): ``the Python variables of the turns above are gone; run what
    you need again``."""
    if turns <= 0:
        return None
    if event.agent in ("", "python"):
        return "the Python variables of the turns above are gone; run what you need again"
    if event.agent == "model":
        return "the Python variables of its programs are gone; the conversation stays"
    return f"{event.agent} was started again and asked to load the session"


def worker_lines(event: WorkerStarted | WorkerLeaving, turns: int) -> list[str]:
    """Where one worker of a session that ran `turns` turns ends and the next begins, as the
    transcript keeps it (`leaving_line`; `new_worker_line` and `worker_lost`)."""
    if isinstance(event, WorkerLeaving):
        return [leaving_line(event)]
    lost = worker_lost(event, turns)
    return [] if lost is None else [new_worker_line(event.version), lost]


def unknown_line(typ: str) -> str:
    """The line standing for an event of a type this version does not know."""
    return f"(an event this version does not know: {typ})"


def attached_text(people: list[Presence] | tuple[Presence, ...]) -> str:
    """``root · 2 terminals, ana (viewer)``: the owner plain, participants with their share, and
    what each is attached with when it is more than one terminal or not a terminal."""
    return ", ".join(_person(p) for p in people)


def _person(p: Presence) -> str:
    name = p.name if p.kind == "owner" else f"{p.name} ({p.kind})"
    counts = p.counts()
    if not counts or counts == {"terminal": 1}:
        return name
    return name + " · " + ", ".join(f"{n} {label}s" if n > 1 else label for label, n in counts.items())


_STOPS_SAID: dict[str | None, str] = {
    "max_tokens": "the reply was cut at the model's token limit",
    "refusal": "the model refused to go on",
    "max_turn_requests": "the turn stopped at its limit of model requests",
    "budget": "the turn stopped at the session's budget",
}


def stop_said(stop_reason: StopReason | None) -> str | None:
    """One line saying a turn was cut short, and why; None for a turn its agent ended."""
    return _STOPS_SAID.get(stop_reason)


def tool_error(error: str | None) -> str:
    """What a tool call that ended in error says beyond its status word: its error, or nothing
    when the error only repeats that it failed (an ACP agent's ``failed`` beside the ``error``
    status would read ``error  failed``)."""
    said = (error or "").strip()
    return "" if said.lower() in ("failed", "error") else said


def child_line(event: ChildStarted | ChildEnded) -> str:
    """Where a child starts or ends, as the parent's transcript shows it, with its id:
    ``child 1b5bdb75 started by root: print(1)``, ``child 1b5bdb75 completed``, ``child 1b5bdb75
    failed: …``, ``child 1b5bdb75 was interrupted``."""
    if isinstance(event, ChildStarted):
        first = event.prompt.splitlines()[0] if event.prompt else ""
        by = f" by {who(event.by)}" if event.by is not None else ""
        cut = first if len(first) <= 60 else first[:59] + "…"
        return f"child {event.child_id[:8]} started{by}: {cut}"
    how = "was interrupted" if event.outcome == "interrupted" else event.outcome
    return f"child {event.child_id[:8]} {how}{f': {event.error}' if event.error else ''}"[:200]


def files_line(event: FilesChanged) -> str | None:
    """What a turn did to the session's folder, in one line: ``files: 3 changed, +12 -4 (a.py,
    b.py, docs/c.md)``; None when it changed nothing and skipped nothing."""
    count = len(event.files) + event.more
    skipped = f"; skipped {', '.join(event.skipped[:3])}{' …' if len(event.skipped) > 3 else ''}"
    if not count:
        return f"files: none changed{skipped}" if event.skipped else None
    added = sum(f.added for f in event.files)
    removed = sum(f.removed for f in event.files)
    names = [f"{f.old_path} → {f.path}" if f.old_path else f.path for f in event.files[:3]]
    more = f" and {count - len(names)} more" if count > len(names) else ""
    changed = f"{count} changed, +{added} -{removed}"
    return f"files: {changed} ({', '.join(names)}{more}){skipped if event.skipped else ''}"


def rewound_line(event: Rewound) -> str:
    """A rewind as the transcript shows it: ``rewound to before turn 3 by root: turns 3-5
    undone, 4 files put back``."""
    undone = (
        f"turn {event.to_turn}"
        if event.last_turn <= event.to_turn
        else f"turns {event.to_turn}-{event.last_turn}"
    )
    count = len(event.files) + event.more
    files = f"{count} file{'s' if count != 1 else ''} put back" if count else "no file to put back"
    forced = f" ({len(event.forced)} changed since by someone else, overwritten)" if event.forced else ""
    said = f"; {event.agent_said}" if event.agent_said else ""
    return (
        f"rewound to before turn {event.to_turn} by {who(event.by)}: {undone} undone, {files}{forced}{said}"
    )


SHARE_WORDS = ("shared with ", "share of ")
"""How every line `share_line` makes begins (and no other line of a transcript does)."""


def share_line(event: ShareChanged) -> str:
    """A share made or revoked, as the owner's transcript shows it: ``shared with ana as
    collaborator (3 turns, until 18:00) by root``, ``share of ana revoked by root``. A
    participant is never shown one (`is_share_line`: the web bridge leaves them out)."""
    if event.change == "revoked":
        return f"{SHARE_WORDS[1]}{event.name} revoked by {who(event.by)}"
    limits = [f"{event.turns} turn{'s' if event.turns != 1 else ''}"] if event.turns is not None else []
    if event.expires_at is not None:
        until = event.expires_at.astimezone()
        same_day = until.date() == event.at.astimezone().date()
        limits.append(f"until {until.strftime('%H:%M' if same_day else '%Y-%m-%d %H:%M')}")
    said = f" ({', '.join(limits)})" if limits else ""
    return f"{SHARE_WORDS[0]}{event.name} as {event.kind}{said} by {who(event.by)}"


def is_share_line(text: str) -> bool:
    """Whether a transcript's line is one `share_line` made (what a participant is not shown)."""
    return text.startswith(SHARE_WORDS)


def unshared(record: TurnRecord) -> TurnRecord:
    """`record` without the share lines said during it or before it (what a participant sees)."""
    if not any(is_share_line(line.text) for line in record.lines):
        return record
    return record.model_copy(update={"lines": [ln for ln in record.lines if not is_share_line(ln.text)]})


def unshared_transcript(transcript: Transcript) -> Transcript:
    """`transcript` as a participant is given it: no line saying a share made or revoked."""
    return transcript.model_copy(
        update={
            "turns": [unshared(r) for r in transcript.turns],
            "current": None if transcript.current is None else unshared(transcript.current),
            "notes": [n for n in transcript.notes if not is_share_line(n)],
        }
    )


def restart_loses(agent: str | None) -> str:
    """What a new worker does not have of a session running `agent`, in a few words."""
    if agent in (None, "python"):
        return "its programs' variables"
    if agent == "model":
        return "the Python variables of its programs (the conversation stays)"
    return "the agent's process (a new one is asked to load the session)"


Step = tuple[Literal["text"], str] | tuple[Literal["tool"], ToolRecord] | tuple[Literal["line"], str]


def steps(record: TurnRecord) -> list[Step]:
    """A turn's reply, tool calls and lines (answered questions, notes) in the order they came,
    as far as the record says (a record written before it kept places: its tools, its answered
    lines, then its reply). Notes said before the turn (``before`` lines) are not among them."""
    out: list[Step] = []
    reply, tools = record.reply, record.tools
    done = 0  # characters of the reply placed
    used = 0  # tools placed

    def text_to(at: int) -> None:
        nonlocal done
        at = max(done, min(at, len(reply)))
        if at > done:
            out.append(("text", reply[done:at]))
            done = at

    def tools_to(count: int) -> None:
        nonlocal used
        while used < min(count, len(tools)):
            text_to(tools[used].at_reply)
            out.append(("tool", tools[used]))
            used += 1

    lines = [line for line in record.lines if line.kind != "before"]
    for line in lines:
        tools_to(line.tools)
        text_to(line.at_reply)
        out.append(("line", line.text))
    tools_to(len(tools))
    if not any(line.kind == "answered" for line in lines):
        out += [("line", text) for text in record.answered]
    text_to(len(reply))
    return out
