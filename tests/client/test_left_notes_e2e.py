"""`tui note`: a note left for a session's agent, journalled, shown with who left it, and given to
the agent with its next turn (a model, a python program, an ACP agent), through real workers."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_model_server import FakeModelServer
from helpers import wait_until

from client.helpers import new_session, tui


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as running:
        config = Path(os.environ["TUI_CONFIG_DIR"]) / "config.toml"
        config.write_text(
            f'[models.local]\nprovider = "openai"\nmodel = "fake-1"\nbase_url = "{running.url}"\n'
            "context_window = 8192\n"
        )
        yield running


def _users(request: dict[str, object]) -> list[str]:
    """The text of each user message of a request to the model, in order."""
    said = []
    for message in request["messages"]:  # type: ignore[attr-defined]
        if message.get("role") == "user":
            content = message["content"]
            said.append(content if isinstance(content, str) else json.dumps(content))
    return said


def test_a_note_reaches_the_model_as_a_message_before_the_next_prompt(
    state_dir: Path, server: FakeModelServer
) -> None:
    out = tui("send", "--new", "--model", "local", "hello there", "--wait")
    assert out.returncode == 0, out.stderr
    sid = out.stderr.strip().splitlines()[0]
    asked = len(server.requests)

    left = tui("note", sid[:8], "the build is green", "--source", "ci")
    assert left.returncode == 0, left.stderr
    assert f"session {sid[:8]} reads it with its next turn" in left.stderr
    assert len(server.requests) == asked  # an idle session is not woken into a turn by a note

    got = tui("send", sid[:8], "what now?", "--wait")
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "You said: what now?"
    users = _users(server.requests[-1])
    assert users[-1] == "what now?"
    assert "the build is green" in users[-2] and "from root via ci" in users[-2]

    again = tui("send", sid[:8], "and then?", "--wait")
    assert again.returncode == 0, again.stderr
    # Given once: the next turn's request has it only where the conversation had it before.
    assert sum("the build is green" in text for text in _users(server.requests[-1])) == 1

    shown = tui("transcript", sid[:8])
    assert "note from root via ci: the build is green" in shown.stdout


def test_a_python_program_reads_its_notes_once_and_now_starts_a_turn(state_dir: Path) -> None:
    sid = new_session(state_dir, "x = 1")
    assert tui("note", sid[:8], "deploy", "finished", "--source", "cron").returncode == 0
    read = tui("send", sid[:8], "for n in notes(): print(n['by'], n['source'], n['text'])", "--wait")
    assert read.returncode == 0, read.stderr
    assert read.stdout == "root cron deploy finished\n"
    again = tui("send", sid[:8], "print(notes())", "--wait")
    assert again.stdout == "[]\n"

    now = tui("note", sid[:8], "look now", "--now")
    assert now.returncode == 0, now.stderr
    assert "it started turn" in now.stderr

    def ended() -> bool:
        out = tui("transcript", sid[:8], "--format", "jsonl").stdout
        return sum(json.loads(line)["type"] == "turn_ended" for line in out.splitlines()) == 4

    wait_until(ended, "the note's own turn to end")
    shown = tui("transcript", sid[:8]).stdout
    assert "note from root: look now" in shown


def test_a_note_is_the_first_text_block_of_an_acp_agents_next_prompt(acp_tester: Path) -> None:
    sent = tui("send", "--new", "--agent", "tester", "hello", "--wait")
    assert sent.returncode == 0, sent.stderr
    sid = sent.stderr.strip().splitlines()[0]
    assert tui("note", sid[:8], "the tests pass", "--source", "ci").returncode == 0
    got = tui("send", sid[:8], "go on", "--wait")
    assert got.returncode == 0, got.stderr
    worked = got.stdout.split("Working on: ", 1)[1]
    assert worked.index("the tests pass") < worked.index("go on")


def test_a_note_without_text_says_what_to_type() -> None:
    out = tui("note", "abc", " ")
    assert out.returncode == 2 and "tui note ID 'the build is green'" in out.stderr
