"""``tui notify test``: send a sample notification to what config.toml's ``[notify]`` names."""

from __future__ import annotations

import argparse
import asyncio
import sys

from tui.config import config_path, load_config
from tui.errors import TuiError, UsageError
from tui.store import StatePaths, get_session, resolve_id
from tui.worker.notify import deliver, sample_notice

__all__ = ["run_notify"]


def run_notify(args: argparse.Namespace) -> int:
    """Tell the webhook and run the command of ``[notify]`` once, as a question would; say how
    each went. Exit 0 when every one took it, 1 (one line each) otherwise."""
    if getattr(args, "remote", None):
        raise UsageError("`tui notify test` tells what this machine's config.toml names; leave --remote out")
    config = load_config()
    settings = config.notify
    if settings.webhook is None and not settings.command:
        raise TuiError(
            f"[notify] of {config.path or config_path()} names no webhook and no command: add one "
            '(e.g. webhook = "https://ntfy.sh/YOUR-TOPIC" with format = "text"; docs/cli.md, "Notifications")'
        )
    state = StatePaths.resolve(args.state_dir)
    session_id, title = "0" * 16, "a sample"
    if args.session:
        record = get_session(state, resolve_id(state, args.session))
        session_id, title = record.id, record.title
    notice = sample_notice(session_id, title=title, state_root=state.root)
    told, failed = asyncio.run(deliver(settings, notice))
    for where in told:
        print(f"tui: told {where}", file=sys.stderr)
    for why in failed:
        print(f"tui: not told: {why}", file=sys.stderr)
    if not settings.on:
        print("tui: note: [notify] on = [] tells nothing of sessions; name what to tell", file=sys.stderr)
    return 0 if not failed else 1
