"""`tui.editor.shapes`: a session's events, questions and prompts in ACP's terms (unit tests of one
piece; `tests/client/test_editor_e2e.py` runs them end to end)."""

from __future__ import annotations

import acp
import pytest
from acp import schema

from tui.editor.shapes import OUTPUT_KEPT, Shaper, permission_options, prompt_text, stop_reason, usage_of
from tui.protocol import Option, Question, ToolOutput, ToolStarted, TurnEnded, TurnStarted
from tui.protocol.events import By, StopReason


def test_another_clients_turn_names_who_sent_it_and_the_editors_own_is_not_said_back() -> None:
    shaper = Shaper(own_requests={"mine"})
    other = TurnStarted(turn_id="t1", prompt="run it", client_id="tui:vm:7", by=By(name="ana"))
    [said] = shaper.updates(other)
    assert said.content.text == "[ana (terminal)] run it"
    assert shaper.updates(TurnStarted(turn_id="t2", prompt="mine", request_id="mine")) == []


def test_a_failed_turn_of_another_client_is_said_and_the_editors_own_is_its_answer() -> None:
    shaper = Shaper(own_turns={"t2"})
    [said] = shaper.updates(TurnEnded(turn_id="t1", outcome="failed", error="boom"))
    assert "the turn failed: boom" in said.content.text
    assert shaper.updates(TurnEnded(turn_id="t2", outcome="failed", error="boom")) == []


def test_a_tool_calls_output_is_said_again_whole_up_to_its_last_16_kib() -> None:
    shaper = Shaper()
    [started] = shaper.updates(ToolStarted(turn_id="t", call_id="c", name="run", kind="weird"))
    assert started.kind == "other" and started.status == "in_progress"
    shaper.updates(ToolOutput(turn_id="t", call_id="c", text="a" * OUTPUT_KEPT))
    [update] = shaper.updates(ToolOutput(turn_id="t", call_id="c", text="tail"))
    [content] = update.content
    assert len(content.content.text) == OUTPUT_KEPT and content.content.text.endswith("tail")


def test_permission_options_keep_an_agents_kinds_and_read_others_by_their_words() -> None:
    question = Question(
        turn_id="t",
        question_id="q",
        text="Allow?",
        options=[
            Option(label="Allow (2)", description="allow always"),
            Option(label="Reject", description="reject once — why not"),
            Option(label="yes"),
            Option(label="No thanks"),
        ],
    )
    kinds = [(o.option_id, o.kind) for o in permission_options(question)]
    assert kinds == [("1", "allow_always"), ("2", "reject_once"), ("3", "allow_once"), ("4", "reject_once")]


def test_a_prompt_keeps_text_and_context_takes_images_and_refuses_sound() -> None:
    notes = acp.resource_block(acp.embedded_text_resource("file:///n.txt", "hi"))
    link = acp.resource_link_block("spec", "file:///spec.md")
    text, pictures = prompt_text([acp.text_block("read"), notes, link, acp.image_block("aGk=", "image/png")])
    assert text == "read\nfile:///n.txt:\n```\nhi\n```\nfile:///spec.md"
    assert [(p.data, p.name) for p in pictures] == [(b"hi", "image-1.png")]
    with pytest.raises(ValueError, match="audio block is not taken here"):
        prompt_text([acp.audio_block("aGk=", "audio/wav")])


def test_usage_is_said_only_when_the_turn_counted_tokens() -> None:
    assert usage_of({}) is None
    usage = usage_of({"input": 10, "output": 5, "cached": 3})
    assert isinstance(usage, schema.Usage)
    assert (usage.total_tokens, usage.input_tokens, usage.output_tokens, usage.cached_read_tokens) == (
        15,
        10,
        5,
        3,
    )


@pytest.mark.parametrize(
    ("outcome", "stopped", "said"),
    [
        ("completed", None, "end_turn"),
        ("completed", "max_tokens", "max_tokens"),
        ("completed", "refusal", "refusal"),
        ("completed", "max_turn_requests", "max_turn_requests"),
        ("interrupted", "max_tokens", "cancelled"),
    ],
)
def test_a_turns_stop_reason_is_acps(outcome: str, stopped: StopReason | None, said: str) -> None:
    assert stop_reason(outcome, stopped) == said


