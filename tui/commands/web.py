"""Commands: web."""

from __future__ import annotations

import argparse

from tui.errors import TuiError


def _not_yet(args: argparse.Namespace) -> int:
    raise TuiError(f"`tui {args.command}` is not built yet; see `tui --help`")


run_web = run_remote = run_share = _not_yet
