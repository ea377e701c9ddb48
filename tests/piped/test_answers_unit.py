"""Answers a script gives (`--answers`, `--default-answer`) turned into labels and free text."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.errors import InvalidRequest, UsageError
from tui.link.scripts import split
from tui.link.watch import QuestionPolicy, resolve_answer
from tui.piped import load_answers
from tui.protocol import Option, PendingQuestion


def _q(*labels: str, multiple: bool = False, freeform: bool = True, text: str = "Pick?") -> PendingQuestion:
    return PendingQuestion(
        turn_id="t",
        question_id="q",
        text=text,
        options=[Option(label=label) for label in labels],
        multiple=multiple,
        freeform=freeform,
    )


def test_numbers_labels_and_free_text() -> None:
    q = _q("yes", "no")
    assert resolve_answer(q, 2) == (["no"], None)
    assert resolve_answer(q, "1") == (["yes"], None)
    assert resolve_answer(q, "YES") == (["yes"], None)
    assert resolve_answer(q, "perhaps later") == ([], "perhaps later")
    assert resolve_answer(_q("a", "b", "c", multiple=True), [1, "c"]) == (["a", "c"], None)


def test_answers_that_do_not_fit_are_refused_with_the_options() -> None:
    with pytest.raises(InvalidRequest, match=r"1\. yes, 2\. no"):
        resolve_answer(_q("yes", "no", freeform=False), "maybe")
    with pytest.raises(InvalidRequest, match="takes one option"):
        resolve_answer(_q("yes", "no"), [1, 2])


def test_a_list_answers_in_order_and_a_map_by_question_text() -> None:
    ordered = QuestionPolicy(answers=["a", 2])
    assert ordered.prepared(_q("x")) == "a"
    assert ordered.prepared(_q("x")) == 2
    assert ordered.prepared(_q("x")) is None
    by_text = QuestionPolicy(answers={"Go?": "yes"})
    assert by_text.prepared(_q(text="Go?")) == "yes"
    assert by_text.prepared(_q(text="Stop?")) is None


def test_answer_files_in_json_and_toml(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('["yes", 2, [1, 3]]')
    assert load_answers(str(tmp_path / "a.json")) == ["yes", 2, [1, 3]]
    (tmp_path / "a.toml").write_text('answers = ["yes"]\n')
    assert load_answers(str(tmp_path / "a.toml")) == ["yes"]
    (tmp_path / "m.toml").write_text('"Proceed?" = 1\n"Files?" = [1, 2]\n')
    assert load_answers(str(tmp_path / "m.toml")) == {"Proceed?": 1, "Files?": [1, 2]}
    (tmp_path / "bad.json").write_text('{"q": {"nested": true}}')
    with pytest.raises(UsageError, match="not a label"):
        load_answers(str(tmp_path / "bad.json"))
    with pytest.raises(UsageError, match="cannot read"):
        load_answers(str(tmp_path / "missing.json"))


def test_a_line_ending_in_a_backslash_continues() -> None:
    assert [i.text for i in split(["a\\\n", "b\n", "c\n"], "lines")] == ["a\nb", "c"]
    assert [i.text for i in split(["x\\\n"], "lines")] == ["x"]


def test_a_viewer_is_told_who_answers_not_a_command_it_cannot_run() -> None:
    from types import SimpleNamespace
    from typing import cast

    from tui.link.base import AttachLink
    from tui.link.watch import describe_question
    from tui.protocol.principal import Principal

    sid = "3f2a1b2c00000000"

    def link(kind: str) -> AttachLink:
        principal = Principal(kind=kind, session_id=None if kind == "owner" else sid)  # type: ignore[arg-type]
        words = ("tui", "--remote", "lab")
        return cast(
            AttachLink,
            SimpleNamespace(session_id=sid, principal=principal, command=lambda *w: " ".join((*words, *w))),
        )

    q = _q("yes", "no", text="Proceed?")
    viewer = describe_question(link("viewer"), q)
    assert "tui --remote lab answer" not in viewer and "dismiss with" not in viewer
    assert "a viewer cannot answer or dismiss it" in viewer
    assert "`tui --remote lab attach 3f2a1b2c` follows the session meanwhile" in viewer
    assert "  1. yes" in viewer
    for kind in ("owner", "collaborator"):
        assert "tui --remote lab answer 3f2a1b2c --option 2" in describe_question(link(kind), q)
