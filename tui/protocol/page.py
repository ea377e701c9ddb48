"""What the page of ``tui web`` is sent: a session as it is drawn, already in words.

The page is a client of the web bridge's `Attachment` (`tui.link.page` turns its typed changes
into these): it keeps no state of the session and words nothing itself. Each `PageChange` names
its change's type and says, in its fields, what to draw; a field that is not there changes
nothing. So an event of a new kind needs Python (its words here, its change in
`tui.link.page`) and no line of the page's JavaScript: it comes as a line (`lines`, or a `step`
of the running turn) with its words and a style class.

The fields, and what the page does with each (docs/remote.md, "The page"):

- ``snapshot``: the session as it is now; everything drawn before is dropped.
- ``turns``: turns to draw (a running one, or ended ones), each replacing the one of its id.
- ``turn_id`` + ``at`` + ``step``: the running turn's step ``at`` is ``step`` (``append``: its
  text, or its call's output, grows by ``step``'s); ``thinking`` grows, ``plan`` is replaced.
- ``lines``: the lines said since the last turn (the whole list, replacing the one drawn).
- ``question``: the question waiting now (null: none); ``queue``: what waits behind the turn.
- ``status``: the status row; ``connection``: how the web bridge reaches the worker ("" when live).
- ``notice``: what a hidden tab is told (a question waits, a turn ended).
- ``rewound``: ``[first, last]``: a rewind undid the turns of those numbers; each one drawn says
  ``rewound`` (those not drawn yet come with it set).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from tui.protocol.events import Diff, PlanEntry, Presence, QueueItem
from tui.protocol.messages import PendingQuestion, ToolRecord, TurnRecord
from tui.protocol.wording import ASKING, RUNNING, attached_text, question_words, steps, tool_error, who

__all__ = [
    "ASKING",
    "DiffLine",
    "DiffView",
    "LineView",
    "Notice",
    "PageChange",
    "QueueView",
    "StatusView",
    "StepView",
    "ToolView",
    "TurnPage",
    "TurnView",
    "diff_view",
    "line_view",
    "plan_lines",
    "queue_view",
    "status_view",
    "tool_view",
    "turn_view",
]


_PLAN_MARKS = {"completed": "✓ ", "in_progress": "▸ ", "pending": "○ "}


class _View(BaseModel):
    model_config = ConfigDict(defer_build=True)


class LineView(_View):
    """A line of the transcript: its words and its style class (``note``, ``answered``,
    ``child``, ``worker``, ``model``, ``line``)."""

    text: str
    style: str = "line"


class DiffLine(_View):
    sign: Literal["-", "+"]
    text: str


class DiffView(_View):
    """An edit of one file: the lines taken out and put in (what both sides share left out)."""

    path: str
    lines: list[DiffLine] = []


class ToolView(_View):
    """A tool call as the page draws it."""

    call_id: str
    title: str
    """Its title, else its name."""
    status: str
    code: str = ""
    """A program's code (its ``code`` argument)."""
    args: str = ""
    """Its other arguments, one ``name: value`` a line (none for a question, or a titled call)."""
    output: str = ""
    diffs: list[DiffView] = []
    error: str = ""
    value: str = ""
    """What it returned, as text (none for a question: its answered line says it)."""
    open: bool = False
    """Drawn unfolded: running, failed, or short."""


class StepView(_View):
    """One piece of a turn, in the order it came: reply text, a tool call, or a line."""

    kind: Literal["text", "tool", "line"]
    text: str = ""
    style: str = ""
    tool: ToolView | None = None


class TurnView(_View):
    """A turn as the page draws it."""

    turn_id: str
    number: str
    """``#3`` (``#?`` when the record does not say)."""
    who: str
    """Who sent it, with what (``ana (participant) (browser)``), or ``note``."""
    prompt: str
    outcome: str
    """``running`` until it ends, then ``completed``, ``failed`` or ``interrupted``."""
    rewound: bool = False
    """A later rewind undid it (docs/files.md): the page says ``rewound`` beside its outcome."""
    error: str = ""
    before: list[LineView] = []
    """The lines said before it (notes since the turn before, a child started from outside)."""
    thinking: str = ""
    plan: list[str] = []
    steps: list[StepView] = []


class StatusView(_View):
    """The status row."""

    state: str
    """``idle``, ``working``, ``asking``, or ``ended`` once the worker is gone."""
    parts: list[str]
    """The row's fields in words (agent and model, tokens, activity, children)."""
    here: str = ""
    """Who is attached (``here: root, ana (collaborator) · browser``)."""
    working: bool = False


class QueueView(_View):
    """The prompts waiting behind the running turn."""

    head: str
    prompts: list[str] = []


class Notice(_View):
    """What a hidden tab is told."""

    title: str
    body: str = ""


class PageChange(_View):
    """One change of the session as the page draws it (see the module's docstring)."""

    type: str
    """The attachment's change it stands for (``TurnStarted``, ``Line`` …), or ``Snapshot``."""
    words: str = ""
    """What it says, when it says something (a line's text)."""
    style: str = ""
    snapshot: bool = False
    has_more: bool = False
    """With a snapshot: older turns can be read (``GET …/turns?before=``)."""
    reply_format: str | None = None
    turns: list[TurnView] | None = None
    turn_id: str | None = None
    at: int | None = None
    append: bool = False
    step: StepView | None = None
    thinking: str | None = None
    plan: list[str] | None = None
    lines: list[LineView] | None = None
    question: PendingQuestion | None = None
    queue: QueueView | None = None
    status: StatusView | None = None
    connection: str | None = None
    notice: Notice | None = None
    rewound: list[int] | None = None

    def wire(self) -> bytes:
        """As JSON: the fields it sets only (a `question` set to null is sent: none waits)."""
        return self.model_dump_json(exclude_unset=True).encode()


