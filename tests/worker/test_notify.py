"""Delivering a notice (`tui.worker.notify.deliver`) to a loopback webhook and a real command:
bodies, headers, tries with backoff, and failures said without the URL's secrets."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tui.config import NotifySettings
from tui.protocol import Notified, Option, Question
from tui.protocol.state import SessionState
from tui.worker.notify import deliver, fill, question_notice

SECRET = "tk_s3cret"


class Server:
    """A loopback webhook answering each POST with the next of `codes` (then 200)."""

    def __init__(self) -> None:
        self.codes: list[int] = []
        self.got: list[tuple[dict[str, str], bytes]] = []
        self.hang = threading.Event()
        """Set: requests hang until `release` is set."""
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.got.append((dict(self.headers.items()), data))
                if server.hang.is_set():
                    server.release.wait(30)
                code = server.codes.pop(0) if server.codes else 200
                self.send_response(code)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://user:{SECRET}@127.0.0.1:{self.http.server_address[1]}/{SECRET}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()


@pytest.fixture
def server() -> Iterator[Server]:
    served = Server()
    yield served
    served.release.set()
    served.http.shutdown()
    served.http.server_close()


NOTICE_QUESTION = Question(
    turn_id="t-1", question_id="ask-1", text="Deploy?", options=[Option(label="yes"), Option(label="no")]
)
NOTICE = question_notice("3f2a1b2c9d8e7f60", NOTICE_QUESTION, title="deploy")


class Sleeps:
    def __init__(self) -> None:
        self.waited: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waited.append(seconds)


async def test_a_5xx_is_tried_again_with_backoff_and_then_taken(server: Server) -> None:
    server.codes = [500, 503]
    sleeps = Sleeps()
    told, failed = await deliver(NotifySettings(webhook=server.url, retries=2), NOTICE, {}, sleeps)
    assert (told, failed) == (["webhook (127.0.0.1)"], [])
    assert sleeps.waited == [1.0, 2.0]
    headers, data = server.got[-1]
    body = json.loads(data)
    assert body["event"] == "question" and body["session_id"] == "3f2a1b2c9d8e7f60"
    assert body["question"]["text"] == "Deploy?"
    assert body["answer"]["commands"][0].endswith("answer 3f2a1b2c --option 1")
    assert headers["Content-Type"] == "application/json"


async def test_a_failure_is_said_without_the_urls_secret_and_a_4xx_is_not_tried_again(server: Server) -> None:
    server.codes = [404]
    sleeps = Sleeps()
    told, failed = await deliver(NotifySettings(webhook=server.url, retries=3), NOTICE, {}, sleeps)
    assert (told, failed) == ([], ["webhook (127.0.0.1): HTTP 404"])
    assert sleeps.waited == []
    server.codes = [500] * 3
    told, failed = await deliver(NotifySettings(webhook=server.url, retries=2), NOTICE, {}, sleeps)
    assert failed == ["webhook (127.0.0.1): HTTP 500 (3 tries)"]


async def test_a_webhook_that_does_not_answer_times_out(server: Server) -> None:
    server.hang.set()
    told, failed = await deliver(NotifySettings(webhook=server.url, retries=0, timeout=0.3), NOTICE, {})
    assert told == [] and failed == ["webhook (127.0.0.1): timed out"]


@pytest.mark.parametrize(
    ("format", "content_type", "read"),
    [
        ("text", "text/plain; charset=utf-8", lambda data: data.decode()),
        ("slack", "application/json", lambda data: json.loads(data)["text"]),
        ("discord", "application/json", lambda data: json.loads(data)["content"]),
    ],
)
async def test_plain_text_bodies(server: Server, format: str, content_type: str, read: Any) -> None:
    settings = NotifySettings.model_validate({"webhook": server.url, "format": format})
    assert (await deliver(settings, NOTICE, {}))[1] == []
    headers, data = server.got[-1]
    assert headers["Content-Type"] == content_type
    text = read(data)
    assert text.startswith("tui 3f2a1b2c (deploy): a question\nDeploy?\n")
    assert "tui answer 3f2a1b2c --option 2" in text


async def test_headers_and_headers_from_the_environment(server: Server) -> None:
    settings = NotifySettings(
        webhook=server.url, headers={"Title": "tui"}, headers_env={"Authorization": "NTFY_AUTH"}, retries=0
    )
    told, failed = await deliver(settings, NOTICE, {"NTFY_AUTH": f"Bearer {SECRET}"})
    assert (told, failed) == (["webhook (127.0.0.1)"], [])
    headers, _ = server.got[-1]
    assert headers["Title"] == "tui" and headers["Authorization"] == f"Bearer {SECRET}"
    _, failed = await deliver(settings, NOTICE, {})
    assert failed == ["webhook (127.0.0.1): header Authorization: NTFY_AUTH is not set in the environment"]


async def test_a_command_gets_placeholders_and_variables(tmp_path: Path) -> None:
    out = tmp_path / "args.json"
    script = (
        "import json, os, sys; json.dump([sys.argv[1:], os.environ['TUI_NOTIFY_EVENT'], "
        "json.loads(os.environ['TUI_NOTIFY_JSON'])['key']], open(sys.argv[1], 'w'))"
    )
    settings = NotifySettings(
        command=[sys.executable, "-c", script, str(out), "{title}", "{question}", "{nope}"]
    )
    told, failed = await deliver(settings, NOTICE, {})
    assert failed == [] and told == [f"command ({Path(sys.executable).name})"]
    argv, event, key = json.loads(out.read_text())
    assert argv == [str(out), "tui 3f2a1b2c (deploy): a question", "Deploy?", "{nope}"]
    assert (event, key) == ("question", "question:ask-1")


async def test_a_command_that_fails_or_is_missing_is_one_line(tmp_path: Path) -> None:
    sleeps = Sleeps()
    failing = NotifySettings(command=[sys.executable, "-c", "raise SystemExit(3)", SECRET], retries=1)
    assert await deliver(failing, NOTICE, {}, sleeps) == (
        [],
        [f"command ({Path(sys.executable).name}): exit 3 (2 tries)"],
    )
    missing = NotifySettings(command=["no-such-notifier", SECRET])
    assert await deliver(missing, NOTICE, {}) == ([], ["command (no-such-notifier): not found on PATH"])


def test_placeholders_unknown_stay_as_written() -> None:
    assert fill(["{a}-{b}", "{{x}}"], {"a": "1"}) == ["1-{b}", "{{x}}"]


def test_the_reducer_keeps_what_was_told() -> None:
    state = SessionState()
    state.apply(Notified(seq=1, key="question:ask-1", event="question", told=["webhook (h)"]))
    state.apply(Notified(seq=2, key="question:ask-1", event="question"))
    assert state.notified == ["question:ask-1"]
    for n in range(100):
        state.apply(Notified(seq=3 + n, key=f"turn_ended:t-{n}", event="turn_ended"))
    assert len(state.notified) == 64 and state.notified[-1] == "turn_ended:t-99"


def test_a_notify_table_that_is_wrong_is_one_line_naming_its_line_and_no_secret(tmp_path: Path) -> None:
    from tui.config import load_config
    from tui.errors import TuiError

    (tmp_path / "config.toml").write_text(
        f'theme = "nord"\n\n[notify]\non = ["question"]\nwebhook = "ftp://{SECRET}"\n'
    )
    with pytest.raises(TuiError) as refused:
        load_config(tmp_path)
    said = str(refused.value)
    assert said.startswith(f"{tmp_path / 'config.toml'}, line 5: notify.webhook: ") and "http" in said
    assert SECRET not in said and "\n" not in said
    (tmp_path / "config.toml").write_text('[notify]\nterminal = false\nafter = "2m"\n')
    settings = load_config(tmp_path).notify
    assert (settings.terminal, settings.after, settings.anywhere) == ("off", 120.0, False)


def test_the_link_names_the_running_tui_web(tmp_path: Path) -> None:
    import os

    from tui.worker.notify import web_link

    assert web_link(tmp_path, "3f2a1b2c9d8e7f60") is None
    (tmp_path / "web").mkdir()
    running = {"url": "http://127.0.0.1:7433", "pid": os.getpid()}
    (tmp_path / "web" / "server.json").write_text(json.dumps(running))
    assert web_link(tmp_path, "3f2a1b2c9d8e7f60") == "http://127.0.0.1:7433/#s=3f2a1b2c9d8e7f60"
    notice = question_notice("3f2a1b2c9d8e7f60", NOTICE_QUESTION, link=web_link(tmp_path, "3f2a1b2c9d8e7f60"))
    assert notice.as_json()["answer"]["link"].endswith("/#s=3f2a1b2c9d8e7f60")
    assert "on the web: http://127.0.0.1:7433/#s=3f2a1b2c9d8e7f60" in notice.body
