"""Commands: attach."""

from __future__ import annotations

import argparse
import sys

from tui.errors import TuiError


def run_new(args: argparse.Namespace) -> int:
    """``tui [PROMPT]``: a new session in the current folder, attached."""
    if not sys.stdin.isatty():
        from tui import piped

        return piped.run_new(args)
    raise TuiError("the full-screen TUI is not built yet; see `tui --help`")


def run_attach(args: argparse.Namespace) -> int:
    """``tui attach ID``: attach to a session, starting its worker when none runs."""
    if not sys.stdin.isatty():
        from tui import piped

        return piped.run_attach(args)
    raise TuiError("attaching is not built yet; see `tui --help`")
