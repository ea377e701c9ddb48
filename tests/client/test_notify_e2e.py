"""``[notify]`` as a user has it: real workers tell a loopback webhook and run a command.

Nothing here waits on a clock: to know that something was *not* told, a test makes the worker
tell something later (a turn that fails, a second question) and looks at what came before it:
one worker delivers its notices in order.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from helpers import RUNS_UNTIL_STOPPED, wait_until

from client.helpers import kill_worker, tui
from tui.store import StatePaths

SECRET = "s3cret-topic-7f3a"
"""A part of the webhook's URL that must never reach the journal or a log."""


class Hook:
    """A loopback webhook (port 0): the JSON bodies it received, in order."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.fail_next = 0
        self.fail_all = False
        self.hang = threading.Event()
        """Set: each request waits for `release` (and counts in `waiting`) before it is answered."""
        self.release = threading.Event()
        self.waiting = 0
        lock = threading.Lock()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if hook.hang.is_set():
                    with lock:
                        hook.waiting += 1
                    hook.release.wait(60)
                with lock:
                    if hook.fail_all or hook.fail_next:
                        hook.fail_next -= 1
                        self.send_response(500)
                        self.end_headers()
                        return
                    hook.paths.append(self.path)
                    hook.bodies.append(json.loads(data))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook/{SECRET}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self) -> list[tuple[str, str]]:
        return [(b["event"], b["key"]) for b in list(self.bodies)]

    def wait_for(self, count: int) -> None:
        wait_until(lambda: len(self.bodies) >= count, f"{count} notices at the webhook (got {self.events()})")


@pytest.fixture
def hook() -> Iterator[Hook]:
    served = Hook()
    yield served
    served.release.set()
    served.server.shutdown()
    served.server.server_close()


def configure(text: str) -> None:
    Path(os.environ["TUI_CONFIG_DIR"], "config.toml").write_text(text)


def journal(state_dir: Path, sid: str) -> list[dict[str, Any]]:
    path = StatePaths(state_dir).session(sid).journal
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def new_session(prompt: str, *, wait: bool = False) -> tuple[str, int]:
    out = tui("send", "--new", prompt, *(["--wait"] if wait else []))
    sid = out.stderr.strip().splitlines()[0]
    assert len(sid) == 16, out.stderr
    return sid, out.returncode


def pending(state_dir: Path, sid: str, text: str) -> bool:
    asked = {
        e["question_id"]
        for e in journal(state_dir, sid)
        if e["type"] == "question_asked" and e["text"] == text
    }
    resolved = {e["question_id"] for e in journal(state_dir, sid) if e["type"] == "question_resolved"}
    return bool(asked - resolved)


def test_a_detached_sessions_question_reaches_the_webhook_once_and_an_answer_sends_nothing_more(
    state_dir: Path, hook: Hook, tmp_path: Path
) -> None:
    said = tmp_path / "said.txt"
    writer = "import json, sys; open(sys.argv[1], 'a').write(json.dumps(sys.argv[2:]) + '\\n')"
    argv = [sys.executable, "-c", writer, str(said), "{event}", "{short_id}", "{question}", "{answer}"]
    configure(
        f'[notify]\non = ["question", "turn_failed"]\nafter = 1\nwebhook = "{hook.url}"\n'
        f"command = {json.dumps(argv)}\n"
    )
    sid, code = new_session("x = ask('Deploy now?', options=['yes', 'no'])\nraise ValueError(f'after {x}')")
    assert code == 0
    hook.wait_for(1)
    (question,) = hook.bodies
    assert question["event"] == "question"
    assert question["session_id"] == sid
    assert question["question"]["text"] == "Deploy now?"
    assert [o["label"] for o in question["question"]["options"]] == ["yes", "no"]
    command = question["answer"]["commands"][0]
    assert f"answer {sid[:8]} --option 1" in command
    assert "Deploy now?" in question["body"] and command in question["body"]

    # Answered in a terminal, as the notice says: the program goes on and its turn fails.
    answered = tui(*command.split()[1:])
    assert answered.returncode == 0, answered.stderr
    hook.wait_for(2)
    assert hook.events() == [("question", question["key"]), ("turn_failed", hook.bodies[1]["key"])]
    assert "after yes" in hook.bodies[1]["body"]

    wait_until(lambda: said.exists() and len(said.read_text().splitlines()) == 2, "the command's two runs")
    runs = [json.loads(line) for line in said.read_text().splitlines()]
    assert runs[0][:3] == ["question", sid[:8], "Deploy now?"] and command in runs[0][3]
    assert runs[1][0] == "turn_failed"

    paths = StatePaths(state_dir).session(sid)
    told = [e for e in journal(state_dir, sid) if e["type"] == "notified"]
    assert [e["event"] for e in told] == ["question", "turn_failed"]
    assert told[0]["told"] == ["webhook (127.0.0.1)", f"command ({Path(sys.executable).name})"]
    assert all(SECRET not in p.read_text() for p in (paths.journal, paths.log))
    assert hook.paths == [f"/hook/{SECRET}"] * 2


def test_an_answer_within_after_tells_nothing(state_dir: Path, hook: Hook) -> None:
    configure(f'[notify]\non = ["question"]\nafter = 8\nwebhook = "{hook.url}"\n')
    sid, _ = new_session(
        "a = ask('First?', options=['yes', 'no'])\nb = ask('Second?', options=['yes', 'no'])"
    )
    wait_until(lambda: pending(state_dir, sid, "First?"), "the first question")
    answered = tui("answer", sid, "--option", "2")
    assert answered.returncode == 0, answered.stderr
    # The second question, asked after the first, is told after the same wait: the first would
    # have come before it.
    hook.wait_for(1)
    assert [b["question"]["text"] for b in hook.bodies] == ["Second?"]


def test_a_new_worker_after_kill_9_tells_nothing_twice(state_dir: Path, hook: Hook) -> None:
    configure(f'[notify]\non = ["turn_failed", "worker_died"]\nwebhook = "{hook.url}"\n')
    sid, code = new_session("raise ValueError('first')", wait=True)
    assert code == 1
    hook.wait_for(1)
    wait_until(
        lambda: any(e["type"] == "notified" for e in journal(state_dir, sid)), "the notice in the journal"
    )
    kill_worker(state_dir, sid)
    again = tui("send", sid, "raise ValueError('second')", "--wait")
    assert again.returncode == 1, again.stderr
    hook.wait_for(3)
    events = hook.events()
    assert [e for e, _ in events] == ["turn_failed", "worker_died", "turn_failed"], events
    assert "first" in hook.bodies[0]["body"] and "second" in hook.bodies[2]["body"]
    assert len({key for _, key in events}) == 3


def test_notify_test_says_what_happened(state_dir: Path, hook: Hook) -> None:
    configure("")
    nothing = tui("notify", "test")
    assert nothing.returncode == 1
    assert "names no webhook and no command" in nothing.stderr and len(nothing.stderr.splitlines()) == 1

    configure(f'[notify]\nwebhook = "{hook.url}"\nretries = 1\n')
    told = tui("notify", "test")
    assert told.returncode == 0, told.stderr
    assert told.stderr.strip() == "tui: told webhook (127.0.0.1)"
    assert hook.bodies[0]["event"] == "test" and "answer" in hook.bodies[0]["answer"]["commands"][0]

    hook.fail_next = 2
    failed = tui("notify", "test")
    assert failed.returncode == 1
    assert failed.stderr.strip() == "tui: not told: webhook (127.0.0.1): HTTP 500 (2 tries)"
    assert SECRET not in failed.stderr


def test_a_webhook_that_hangs_or_fails_never_holds_a_turn_and_a_failure_is_one_line(
    state_dir: Path, hook: Hook
) -> None:
    configure(f'[notify]\non = ["turn_ended"]\nwebhook = "{hook.url}"\ntimeout = 60\nretries = 0\n')
    hook.hang.set()
    sid, code = new_session("print('one')", wait=True)
    assert code == 0
    wait_until(lambda: hook.waiting == 1, "the first notice to hang at the webhook")
    # The worker is still telling of turn 1: turn 2 runs and ends all the same.
    second = tui("send", sid, "print('two')", "--wait")
    assert (second.returncode, second.stdout) == (0, "two\n")
    assert hook.bodies == []

    hook.fail_all = True
    hook.release.set()
    notified = lambda: [e for e in journal(state_dir, sid) if e["type"] == "notified"]  # noqa: E731
    wait_until(lambda: len(notified()) == 2, "both notices to fail")
    assert [e["failed"] for e in notified()] == [["webhook (127.0.0.1): HTTP 500"]] * 2
    statuses = [e["activity"] for e in journal(state_dir, sid) if e["type"] == "status"]
    assert "notify: webhook (127.0.0.1): HTTP 500" in statuses
    log = StatePaths(state_dir).session(sid).log.read_text()
    lines = [line for line in log.splitlines() if "tui.worker.notify" in line]
    assert len(lines) == 2 and all("HTTP 500" in line and "WARNING" in line for line in lines), lines
    assert SECRET not in log


def test_a_failed_turn_a_killed_worker_had_not_told_is_told_by_the_next(state_dir: Path, hook: Hook) -> None:
    configure(f'[notify]\non = ["turn_failed"]\nwebhook = "{hook.url}"\ntimeout = 60\nretries = 0\n')
    hook.hang.set()
    sid, code = new_session("raise ValueError('untold')", wait=True)
    assert code == 1
    wait_until(lambda: hook.waiting == 1, "the notice to hang at the webhook")
    kill_worker(state_dir, sid)  # while it was telling
    hook.hang.clear()
    back = tui("send", sid, "print('back')", "--wait")
    assert back.returncode == 0, back.stderr
    hook.wait_for(1)
    assert [e for e, _ in hook.events()] == ["turn_failed"]
    assert "untold" in hook.bodies[0]["body"]


def test_a_worker_killed_mid_turn_is_told_once_as_its_death(state_dir: Path, hook: Hook) -> None:
    configure(f'[notify]\non = ["turn_failed", "worker_died"]\nwebhook = "{hook.url}"\n')
    sid, code = new_session(RUNS_UNTIL_STOPPED)
    assert code == 0
    wait_until(
        lambda: any(e.get("text") == "started\n" for e in journal(state_dir, sid)), "the program to start"
    )
    kill_worker(state_dir, sid)
    assert tui("send", sid, "raise ValueError('after')", "--wait").returncode == 1
    hook.wait_for(2)
    assert [e for e, _ in hook.events()] == ["worker_died", "turn_failed"], hook.events()
    died, failed = hook.bodies
    assert "turn 1, running then, failed" in died["body"] and died["turn"]["number"] == 1
    assert "after" in failed["body"] and failed["turn"]["number"] == 2


def test_a_commands_arguments_take_a_questions_text_as_text_never_as_an_option(
    state_dir: Path, tmp_path: Path
) -> None:
    said = tmp_path / "argv.json"
    writer = (
        "import json, os, sys; "
        "json.dump([sys.argv[2:], os.environ['TUI_NOTIFY_QUESTION']], open(sys.argv[1], 'w'))"
    )
    argv = [sys.executable, "-c", writer, str(said), "{question}", "--title={title}", "{body}"]
    configure(f'[notify]\non = ["question"]\nafter = 0\ncommand = {json.dumps(argv)}\n')
    sid, code = new_session("ask('-u critical \\x1b]0;owned\\x07 deploy?')")
    assert code == 0
    wait_until(said.exists, "the command's run")
    (question, title, body), variable = json.loads(said.read_text())
    # The question starts the word: it is not an option, and its ESC and BEL show as pictures.
    assert question == " -u critical \u241b]0;owned\u2407 deploy?"
    assert variable == "-u critical \u241b]0;owned\u2407 deploy?"
    assert title.startswith(f"--title=tui {sid[:8]}")
    assert "\x1b" not in body and "\u241b]0;owned" in body
    assert tui("stop", sid[:8]).returncode == 0
