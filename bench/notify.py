"""``[notify]`` figures: from a detached session's question to a loopback webhook's receipt.

Run with ``.venv/bin/python bench/notify.py [RUNS] [AFTER]``: each run makes a new python
session (its own state dir) whose program asks a question, and measures the time from the
journal's ``question_asked`` to the POST at a loopback webhook, beside `after` (the seconds a
question waits before anyone is told). The figures go into docs/performance.md, "Notifications".
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    after = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    received: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            received.append(time.time())
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory(prefix="tui-bench-", dir="/tmp") as d:
        root = Path(d)
        (root / "config").mkdir()
        (root / "config" / "config.toml").write_text(
            f'[notify]\nafter = {after}\nwebhook = "http://127.0.0.1:{server.server_address[1]}/hook"\n'
        )
        env = {**os.environ, "TUI_STATE_DIR": str(root / "state"), "TUI_CONFIG_DIR": str(root / "config")}
        delays = []
        for i in range(runs):
            out = subprocess.run(
                [sys.executable, "-m", "tui", "send", "--new", "ask('Proceed?', options=['yes'])"],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            sid = out.stderr.split()[0]
            while len(received) <= i:
                time.sleep(0.01)
            journal = root / "state" / "sessions" / sid / "journal.jsonl"
            events = [json.loads(line) for line in journal.read_text().splitlines()]
            asked = next(e["at"] for e in events if e["type"] == "question_asked")
            delays.append(received[i] - datetime.fromisoformat(asked).timestamp())
            stop = [sys.executable, "-m", "tui", "stop", sid]
            subprocess.run(stop, env=env, capture_output=True, check=False)
    server.shutdown()
    print(f"question asked → webhook received, after = {after:g} s, {runs} runs:")
    print(f"  median {statistics.median(delays):.3f} s, min {min(delays):.3f} s, max {max(delays):.3f} s")
    print(f"  beyond after: median {(statistics.median(delays) - after) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
