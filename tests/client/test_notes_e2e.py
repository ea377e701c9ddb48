"""`tui transcript` of an ACP agent's session: a note said during a turn is printed in that turn,
where it came; a note said between turns, between them."""

from __future__ import annotations

from pathlib import Path

import pytest

from client.helpers import tui


@pytest.fixture(autouse=True)
def tester(acp_tester: Path) -> Path:
    """The test agent configured as ``[agents.tester]`` (`acp_tester`), with a notes.txt to read."""
    (acp_tester / "notes.txt").write_text("first\n")
    return acp_tester


def _at(lines: list[str], text: str) -> int:
    found = [i for i, line in enumerate(lines) if text in line]
    assert len(found) == 1, f"{text!r} is on lines {found} of {lines}"
    return found[0]


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_a_note_said_in_a_turn_is_printed_in_it_where_it_came(fmt: str) -> None:
    sent = tui("send", "--new", "--agent", "tester", "read the notes", "--wait")
    assert sent.returncode == 0, sent.stderr
    sid = sent.stderr.strip().splitlines()[0]
    out = tui("transcript", sid, "--format", fmt)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    prompt = _at(lines, "Working on: read the notes")  # the reply's first line
    refused = _at(lines, "refused the agent's read of")
    assert _at(lines, "This agent runs as you") < prompt  # said when the worker started
    assert prompt < _at(lines, "notes.txt says") < refused < _at(lines, "outside.txt was refused")
