"""A session's children as its events say them: the part of the reducer that keeps `ChildView`s.

`SessionState.apply` hands each `child_started`, `child_asking` and `child_ended` here and keeps
what comes back; the children's counts for the status row and the question a child waits on
for a person are read from the same views.
"""

from __future__ import annotations

from tui.protocol.events import ChildAsking, ChildEnded, ChildStarted
from tui.protocol.messages import ChildView, PendingQuestion

__all__ = ["asking", "counts", "ended", "question", "started"]

_CHILD_WORDS = {
    "running": "running",
    "asking": "waiting",
    "completed": "done",
    "failed": "failed",
    "interrupted": "failed",
}
"""A child's state as `status.children` counts it."""


def started(children: dict[str, ChildView], event: ChildStarted) -> dict[str, ChildView]:
    """The children once `event` started one."""
    return {
        **children,
        event.child_id: ChildView(
            child_id=event.child_id, prompt=event.prompt, agent=event.agent, model=event.model
        ),
    }


def asking(children: dict[str, ChildView], event: ChildAsking) -> dict[str, ChildView]:
    """The children once `event` said a child asks (or no longer does)."""
    child = children.get(event.child_id)
    if child is None or child.state not in ("running", "asking"):
        return children
    state = "running" if event.question is None else "asking"
    return {
        **children,
        event.child_id: child.model_copy(
            update={"question": event.question, "state": state, "answering": event.answering}
        ),
    }


def ended(children: dict[str, ChildView], event: ChildEnded) -> tuple[dict[str, ChildView], int, int, float]:
    """The children once `event` ended one, and the tokens in, out and USD it spent since it last
    ended (`child_ended` carries the child's totals, and a child followed again ends again)."""
    child = children.get(event.child_id)
    if child is not None:
        ending: dict[str, object] = {
            "state": event.outcome,
            "error": event.error,
            "question": None,
            "tokens_in": event.tokens_in,
            "tokens_out": event.tokens_out,
            "cost": event.cost,
        }
        children = {**children, event.child_id: child.model_copy(update=ending)}
    last = child if child is not None else ChildView(child_id=event.child_id)
    return (
        children,
        max(0, event.tokens_in - last.tokens_in),
        max(0, event.tokens_out - last.tokens_out),
        max(0.0, event.cost - last.cost),
    )


def question(children: dict[str, ChildView]) -> PendingQuestion | None:
    """The first child's question waiting for a person (not one its parent's own agent is
    answering), its text naming the child; answering its id in the parent answers it in the child."""
    for child in children.values():
        if child.question is not None and not child.answering:
            asked = child.question
            text = f"child {child.child_id[:8]} asks: {asked.text}"
            return PendingQuestion.model_validate({**asked.model_dump(), "text": text})
    return None


def counts(children: dict[str, ChildView]) -> dict[str, int]:
    """How many children stand how, in the status row's words: ``running``, ``waiting`` (for
    an answer), ``done``, ``failed`` (an interrupted child too); only those some child is in."""
    counted: dict[str, int] = {}
    for child in children.values():
        said = _CHILD_WORDS[child.state]
        counted[said] = counted.get(said, 0) + 1
    return {word: counted[word] for word in ("running", "waiting", "done", "failed") if word in counted}
