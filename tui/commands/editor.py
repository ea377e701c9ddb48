"""Command: ``tui acp``, tui as an ACP agent on stdin/stdout for an editor (docs/agents.md)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from tui.errors import UsageError

__all__ = ["run_acp"]


def run_acp(args: argparse.Namespace) -> int:
    """``tui acp``: serve ACP on stdin/stdout until the editor closes them; sessions go on."""
    if args.agent and args.model:
        raise UsageError(
            "give --agent NAME or --model NAME, not both (a --model session runs the model agent)"
        )
    if sys.stdin.isatty():
        raise UsageError(
            "`tui acp` speaks ACP on stdin/stdout to an editor; configure it as the editor's agent "
            "command (docs/agents.md), or `tui` for the app"
        )
    from tui.commands.sessions import open_access
    from tui.editor import load_acp

    load_acp()  # before tui.editor.face imports it: its models built as they are used
    from tui.editor.face import serve
    from tui.link.local import local_client_id

    access = open_access(args)
    images = _takes_images(args)
    asyncio.run(
        serve(
            access,
            agent=args.agent,
            model=args.model,
            client_id=local_client_id("acp"),
            images=images,
            redact=args.redact,
        )
    )
    return 0


def _takes_images(args: argparse.Namespace) -> bool:
    """Whether new sessions run an ACP agent, the kind of agent that takes a prompt's images (a
    remote's default agent is not known here: no)."""
    if args.model:
        return False
    agent = args.agent
    if agent is None and not getattr(args, "remote", None):
        from tui.config import load_config

        agent = load_config().default_agent
    return agent not in (None, "python", "model")
