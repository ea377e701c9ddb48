"""The app in a real tmux with tmux's default settings (`set-clipboard external`, which drops a
program's OSC 52): `/copy` still reaches tmux's buffer, and through it the outer terminal's
clipboard (`tmux load-buffer -w`). A private tmux server of the test's own, `-f /dev/null`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import stop_workers, wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


class Tmux:
    """One tmux server of the test's own (its socket name), with tmux's defaults."""

    def __init__(self, env: dict[str, str]) -> None:
        self.name = f"tui-test-{uuid.uuid4().hex[:8]}"
        self.env = env

    def __call__(self, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            ["tmux", "-L", self.name, "-f", "/dev/null", *args],
            input=input,
            capture_output=True,
            env=self.env,
            timeout=30,
        )

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "app").stdout.decode()


@pytest.fixture
def tmux(state_dir: Path, tmp_path: Path) -> Iterator[Tmux]:
    env = {k: v for k, v in os.environ.items() if k != "TMUX"}
    server = Tmux(env)
    app = f"cd {tmp_path} && TUI_STATE_DIR={state_dir} {sys.executable} -m tui"
    started = server("new-session", "-d", "-s", "app", "-x", "100", "-y", "30", app)
    assert started.returncode == 0, started.stderr
    try:
        yield server
    finally:
        server("kill-server")
        stop_workers(state_dir)


def test_copy_reaches_tmux_under_its_default_settings(tmux: Tmux) -> None:
    assert tmux("show", "-gv", "set-clipboard").stdout.strip() == b"external"
    wait_until(lambda: "Enter sends" in tmux.screen() or "Python program" in tmux.screen(), "the app")
    tmux("send-keys", "-t", "app", "-l", 'print("copy me")')
    tmux("send-keys", "-t", "app", "Enter")
    wait_until(lambda: "copy me" in [line.strip() for line in tmux.screen().splitlines()], "the reply")
    tmux("send-keys", "-t", "app", "-l", "/copy")
    tmux("send-keys", "-t", "app", "Enter")
    wait_until(lambda: tmux("show-buffer").stdout == b"copy me\n", "the copy in tmux's buffer")
    tmux("send-keys", "-t", "app", "C-d")