class TurnPage(_View):
    """Older turns (``GET /api/sessions/{id}/turns?before=``), oldest first."""

    turns: list[TurnView] = []
    has_more: bool = False


# --- records in words ---------------------------------------------------------------------------
def line_view(text: str, kind: str = "") -> LineView:
    """A line with the style its words or its kind give it."""
    if kind == "answered" or text.startswith(("answered by ", "question dismissed", "question cancelled")):
        return LineView(text=text, style="answered")
    if text.startswith("child "):
        return LineView(text=text, style="child")
    if text.startswith(("note", "the reply was cut", "the model refused", "the turn stopped")):
        return LineView(text=text, style="note")
    return LineView(text=text, style=kind or "line")


def diff_view(diff: Diff) -> DiffView:
    """The lines `diff` takes out and puts in, what both sides share at either end left out."""
    old = [] if diff.old is None else diff.old.split("\n")
    new = diff.new.split("\n")
    a = 0
    while a < len(old) and a < len(new) and old[a] == new[a]:
        a += 1
    b = 0
    while b < len(old) - a and b < len(new) - a and old[len(old) - 1 - b] == new[len(new) - 1 - b]:
        b += 1
    lines = [DiffLine(sign="-", text=t) for t in old[a : len(old) - b]]
    lines += [DiffLine(sign="+", text=t) for t in new[a : len(new) - b]]
    return DiffView(path=diff.path, lines=lines)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def tool_view(tool: ToolRecord) -> ToolView:
    """A tool call in words: its code, or its arguments one a line, its output, diffs and value."""
    title = tool.title or question_words(tool.name, tool.args) or tool.name
    code = tool.args.get("code")
    args = ""
    if not isinstance(code, str):
        code = ""
        if tool.name not in ASKING and title == tool.name and tool.args:
            args = "\n".join(f"{k}: {_text(v)}" for k, v in tool.args.items())
    short = tool.output.count("\n") < 12 and code.count("\n") < 12
    value = ""
    if not tool.error and tool.value is not None and tool.name not in ASKING:
        value = _text(tool.value)
    return ToolView(
        call_id=tool.call_id,
        title=title,
        status=tool.status,
        code=code,
        args=args,
        output=tool.output,
        diffs=[diff_view(d) for d in tool.diffs],
        error=tool_error(tool.error),
        value=value,
        open=tool.status in (RUNNING, "error") or short,
    )


def plan_lines(plan: list[PlanEntry]) -> list[str]:
    """A plan's entries, each marked done (✓), under way (▸) or to do (○)."""
    return [_PLAN_MARKS.get(p.status, "") + p.content for p in plan]


def turn_view(record: TurnRecord, before: list[LineView] | None = None) -> TurnView:
    """A turn in words: who sent it, its steps in the order they came, how it ended.

    Args:
        record: the turn as it stands (running: no outcome).
        before: the lines shown before it, when the client saw them said (else the record's).
    """
    said: list[StepView] = []
    for step in steps(record):
        if step[0] == "tool":
            said.append(StepView(kind="tool", tool=tool_view(step[1])))
        elif step[0] == "line":
            line = line_view(step[1])
            said.append(StepView(kind="line", text=line.text, style=line.style))
        else:
            said.append(StepView(kind="text", text=step[1]))
    kept = [line_view(line.text, "note") for line in record.lines if line.kind == "before"]
    return TurnView(
        turn_id=record.turn_id,
        number=f"#{record.number or '?'}",
        who="note" if record.origin == "note" else who(record.by, record.client_id),
        prompt=record.prompt,
        outcome=record.outcome or "running",
        rewound=record.rewound,
        error=record.error or "",
        before=kept if before is None else before,
        thinking=record.thinking,
        plan=plan_lines(record.plan),
        steps=said,
    )


def _tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def status_view(
    state: str,
    *,
    agent: str | None,
    model: str | None,
    tokens: tuple[int, int],
    attached: list[Presence] | tuple[Presence, ...],
    activity: str = "",
    children: dict[str, int] | None = None,
) -> StatusView:
    """The status row in words."""
    what = agent or "model"
    parts = [what + (f" · {model}" if model else "")]
    if any(tokens):  # a python session spends none: no "tokens 0 in / 0 out", as in the terminal
        parts.append(f"tokens {_tokens(tokens[0])} in / {_tokens(tokens[1])} out")
    if activity:
        parts.append(activity)
    live = {k: v for k, v in (children or {}).items() if v}
    if live:
        parts.append("children " + ", ".join(f"{v} {k}" for k, v in live.items()))
    here = f"here: {attached_text(attached)}" if attached else ""
    return StatusView(state=state, parts=parts, here=here, working=state in ("working", "asking"))


def queue_view(queue: list[QueueItem] | tuple[QueueItem, ...], held: bool) -> QueueView:
    """What waits behind the running turn, and whether it waits for ``/resume``."""
    head = "queued" + (" (held after the interrupt: /resume runs it)" if held else "")
    return QueueView(head=head, prompts=[item.prompt for item in queue])
