"""What a delegated child may reach and how many may run, through real `tui send` sessions and
their workers: config.toml's ``[children]`` (docs/agents.md, "Children: what they may reach")."""

from __future__ import annotations

import os
from pathlib import Path

from client.helpers import sessions, tui
from tui.store import StatePaths, is_live

HOLD = "import time; time.sleep(3600)"
"""A child that runs (so it is never stopped to make room) until the test stops it."""
TRY = """
for _ in range({n}):
    try:
        print('started', delegate({hold!r}, wait=False))
    except Exception as exc:
        print('refused:', exc)
"""


def configure(text: str) -> None:
    Path(os.environ["TUI_CONFIG_DIR"], "config.toml").write_text(text)


def live_children(state_dir: Path) -> list[str]:
    state = StatePaths(state_dir)
    return [r["id"] for r in sessions() if r["parent_id"] and is_live(state.session(r["id"]).lock)]


def test_a_program_starts_no_agent_or_model_child_unless_config_toml_allows_it(state_dir: Path) -> None:
    program = (
        "for kw in ({'agent': 'claude'}, {'model': 'local'}, {'agent': 'model'}):\n"
        "    try:\n        delegate('hello', **kw)\n"
        "    except Exception as exc:\n        print(exc)\n"
    )
    out = tui("send", "--new", program, "--wait")
    assert out.returncode == 0, out.stderr
    said = out.stdout.splitlines()
    assert len(said) == 3, out.stdout
    assert said[0].endswith('allow it in config.toml with [children] agents = ["claude"]'), said[0]
    assert said[1].endswith("allow it in config.toml with [children] models = true"), said[1]
    assert said[2] == said[1]
    assert [r for r in sessions() if r["parent_id"]] == [], "no child was made"


def test_children_stop_at_each_limit_and_self_delegation_at_its_depth(state_dir: Path) -> None:
    configure("[children]\nmax_live = 2\nmax_total = 2\nmax_depth = 2\n")
    # One session: two children wait, the third is refused by max_live.
    first = tui("send", "--new", TRY.format(n=3, hold=HOLD), "--wait")
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["started", "started", "refused:"], first.stdout
    assert lines[2].endswith("the most config.toml's [children] max_live = 2 allows; wait for one to end")
    # Another session: two run on this machine already, so its first is refused by max_total.
    second = tui("send", "--new", TRY.format(n=1, hold=HOLD), "--wait")
    assert second.returncode == 0, second.stderr
    assert second.stdout.startswith("refused: 2 child sessions run on this machine"), second.stdout
    assert "config.toml's [children] max_total = 2 allows" in second.stdout
    assert len(live_children(state_dir)) == 2
    assert tui("stop", "--all").returncode == 0

    # A delegated child whose turn ended is stopped: none is left running after a loop.
    loop = "for i in range(2):\n    print(delegate(f'print({i})').strip())"
    looped = tui("send", "--new", loop, "--wait")
    assert (looped.returncode, looped.stdout) == (0, "0\n1\n"), looped.stderr
    assert live_children(state_dir) == []

    # A program that delegates itself: two deep, then refused by max_depth.
    quine = (
        "S = %r\ntry:\n    print(delegate(S %% S).strip())\n"
        "except Exception as exc:\n    print('refused:', exc)\n"
    )
    deep = tui("send", "--new", quine % quine, "--wait")
    assert deep.returncode == 0, deep.stderr
    assert deep.stdout.startswith("refused: session "), deep.stdout
    assert "children may nest 2 deep: config.toml's [children] max_depth = 2" in deep.stdout
    top = deep.stderr.strip().splitlines()[0]
    rows = {r["id"]: r for r in sessions(all_=True)}
    chain = [top]
    while kids := [sid for sid, r in rows.items() if r["parent_id"] == chain[-1]]:
        chain.append(kids[0])
    assert len(chain) == 3, "the session, its child and its grandchild: nothing deeper"
