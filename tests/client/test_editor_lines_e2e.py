"""`tui acp` as an editor's subprocess fed raw lines: each bad line is answered with a JSON-RPC
error, in bounded memory, and the conversation goes on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tui.editor.lines import LINE_LIMIT


def test_every_bad_line_gets_a_json_rpc_error_and_the_next_request_is_answered(state_dir: Path) -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    lines = [
        b"[1, 2, 3]",  # a batch: not taken
        b"this is not json",
        deep,
        b"x" * (LINE_LIMIT + 1024),  # read and dropped as it comes
        b'{"jsonrpc": "2.0", "id": {"an": "object"}, "result": 1}',
        b'{"jsonrpc": "2.0", "id": 3, "method": ' + b"[" * 100 + b"]" * 100 + b"}",
        b'{"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {"protocolVersion": 1}}',
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "tui", "acp"],
        input=b"\n".join(lines) + b"\n",
        capture_output=True,
        timeout=120,
        env=os.environ.copy(),
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    said = [(a.get("id"), a.get("error", {}).get("code")) for a in answers]
    assert said == [
        (None, -32600),
        (None, -32700),
        (None, -32700),
        (None, -32600),
        (None, -32600),
        (3, -32600),
        (7, None),
    ], answers
    assert "longer than" in answers[3]["error"]["message"]
    assert answers[-1]["result"]["protocolVersion"] == 1