_SAMPLE = """
import json, sys
if sys.argv[1] == "deferred":
    from tui.editor import load_acp
    load_acp()
from acp import schema
out = {"deferred": not schema.PromptRequest.__pydantic_complete__}
note = schema.SessionNotification.model_validate({"sessionId": "s", "update": {
    "sessionUpdate": "tool_call", "toolCallId": "c", "title": "run", "kind": "execute",
    "status": "in_progress", "content": [{"type": "content", "content": {"type": "text", "text": "x"}}]}})
out["dump"] = note.model_dump(mode="json", by_alias=True, exclude_none=True)
try:
    schema.PromptRequest.model_validate({"sessionId": 3})
except Exception as exc:
    out["error"] = [(e["loc"], e["type"]) for e in exc.errors()]
print(json.dumps(out))
"""


def test_acp_loaded_for_tui_acp_validates_and_dumps_as_the_package_does() -> None:
    """`load_acp` (what `tui acp` imports before answering an editor) builds acp's models as they
    are used, and they read and write ACP exactly as when the package is imported plainly."""
    import json
    import subprocess
    import sys

    def run(how: str) -> dict[str, object]:
        done = subprocess.run(
            [sys.executable, "-c", _SAMPLE, how], capture_output=True, text=True, check=True
        )
        got: dict[str, object] = json.loads(done.stdout)
        return got

    deferred, plain = run("deferred"), run("plain")
    assert deferred.pop("deferred") is True and plain.pop("deferred") is False
    assert deferred == plain and plain["error"]


def test_a_notifications_params_are_the_packages_dump_and_a_batch_is_its_lines() -> None:
    """`notification` (a ``session/update`` built without the package's notification model),
    `Shaper.dumped` (a load's replay, shaped straight into dicts) and `EditorLines.send_many` (a
    load's replay in one write) put on the wire exactly what the package's model and one
    ``json.dumps`` line per message gave, for every kind of update."""
    import asyncio
    import json

    from tui.editor.lines import EditorLines
    from tui.editor.session import dump, notification
    from tui.editor.shapes import updates_of_settings
    from tui.protocol import AgentInfo, Info, Note, Plan, TextChunk, Thinking, ToolEnded, ToolUpdated
    from tui.protocol.events import AgentCommand, Diff, PlanEntry

    shaper = Shaper()
    events = [
        TurnStarted(seq=1, turn_id="t", prompt="héllo ✓", origin="user", by=By(kind="owner")),
        TextChunk(seq=2, turn_id="t", text='a "reply"\n'),
        Thinking(seq=3, turn_id="t", text="hmm"),
        Plan(seq=4, turn_id="t", entries=[PlanEntry(content="step", status="pending")]),
        ToolStarted(seq=5, turn_id="t", call_id="c", name="edit", args={"path": "a"}, locations=["a"]),
        ToolUpdated(seq=6, turn_id="t", call_id="c", output="out", diffs=[Diff(path="a", old="x", new="y")]),
        ToolOutput(seq=7, turn_id="t", call_id="c", text="more"),
        ToolEnded(seq=8, turn_id="t", call_id="c", status="completed", value="42"),
        TurnEnded(seq=9, turn_id="t", outcome="failed", error="boom"),
        Note(seq=10, text="a note"),
    ]
    updates = [u for e in events for u in shaper.updates(e)]
    # A load's replay dumps them as it shapes them (a prompt, a reply, a thought as plain dicts).
    replayer = Shaper()
    dumped = [d for e in events for d in replayer.dumped(e)]
    assert json.dumps(dumped) == json.dumps([dump(u) for u in updates])
    said = AgentInfo(seq=11, commands=[AgentCommand(name="go", description="go on")], mode="ask")
    updates += updates_of_settings(
        said, Info(version="0", session_id="s", epoch=1, agent="tester", models=["m1", "m2"])
    )[1]
    assert len({u.session_update for u in updates}) >= 9
    for update in updates:
        note = schema.SessionNotification(session_id="s", update=update)
        assert json.dumps(notification("s", update)) == json.dumps(dump(note))

    class Pipe:
        def __init__(self) -> None:
            self.data = b""

        def write(self, data: bytes) -> None:
            self.data += data

        async def drain(self) -> None:
            pass

    messages = [
        {"jsonrpc": "2.0", "method": "session/update", "params": notification("s", u)} for u in updates
    ]
    one, many = Pipe(), Pipe()

    async def send() -> None:
        for message in messages:
            await EditorLines(None, one).send(message)  # type: ignore[arg-type]
        await EditorLines(None, many).send_many(messages)  # type: ignore[arg-type]

    asyncio.run(send())
    assert (
        many.data
        == one.data
        == b"".join((json.dumps(m, separators=(",", ":")) + "\n").encode() for m in messages)
    )
