"""A model session end to end: real `tui` processes and a real worker whose ``[models.local]``
profile points at the tests' loopback OpenAI-compatible server."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_model_server import FakeModelServer, Text
from helpers import wait_until

from client.helpers import kill_worker, tui
from tui.codemode.sandbox import landlock_abi
from tui.store import StatePaths, is_live


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as running:
        config = Path(os.environ["TUI_CONFIG_DIR"]) / "config.toml"
        config.write_text(
            f'[models.local]\nprovider = "openai"\nmodel = "fake-1"\nbase_url = "{running.url}"\n'
            "context_window = 8192\n"
        )
        yield running


def _said(request: dict[str, object]) -> str:
    return json.dumps(request["messages"])


def test_a_model_session_answers_runs_python_and_survives_its_worker(
    state_dir: Path, server: FakeModelServer
) -> None:
    if shutil.which("bwrap") is None and landlock_abi() < 1:
        pytest.skip("neither bubblewrap nor Landlock is available (apt install bubblewrap)")
    listed = tui("models")
    assert listed.returncode == 0 and "local" in listed.stdout and "none needed" in listed.stdout

    out = tui("send", "--new", "--model", "local", "hello there", "--wait")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "You said: hello there"
    sid = out.stderr.strip().splitlines()[0]

    ran = tui("send", sid, "run x = 6 * 7\nprint('x is', x)", "--wait")
    assert ran.returncode == 0, ran.stderr
    assert "x is 42" in _said(server.requests[-1])  # the model read what the program printed
    assert ran.stdout.startswith("Running it.\n") and "x is 42" in ran.stdout

    kill_worker(state_dir, sid)
    again = tui("send", sid, "and now?", "--wait")
    assert again.returncode == 0, again.stderr
    remembered = _said(server.requests[-1])
    assert "hello there" in remembered and "x is 42" in remembered
    assert "started afresh" in remembered  # the new interpreter lost x, and the model is told

    server.script(Text([]))
    empty = tui("send", sid, "say nothing", "--wait")
    assert empty.returncode == 5, empty.stderr


def test_a_model_that_does_not_resolve_is_refused_before_a_session_is_made(state_dir: Path) -> None:
    out = tui("send", "--new", "--model", "nope", "hi", "--wait")
    assert out.returncode == 1
    assert "no model 'nope'" in out.stderr and "Traceback" not in out.stderr
    assert json.loads(tui("sessions", "--json").stdout) == []


def test_an_idle_model_session_lets_its_worker_go_and_comes_back_whole(
    state_dir: Path, server: FakeModelServer
) -> None:
    """[workers] idle_timeout lets a model session's idle worker go; a python session keeps its
    worker (its variables would be lost) unless python_idle_timeout says otherwise."""
    config = Path(os.environ["TUI_CONFIG_DIR"]) / "config.toml"
    config.write_text(config.read_text() + '\n[workers]\nidle_timeout = "3s"\n')
    py = tui("send", "--new", "x = 1", "--wait")
    assert py.returncode == 0, py.stderr
    python_sid = py.stderr.split()[0]
    out = tui("send", "--new", "--model", "local", "hello there", "--wait")
    assert out.returncode == 0, out.stderr
    sid = out.stderr.split()[0]
    state = StatePaths(state_dir)
    wait_until(lambda: not is_live(state.session(sid).lock), "the idle model worker to leave")
    last = json.loads(state.session(sid).journal.read_text().splitlines()[-1])
    assert (last["type"], last.get("reason")) == ("worker_leaving", "idle for 3 s"), last
    rows = {row["id"]: row for row in json.loads(tui("sessions", "--json").stdout)}
    assert rows[python_sid]["live"] and rows[python_sid]["idle_timeout"] is None
    assert rows[python_sid]["memory"] > 0 and rows[python_sid]["idle_seconds"] >= 0

    again = tui("send", sid[:8], "and now?", "--wait")
    assert again.returncode == 0, again.stderr
    assert "hello there" in _said(server.requests[-1]), "the model's conversation came back whole"

    config.write_text(config.read_text() + 'python_idle_timeout = "3s"\n')
    assert tui("stop", python_sid[:8]).returncode == 0
    assert tui("send", python_sid[:8], "y = 2", "--wait").returncode == 0
    wait_until(lambda: not is_live(state.session(python_sid).lock), "the configured python worker to leave")


def test_a_long_reply_reaches_the_journal_in_few_events_whole_and_in_order(
    state_dir: Path, server: FakeModelServer
) -> None:
    tokens = [f"w{i} " for i in range(2000)]
    server.script(Text(tokens))
    out = tui("send", "--new", "--model", "local", "a long answer please", "--wait")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "".join(tokens).strip()
    sid = out.stderr.strip().splitlines()[0]
    lines = (state_dir / "sessions" / sid / "journal.jsonl").read_text().splitlines()
    texts = [e["text"] for e in map(json.loads, lines) if e["type"] == "text"]
    assert "".join(texts) == "".join(tokens)
    assert len(texts) < len(tokens) // 2  # batched, not one event a token
