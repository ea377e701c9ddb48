"""Commands: sessions."""

from __future__ import annotations

import argparse

from tui.errors import TuiError


def _not_yet(args: argparse.Namespace) -> int:
    raise TuiError(f"`tui {args.command}` is not built yet; see `tui --help`")


run_sessions = run_send = run_answer = run_dismiss = run_stop = run_archive = run_delete = _not_yet
