"""`tui context`: named sources whose latest values the agent is given at each turn, through real
workers: a command run in the session's sandbox, a file, pushed values; a model's request carries
them, a python program reads them with `context(NAME)`, and a new worker keeps them."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_model_server import FakeModelServer
from helpers import wait_until

from client.helpers import new_session, tui, worker_pid


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as running:
        config = Path(os.environ["TUI_CONFIG_DIR"]) / "config.toml"
        config.write_text(
            f'[models.local]\nprovider = "openai"\nmodel = "fake-1"\nbase_url = "{running.url}"\n'
            "context_window = 8192\n"
        )
        yield running


def _listed(sid: str) -> dict[str, list[str]]:
    out = tui("context", "list", sid[:8])
    assert out.returncode == 0, out.stderr
    rows = [line.split("\t") for line in out.stdout.splitlines()[1:]]
    return {row[0]: row for row in rows}


def _has_value(sid: str, *names: str) -> bool:
    rows = _listed(sid)
    return all(name in rows and rows[name][2] != "-" for name in names)


def test_each_sources_value_reaches_the_models_request(
    state_dir: Path, server: FakeModelServer, tmp_path: Path
) -> None:
    out = tui("send", "--new", "--model", "local", "hello", "--wait")
    assert out.returncode == 0, out.stderr
    sid = out.stderr.strip().splitlines()[0]
    added = tui(
        "context", "add", sid[:8], "ci", "--cmd", "echo build 1234 passed", "--every", "30", "--why", "CI"
    )
    assert added.returncode == 0, added.stderr
    assert tui("context", "add", sid[:8], "deploy", "--push").returncode == 0
    pushed = tui("context", "push", sid[:8], "deploy", input="deployed v7 to staging\n")
    assert pushed.returncode == 0, pushed.stderr
    wait_until(lambda: _has_value(sid, "ci", "deploy"), "the sources' first values")

    got = tui("send", sid[:8], "what is new?", "--wait")
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "You said: what is new?"
    said = json.dumps(server.requests[-1]["messages"])
    assert "build 1234 passed" in said and "deployed v7 to staging" in said
    assert 'source=\\"ci\\"' in said and "CI" in said


def test_a_python_program_reads_context_and_a_failing_command_shows_its_error(state_dir: Path) -> None:
    sid = new_session(state_dir, "x = 1")
    assert tui("context", "add", sid[:8], "ci", "--cmd", "echo green", "--every", "30").returncode == 0
    bad = tui("context", "add", sid[:8], "bad", "--cmd", "echo broken >&2; exit 3", "--every", "30")
    assert bad.returncode == 0, bad.stderr
    # The command runs in the session's sandbox: tui's state dir is hidden from it.
    peek = tui("context", "add", sid[:8], "peek", "--cmd", f"ls {state_dir}/sessions", "--every", "30")
    assert peek.returncode == 0, peek.stderr
    wait_until(lambda: _has_value(sid, "ci", "bad", "peek"), "the sources' first values")
    assert _listed(sid)["bad"][4].endswith("(failed)")

    read = tui("send", sid[:8], "print(context('ci'), end=''); print(context('bad'))", "--wait")
    assert read.returncode == 0, read.stderr
    assert read.stdout == "green\nbroken\n(exit status 3)\n"
    peeked = tui("send", sid[:8], "print(context('peek'))", "--wait")
    assert sid not in peeked.stdout

    missing = tui("send", sid[:8], "context('nope')", "--wait")
    assert missing.returncode == 1 and "no context source 'nope'" in missing.stderr

    # A new worker has the sources and their values from the journal.
    assert tui("stop", sid[:8]).returncode == 0
    again = tui("send", sid[:8], "print(context('ci'), end='')", "--wait")
    assert (again.returncode, again.stdout) == (0, "green\n"), again.stderr

    assert tui("context", "remove", sid[:8], "ci").returncode == 0
    assert "ci" not in _listed(sid)
    gone = tui("context", "remove", sid[:8], "ci")
    assert gone.returncode == 1 and "no context source 'ci'" in gone.stderr


def test_context_add_refuses_what_makes_no_sense(state_dir: Path) -> None:
    sid = new_session(state_dir, "x = 1")
    both = tui("context", "add", sid[:8], "x", "--cmd", "date", "--push")
    assert both.returncode == 2 and "give one of --cmd" in both.stderr
    # An --every out of bounds is a usage error refused before anything is asked (no such
    # session needed): exit 2, one line saying the bounds.
    for every in ("0", "0.1", "nan"):
        fast = tui("context", "add", "nosuch", "x", "--cmd", "date", "--every", every)
        assert fast.returncode == 2 and fast.stderr.count("\n") == 1, fast.stderr
        assert f"--every: how often the source is read, 1 to 86,400 seconds, not {every}" in fast.stderr
    pushed = tui("context", "push", sid[:8], "nothing", input="x")
    assert pushed.returncode == 1 and "no context source 'nothing'" in pushed.stderr
    # More than a request may carry: one line saying so and what to do, no traceback.
    assert tui("context", "add", sid[:8], "big", "--push").returncode == 0
    big = tui("context", "push", sid[:8], "big", input="x" * (5 * 1024 * 1024))
    assert big.returncode == 2, big.stderr
    assert big.stderr.count("\n") == 1 and "at most 4,193,280 bytes" in big.stderr, big.stderr
    assert "tui context add" in big.stderr


def _rss_mib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) // 1024


def test_an_endless_source_is_cut_as_it_runs_and_a_command_reaches_no_network(
    state_dir: Path, tmp_path: Path
) -> None:
    out = tui("send", "--new", "--dir", str(tmp_path), "import os; os.symlink('/dev/zero', 'zero')", "--wait")
    assert out.returncode == 0, out.stderr
    sid = out.stderr.strip().splitlines()[0]
    assert (tmp_path / "zero").is_symlink()
    bind = "import socket; socket.socket({}).bind({}); print('bound')"
    inet, abstract = bind.format("", "('127.0.0.1', 0)"), bind.format("socket.AF_UNIX", "b'\\\\0tui'")
    probe = f'{sys.executable} -c "{inet}"; {sys.executable} -c "{abstract}"'

    for name, how in (("zero", ("--file", "zero")), ("yes", ("--cmd", "yes")), ("net", ("--cmd", probe))):
        added = tui("context", "add", sid[:8], name, *how, "--every", "60")
        assert added.returncode == 0, added.stderr
    wait_until(lambda: _has_value(sid, "zero", "yes", "net"), "the sources' first values")

    # Each endless one was stopped at the bound and says so; the worker holds none of it.
    read = tui("send", sid[:8], "print(context('zero')[-200:]); print(context('yes')[-200:])", "--wait")
    assert read.returncode == 0, read.stderr
    assert read.stdout.count("(cut: its output went past 1,024 KiB, so it was stopped") == 2, read.stdout
    assert "y\ny\n" in read.stdout
    assert _rss_mib(worker_pid(state_dir, sid)) < 400
    # The command has the programs' seccomp filter and a network namespace of its own.
    net = tui("send", sid[:8], "print(context('net'))", "--wait")
    assert net.returncode == 0, net.stderr
    assert "bound" not in net.stdout and net.stdout.count("PermissionError") == 2, net.stdout
