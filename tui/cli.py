"""The command line: parse arguments, call one command."""

from __future__ import annotations

import argparse
import sys

from tui import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tui", description=__doc__)
    parser.add_argument("--version", action="version", version=f"tui {__version__}")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    parser.parse_args(argv if argv is not None else sys.argv[1:])
    return 0
