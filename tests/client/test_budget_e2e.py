"""Budgets end to end (docs/agents.md, "Budgets"): real `tui` processes and real workers; a model
session against the loopback provider server (its usage priced by genai-prices as ``gpt-4o``), the
ACP test agent reporting its own cost, a python session's turns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_model_server import Call, FakeModelServer, Hang, Text
from helpers import TIMEOUT, wait_until

from client.helpers import tui
from tui.store import StatePaths


def _events(state_dir: Path, sid: str) -> list[dict[str, object]]:
    path = StatePaths(state_dir).session(sid).journal
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _ended(state_dir: Path, sid: str) -> list[dict[str, object]]:
    return [e for e in _events(state_dir, sid) if e["type"] == "turn_ended"]


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as running:
        config = Path(os.environ["TUI_CONFIG_DIR"]) / "config.toml"
        config.write_text(
            f'[models.local]\nprovider = "openai"\nmodel = "gpt-4o"\nbase_url = "{running.url}"\n'
            "context_window = 8192\n"
        )
        yield running


def test_a_model_session_stops_at_its_budget_asks_and_goes_on_when_raised(
    state_dir: Path, server: FakeModelServer, tmp_path: Path
) -> None:
    told = tmp_path / "told.txt"
    config = Path(os.environ["TUI_CONFIG_DIR"]) / "config.toml"
    config.write_text(
        config.read_text()
        + f'[notify]\non = ["budget"]\ncommand = ["sh", "-c", "echo \\"$TUI_NOTIFY_TITLE\\" >> {told}"]\n'
    )
    # One request of 20,000 tokens in and 1,000 out costs $0.06 at gpt-4o's price: past $0.05.
    server.script(Call("run_python", {"code": "print('never run')"}, usage=(20_000, 1_000)))
    out = tui("send", "--new", "--model", "local", "--cost", "0.05", "do some work", "--wait")
    assert out.returncode == 7, out.stderr
    assert "stopped at the session's budget" in out.stderr
    sid = out.stderr.split()[0]
    assert len(server.requests) == 1, "no request after the one that crossed the budget"
    assert not any(e["type"] == "tool_started" for e in _events(state_dir, sid)), "nor the call it asked for"
    ended = _ended(state_dir, sid)[-1]
    assert ended["stop_reason"] == "budget" and ended["cost"] == pytest.approx(0.06)
    assert ended["usage"] == {"input": 20_000, "output": 1_000}, ended  # its tokens count too
    said = [
        e for e in _events(state_dir, sid) if e["type"] == "note" and "reached its budget" in str(e["text"])
    ]
    assert said[0]["source"] == "tui", said  # tui's line, not the model's
    wait_until(told.exists, "[notify] to be told")
    assert "stopped at the session's budget" in told.read_text()

    # It asks, from any client, whether to raise the limit; a new turn meanwhile is refused.
    asked = tui("send", sid, "more", "--wait")
    assert asked.returncode == 3, asked.stderr  # the pending question, answerable with `tui answer`
    assert "reached its budget (cost $0.06 of $0.05)" in asked.stderr and "raise to $0.11" in asked.stderr
    shown = tui("budget", sid)
    assert shown.returncode == 0 and "cost\t$0.06\t$0.05" in shown.stdout, shown.stdout
    # The question is the session's, of the turn that stopped: not a turn of its own.
    assert "turns\t1\t-" in shown.stdout, shown.stdout
    [asking] = [e for e in _events(state_dir, sid) if e["type"] == "question_asked"]
    assert asking["turn_id"] == ended["turn_id"]
    assert sum(e["type"] == "turn_started" for e in _events(state_dir, sid)) == 1

    assert tui("answer", sid, "--option", "1").returncode == 0
    wait_until(lambda: len(_ended(state_dir, sid)) == 2, "the raised turn to go on and end")
    went_on = _ended(state_dir, sid)[-1]
    assert went_on["outcome"] == "completed" and went_on["stop_reason"] is None, went_on
    assert "turns\t2\t-" in tui("budget", sid).stdout  # the stopped turn and the one going on
    going_on = json.dumps(server.requests[-1]["messages"])
    assert "budget was raised: go on" in going_on and "do some work" in going_on  # it knows where it was
    limits = [e for e in _events(state_dir, sid) if e["type"] == "budget_set"]
    assert limits[-1]["budget"]["cost"] == pytest.approx(0.11) and limits[-1]["by"]["kind"] == "owner"


def test_a_model_sessions_wall_time_limit_stops_a_request_that_does_not_end(
    state_dir: Path, server: FakeModelServer
) -> None:
    # The first request is answered and calls a tool; the second sends a word and then nothing.
    server.script(Call("run_python", {"code": "print(6 * 7)"}), Hang(["Still "]))
    sending = subprocess.Popen(
        [sys.executable, "-m", "tui", "send", "--new", "--model", "local", "--time", "1h", "work", "--wait"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(lambda: len(server.requests) == 2, "the request that does not end")
    [sid] = [p.name for p in StatePaths(state_dir).sessions.iterdir()]
    # Lowered while it hangs: the limit passes (it has passed, or it will in under a second).
    assert tui("budget", sid, "--time", "1s").returncode == 0
    _, err = sending.communicate(timeout=TIMEOUT)
    assert sending.returncode == 7 and "stopped at the session's budget" in err, err
    ended = _ended(state_dir, sid)[-1]
    # What the turn spent before is kept: the first request's usage.
    assert ended["stop_reason"] == "budget" and ended["usage"] == {"input": 20, "output": 8}, ended
    said = [str(e["text"]) for e in _events(state_dir, sid) if e["type"] == "note"]
    assert any("wall time" in t and "the turn stops here" in t for t in said), said
    asked = [e for e in _events(state_dir, sid) if e["type"] == "question_asked"]
    assert asked and asked[-1]["turn_id"] == ended["turn_id"] and "raise to" in json.dumps(asked[-1])


def test_an_acp_agent_is_stopped_at_its_own_reported_cost(state_dir: Path, acp_tester: Path) -> None:
    sent = tui("send", "--new", "--agent", "tester", "--cost", "0.05", "spend freely", "--wait")
    assert sent.returncode == 7, sent.stderr
    sid = sent.stderr.split()[0]
    ended = _ended(state_dir, sid)[-1]
    assert ended["outcome"] == "completed" and ended["stop_reason"] == "budget", ended
    assert ended["cost"] >= 0.06 and "spent 0.06" in str(ended["reply"])  # stopped at the crossing
    assert "spent 0.6" not in str(ended["reply"]), "the agent was cancelled, not left to run"
    questions = [e for e in _events(state_dir, sid) if e["type"] == "question_asked"]
    assert "reached its budget" in str(questions[-1]["text"])


def test_an_acp_agents_total_after_a_restart_is_not_counted_again(state_dir: Path, acp_tester: Path) -> None:
    # The test agent reports its ACP session's total: $0.42, then $0.43 (kept across a load).
    sent = tui("send", "--new", "--agent", "tester", "usage", "--wait")
    assert sent.returncode == 0, sent.stderr
    sid = sent.stderr.split()[0]
    assert tui("stop", sid).returncode == 0
    again = tui("send", sid, "usage", "--wait")  # a new worker, whose agent loads the same session
    assert again.returncode == 0, again.stderr
    assert sum(e["type"] == "worker_started" for e in _events(state_dir, sid)) == 2
    assert [e["cost"] for e in _ended(state_dir, sid)] == [0.42, 0.01]
    shown = tui("budget", sid).stdout
    assert "cost\t$0.43\t-" in shown, shown  # not $0.85: the whole total counted again


def test_a_python_sessions_turns_are_capped_and_tui_budget_changes_them(state_dir: Path) -> None:
    made = tui("send", "--new", "--turns", "2", "x = 1", "--wait")
    assert made.returncode == 0, made.stderr
    sid = made.stderr.split()[0]
    assert tui("send", sid, "print(x + 1)", "--wait").stdout.strip() == "2"
    refused = tui("send", sid, "print(x + 2)", "--wait")
    assert refused.returncode == 7
    assert "reached its budget (2 turns of 2)" in refused.stderr and "--turns" in refused.stderr
    assert "Traceback" not in refused.stderr

    raised = tui("budget", sid[:8], "--turns", "3", "--cost", "1.5", "--time", "2h")
    assert raised.returncode == 0, raised.stderr
    assert "budget is now $1.50, 3 turns, 2 h" in raised.stderr
    assert "turns\t2\t3" in raised.stdout and "cost\t$0.00\t$1.50" in raised.stdout
    assert tui("send", sid, "print(x + 2)", "--wait").stdout.strip() == "3"
    # A wall time limit stops the turn running when it passes: 2 s more than the turns worked.
    worked = next(row for row in tui("budget", sid).stdout.splitlines() if row.startswith("time"))
    limit = int(worked.split("\t")[1].split()[0]) + 2
    assert tui("budget", sid, "--time", f"{limit}s", "--turns", "0").returncode == 0
    slow = tui("send", sid, "import time\ntime.sleep(600)", "--wait")
    assert slow.returncode == 7 and "stopped at the session's budget" in slow.stderr, slow.stderr
    assert _ended(state_dir, sid)[-1]["stop_reason"] == "budget"
    bad = tui("budget", sid, "--time", "soon")
    assert bad.returncode == 2 and bad.stderr.startswith("tui: --time:"), bad.stderr


def test_a_childs_spend_counts_in_its_parents_budget(state_dir: Path, server: FakeModelServer) -> None:
    # delegate() takes the child's budget as `tui send --new` does.
    parent = tui("send", "--new", "--cost", "0.05", "print(delegate('print(5)', turns=1))", "--wait")
    assert parent.returncode == 0 and parent.stdout.strip() == "5", parent.stderr
    pid = parent.stderr.split()[0]
    first = next(e for e in _events(state_dir, pid) if e["type"] == "child_started")
    limits = [e for e in _events(state_dir, str(first["child_id"])) if e["type"] == "budget_set"]
    assert limits[0]["budget"]["turns"] == 1 and limits[0]["by"] is None
    server.script(Text(["costly"], usage=(20_000, 1_000)))  # $0.06 at gpt-4o's price
    child = tui("send", "--new", "--parent", pid, "--model", "local", "work for me", "--wait")
    assert child.returncode == 0, child.stderr  # the child has no limit of its own
    wait_until(lambda: any(e["type"] == "child_ended" for e in _events(state_dir, pid)), "the child to end")
    shown = tui("budget", pid)
    assert "cost\t$0.06\t$0.05" in shown.stdout, shown.stdout
    refused = tui("send", pid, "print(2)", "--wait")
    assert refused.returncode == 7 and "cost $0.06 of $0.05" in refused.stderr
