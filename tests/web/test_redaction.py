"""Secrets a program prints reach the owner and nobody else (`tui.redact`): a real worker, a real
`tui web`, a viewer's event stream, a guest's page in headless Chromium, exports and a loopback
webhook; the owner's own `tui transcript` and journal keep the bytes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from helpers import TIMEOUT, wait_until

from tui.store import StatePaths

from .conftest import CHROMIUM, PHONE, Web, wake

AWS = "AKIA" + "QYLPMN5HFIQR7XKT"
PEM = "MIIEowIBAAKCAQEAx7JqZy8f3kQ2mNc9dLwTq5bH0vYpRsZ1aE6uG3iK"
SPLIT = "ghp_" + "Zx81QwErTyUiOpAsDfGhJkLzXcVbNm123456"
# The prompt builds each secret from pieces, so only the program's output holds it whole; the
# last one is printed in two writes, a moment apart: two output pieces.
PROGRAM = (
    "import sys, time\n"
    f"print('AWS_ACCESS_KEY_ID=' + {AWS[:8]!r} + {AWS[8:]!r})\n"
    "print('-----BEGIN RSA ' + 'PRIVATE KEY-----')\n"
    f"print({PEM[:20]!r} + {PEM[20:]!r})\n"
    "print('-----END RSA PRIVATE KEY-----')\n"
    f"sys.stdout.write('token: ' + {SPLIT[:12]!r}); sys.stdout.flush(); time.sleep(0.3)\n"
    f"print({SPLIT[12:]!r})\n"
)
SECRETS = (AWS, PEM, SPLIT)
MARK = "[redacted: AWS key, 17-32 chars]"  # its kind and its length's class (20 characters)


class Hook:
    """A loopback webhook on port 0: the JSON bodies it received."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                hook.bodies.append(json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0)))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def hook() -> Iterator[Hook]:
    served = Hook()
    yield served
    served.server.shutdown()
    served.server.server_close()


def _leaked(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def test_a_programs_keys_reach_the_owner_and_only_redacted_a_viewer_a_page_an_export_and_a_webhook(
    web: Web, hook: Hook, browser: Any, page_of: Any
) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed")
    Path(os.environ["TUI_CONFIG_DIR"], "config.toml").write_text(
        f'[notify]\non = ["turn_ended"]\nwebhook = "{hook.url}"\n'
    )
    sid = web.session()
    wake(web, sid)
    env = {**os.environ, "TUI_STATE_DIR": str(web.state)}
    shared = subprocess.run(
        [sys.executable, "-m", "tui", "share", sid, "--name", "gus", "--kind", "viewer"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    link = next(ln for ln in shared.stdout.splitlines() if "in a browser" in ln).split()[-1]
    page = page_of(PHONE)
    page.goto(link)
    page.wait_for_selector("#transcript")
    viewer = web.client(web.share(sid, "viewer", name="vic"))

    reply = web.client().post(f"/api/sessions/{sid}/turn", json={"prompt": PROGRAM})
    assert reply.status_code == 202, reply.text
    seen: list[str] = []
    with viewer.stream("GET", f"/api/sessions/{sid}/events", params={"cursor": 0}, timeout=TIMEOUT) as r:
        for line in r.iter_lines():
            seen.append(line)
            if line == "event: turn_ended":
                break
    stream = "\n".join(seen)
    assert not _leaked(stream), stream
    output = "".join(
        json.loads(ln[6:])["text"] for ln in seen if ln.startswith('data: {"seq"') and '"type":"text"' in ln
    )
    assert SPLIT[:12] not in output and SPLIT[12:] not in output, output  # neither piece of the split one
    for label in ("AWS key", "private key", "GitHub token"):
        assert f"[redacted: {label}, " in stream, stream

    page.wait_for_selector("#transcript :text('[redacted: GitHub token, 33-64 chars]')")
    page.wait_for_selector(".turn .outcome.completed")
    shown = page.inner_text("#transcript")
    assert not _leaked(shown) and MARK in shown, shown

    for fmt in ("text", "jsonl"):
        export = viewer.get(f"/api/sessions/{sid}/export", params={"format": fmt})
        assert export.status_code == 200 and MARK in export.text, export.text
        assert not _leaked(export.text), export.text

    wait_until(lambda: hook.bodies, "the turn's notice at the webhook")
    told = json.dumps(hook.bodies)
    assert not _leaked(told) and MARK in told, told

    # The owner's own view keeps every byte: the journal, and `tui transcript` without --redact.
    journal = StatePaths(web.state).session(sid).journal.read_text()
    assert AWS in journal and PEM in journal
    mine = subprocess.run(
        [sys.executable, "-m", "tui", "transcript", sid], env=env, capture_output=True, text=True, timeout=60
    )
    assert AWS in mine.stdout and PEM in mine.stdout and SPLIT in mine.stdout, mine.stdout
    redacted = subprocess.run(
        [sys.executable, "-m", "tui", "transcript", sid, "--redact"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert not _leaked(redacted.stdout) and "[redacted: private key, " in redacted.stdout, redacted.stdout
