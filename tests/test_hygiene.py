"""The core never imports Textual, and the command line starts without it."""

from __future__ import annotations

import subprocess
import sys

import pytest

CORE = ["tui.protocol", "tui.store", "tui.codemode", "tui.access", "tui.link", "tui.errors", "tui.config"]


@pytest.mark.parametrize("module", CORE)
def test_core_module_does_not_import_textual(module: str) -> None:
    code = f"import sys, {module}; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", f"{module} pulls in Textual"


def test_help_lists_every_command() -> None:
    out = subprocess.run([sys.executable, "-m", "tui", "--help"], capture_output=True, text=True, check=True)
    for word in ("attach", "sessions", "send", "answer", "web", "share"):
        assert word in out.stdout


def test_unknown_option_is_a_usage_error() -> None:
    out = subprocess.run([sys.executable, "-m", "tui", "sessions", "--bogus"], capture_output=True, text=True)
    assert out.returncode == 2
    assert "unrecognized arguments: --bogus" in out.stderr
