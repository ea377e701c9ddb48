"""The command line: parse arguments, call one command.

Each command lives in `tui.commands`; they are imported only when called, so that ``tui --help``
and the piped surface do not pay for Textual's import.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib
import math
import os
import re
import shlex
import sys
from collections.abc import Callable
from typing import NoReturn

from tui import __version__
from tui.errors import TuiError, UsageError, os_error

Command = Callable[[argparse.Namespace], int]

_COMMANDS: dict[str, tuple[str, str, str]] = {
    # name: (what to type after it, what it does, its group in `tui --help`)
    "attach": ("ID", "attach the app (piped: run stdin's script)", "sessions"),
    "sessions": ("[--all] [--json]", "list sessions (--everywhere: every machine's)", "sessions"),
    "search": ("TEXT [--json]", "find text in every session, newest first (--everywhere)", "sessions"),
    "send": ("ID PROMPT", "a turn without the app (--new, --wait)", "sessions"),
    "answer": ("ID --option N", "answer the pending question (--text T)", "sessions"),
    "dismiss": ("ID", "dismiss the pending question", "sessions"),
    "interrupt": ("ID", "end the running turn (its queue is held)", "sessions"),
    "restart": ("ID | --outdated", "move a session to a new worker (a newer tui)", "sessions"),
    "note": ("ID TEXT", "a note the agent reads with its next turn (--now)", "sessions"),
    "context": ("ACTION ID", "values the agent is given at each turn: add, list, remove, push", "sessions"),
    "budget": ("ID [--cost USD] …", "show or change its limits: cost, tokens, turns, time", "sessions"),
    "transcript": ("ID [--format F]", "print the whole session (text, markdown, jsonl)", "sessions"),
    "diff": ("ID [--turn N] [--stat]", "what each turn did to the session's files", "sessions"),
    "rewind": ("ID --to N [--force]", "files and conversation back as before turn N", "sessions"),
    "fork": ("ID --at N [--dir PATH]", "a new session from before turn N, in a new folder", "sessions"),
    "verify": ("ID [--head H]", "check the journal's chain: name a line changed since", "sessions"),
    "audit": ("ID [--json]", "who did what: prompts, answers, tools, files, costs, shares", "sessions"),
    "stop": ("ID | --all | --idle D", "stop its worker; `tui attach` resumes it", "sessions"),
    "archive": ("ID", "hide a session from lists", "sessions"),
    "unarchive": ("ID", "list an archived session again", "sessions"),
    "delete": ("ID [--force]", "remove a session", "sessions"),
    "web": ("[--host ADDR]", "serve this machine's sessions to others", "machines"),
    "remote": ("add|list|remove", "other machines, for --remote NAME", "machines"),
    "share": ("ID --name N --kind K", "invite someone to a session", "machines"),
    "models": ("[--json]", "the model profiles, and whether each has its key", "machines"),
    "agents": ("[--json]", "the ACP coding agents, and whether each is installed", "machines"),
    "acp": ("[--agent NAME]", "be an ACP agent on stdin/stdout, for an editor (Zed …)", "machines"),
    "notify": ("test [--session ID]", "send a sample to [notify]'s webhook and command", "machines"),
}
_SUBCOMMANDS = (*_COMMANDS, "relay")
"""`relay` is not listed: an SSH remote's connection runs it (docs/remote.md)."""
_GROUPS = {
    "sessions": "Sessions (here, or on another machine with --remote NAME)",
    "machines": "Other machines and people",
}
_EXAMPLES = (
    ("tui", "a new session here (Ctrl+D detaches)"),
    ("tui attach 3f2a", "come back (any unique id prefix)"),
    ("tui send --new 'print(6*7)' --wait", "prints 42"),
    ("tui attach 3f2a < script.py", "a script's turns, plain output"),
    ("tui --remote lab sessions", "another machine's sessions"),
)
_EXIT_CODES = (
    "  0 done, 1 a turn failed or an error, 2 bad arguments, 3 a question is waiting,",
    "  4 the session's worker went away, 5 an empty reply, 6 refused (token, share),",
    "  7 stopped at the session's budget (`tui budget ID`)",
)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors are one line naming the command and its ``--help``
    (argparse's own are its usage lines and then the error, the top's usage for an option
    of a command it does not know)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message}; `{self.prog} --help` says what it takes\n")


def _epilog() -> str:
    lines: list[str] = []
    for group, title in _GROUPS.items():
        lines.append(f"{title}:")
        for name, (usage, summary, where) in _COMMANDS.items():
            if where == group:
                lines.append(f"  {name + ' ' + usage:<28} {summary}")
        lines.append("")
    lines.append("Examples:")
    lines += [f"  {example:<36} {what}" for example, what in _EXAMPLES]
    lines += [
        "",
        "Exit codes:",
        *_EXIT_CODES,
        "",
        "`tui COMMAND --help` for each; docs/cli.md for everything.",
    ]
    return "\n".join(lines)


def _command(module: str, name: str) -> str:
    return f"{module}:{name}"


def _global_options(parser: argparse.ArgumentParser, *, nested: bool = False, remote: bool = True) -> None:
    # A subcommand's copy must not overwrite a value given before the subcommand's name.
    default = argparse.SUPPRESS if nested else None
    parser.add_argument(
        "--state-dir", metavar="DIR", default=default, help="where sessions live (env TUI_STATE_DIR)"
    )
    if remote:
        parser.add_argument(
            "--remote", metavar="NAME", default=default, help="run the command on another machine's sessions"
        )


def _piped_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("piped input (stdin not a terminal)")
    group.add_argument(
        "--output", choices=("text", "jsonl"), default="text", help="replies as text, or events"
    )
    group.add_argument("--keep-going", action="store_true", help="run the rest after a failed turn")
    group.add_argument("--whole", action="store_true", help="send the whole script as one program")
    group.add_argument(
        "--from-line", type=_line, default=1, metavar="N", help="start at line N of the script (resume a run)"
    )
    group.add_argument("--answers", metavar="FILE", help="answers for expected questions (JSON or TOML)")
    group.add_argument(
        "--question-timeout", type=_wait_seconds, metavar="S", help="wait S seconds for an answer"
    )
    group.add_argument("--default-answer", metavar="A", help="answer given after --question-timeout")
    group.add_argument("--timeout", type=_seconds, metavar="S", help="bound the whole run")


def _budget_options(parser: argparse.ArgumentParser, *, new: bool = False) -> None:
    group = parser.add_argument_group(
        "budget (a new session's; default: config.toml's [budget])" if new else "limits (0: none)"
    )
    group.add_argument("--cost", type=float, metavar="USD", help="the most it may cost, in USD")
    group.add_argument("--tokens", type=int, metavar="N", help="the most tokens in and out, together")
    group.add_argument("--turns", type=int, metavar="N", help="the most turns")
    group.add_argument("--time", metavar="DURATION", help="the most wall time of its turns (30m, 2h)")


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def _seconds(text: str) -> float:
    """``--timeout``'s value: a number of seconds above 0."""
    seconds = _number(text)
    if not 0 < seconds < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0 (e.g. 30)")
    return seconds


def _wait_seconds(text: str) -> float:
    """``--question-timeout``'s value: a number of seconds, 0 (answer at once) or more."""
    seconds = _number(text)
    if not 0 <= seconds < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds, 0 or more (e.g. 30)")
    return seconds


def _line(text: str) -> int:
    """``--from-line``'s value: a line of the script, 1 its first."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a line of the script; its first is 1")
    return int(text)


def _ray_address(text: str) -> str:
    """``--ray``'s value: a Ray cluster's ``HOST:PORT``."""
    host, _, port = text.strip().rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Ray cluster's address; give HOST:PORT as `ray start --head` printed it "
            "(e.g. 10.0.0.5:6379)"
        )
    return f"{host}:{port}"


def build_parser() -> argparse.ArgumentParser:
    """The whole command line of cli.md."""
    top = _Parser(
        prog="tui",
        description="Attach a full-screen terminal UI to long-lived agent sessions.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("--version", action="version", version=f"tui {__version__}")
    _global_options(top)
    top.add_argument("--dir", metavar="D", help="the new session's folder (default: the current one)")
    top.add_argument(
        "--agent", metavar="NAME", help="what the new session runs (default: config.toml's, else python)"
    )
    top.add_argument(
        "--model",
        metavar="NAME",
        help="a model session with this model: a [models] profile or PROVIDER:MODEL",
    )
    top.add_argument("prompt", nargs="?", help="the new session's first turn")
    _budget_options(top, new=True)
    _piped_options(top)
    top.set_defaults(run=_command("attach", "run_new"))
    return top


def build_subparsers() -> argparse.ArgumentParser:
    """The parser for ``tui COMMAND …``."""
    top = _Parser(prog="tui")
    _global_options(top)
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, target: str, *, remote: bool = True) -> argparse.ArgumentParser:
        help_ = _COMMANDS[name][1]
        p = sub.add_parser(name, help=help_, description=help_)
        _global_options(p, nested=True, remote=remote)
        p.set_defaults(run=target)
        return p

    p = add("attach", _command("attach", "run_attach"))
    p.add_argument("id", nargs="?", help="session id or unique prefix (none: pick from every machine's)")
    p.add_argument(
        "--turn", type=int, metavar="N", help="open on turn N, selected (as `tui search` names it)"
    )
    p.add_argument("--find", metavar="TEXT", help="with --turn: highlight TEXT in it (the search bar open)")
    _piped_options(p)

    p = add("sessions", _command("listing", "run_sessions"))
    p.add_argument("--json", action="store_true", help="a JSON list of objects")
    p.add_argument("--all", action="store_true", help="include archived sessions")
    p.add_argument("--everywhere", action="store_true", help="this machine's and every remote's")

    p = add("search", _command("search", "run_search"))
    p.add_argument(
        "text", nargs="+", help="the words, in that order, any case; a final * makes the last a prefix"
    )
    p.add_argument("--json", action="store_true", help="the hits as a JSON object")
    p.add_argument(
        "--in",
        dest="within",
        action="append",
        metavar="KIND",
        help="only in prompt, reply, tool, error, note, question, answer or child (repeatable, or a,b)",
    )
    p.add_argument("--dir", metavar="D", help="only sessions in folder D or below it")
    p.add_argument("--agent", metavar="NAME", help="only sessions of this agent")
    p.add_argument("--since", metavar="WHEN", help="only turns since WHEN: 2h, 3d, 1w or a date")
    p.add_argument("--active", action="store_true", help="leave archived sessions out")
    p.add_argument("--limit", type=int, default=20, metavar="N", help="at most N hits (default 20)")
    p.add_argument("--everywhere", action="store_true", help="this machine's sessions and every remote's")

    p = add("send", _command("sessions", "run_send"))
    p.add_argument(
        "args", nargs="*", metavar="ID PROMPT", help="session id and prompt (with --new: the prompt)"
    )
    p.add_argument("--new", action="store_true", help="to a new session (its id printed on stderr)")
    p.add_argument("--dir", metavar="D", help="with --new: the new session's folder")
    p.add_argument("--agent", metavar="NAME", help="with --new: what the new session runs")
    p.add_argument("--model", metavar="NAME", help="with --new: a model session with this model")
    p.add_argument(
        "--parent", metavar="ID", help="with --new: a child of session ID (in its folder unless --dir)"
    )
    _budget_options(p, new=True)
    p.add_argument("--wait", action="store_true", help="wait for the reply and print it")
    p.add_argument("--queue", action="store_true", help="queue at once behind the running turn")
    p.add_argument("--timeout", type=_seconds, metavar="S", help="bound the whole command")

    p = add("models", _command("sessions", "run_models"))
    p.add_argument("--json", action="store_true", help="a JSON list of objects")

    p = add("agents", _command("sessions", "run_agents"))
    p.add_argument("--json", action="store_true", help="a JSON list of objects")

    p = add("acp", _command("editor", "run_acp"))
    p.add_argument(
        "--agent", metavar="NAME", help="what new sessions run (default: config.toml's, else python)"
    )
    p.add_argument("--model", metavar="NAME", help="new sessions are model sessions with this model")
    p.add_argument(
        "--redact", action="store_true", help="replace secrets with [redacted: …] in what the editor is told"
    )
    p = add("notify", _command("notify", "run_notify"), remote=False)
    p.add_argument("action", choices=("test",), help="test: send a sample and say how it went")
    p.add_argument("--session", metavar="ID", help="name this session in the sample")

    p = add("answer", _command("sessions", "run_answer"))
    p.add_argument("id")
    p.add_argument(
        "--option", type=int, action="append", default=[], metavar="N", help="option number (1-based)"
    )
    p.add_argument("--text", metavar="T", help="a freeform answer")

    p = add("dismiss", _command("sessions", "run_dismiss"))
    p.add_argument("id")

    p = add("interrupt", _command("sessions", "run_interrupt"))
    p.add_argument("id", help="session id or unique prefix")

    p = add("restart", _command("notes", "run_restart"))
    p.add_argument("id", nargs="?", help="session id or unique prefix")
    p.add_argument("--outdated", action="store_true", help="every idle worker running an older tui")

    p = add("note", _command("notes", "run_note"))
    p.add_argument("id", help="session id or unique prefix")
    p.add_argument("text", nargs="+", help="the note (`-`: read it from stdin)")
    p.add_argument("--source", metavar="NAME", help="what left it, shown beside who sent it (ci, cron)")
    p.add_argument("--now", action="store_true", help="an idle session starts a turn of its own for it")

    p = add("budget", _command("notes", "run_budget"))
    p.add_argument("id", help="session id or unique prefix")
    _budget_options(p)

    p = add("context", _command("notes", "run_context"))
    csub = p.add_subparsers(dest="action", required=True, metavar="add|list|remove|push")
    c = csub.add_parser("add", help="add a source: --cmd CMD --every S, --file PATH or --push")
    c.add_argument("id", help="session id or unique prefix")
    c.add_argument("name", help="the source's name (letters, digits, _ . -)")
    c.add_argument("--cmd", metavar="CMD", help="a shell command run in the session's sandbox")
    c.add_argument("--every", type=float, metavar="SECONDS", help="how often --cmd runs (or --file is read)")
    c.add_argument("--file", metavar="PATH", help="a file of the session's folder, read in its sandbox")
    c.add_argument("--push", action="store_true", help="values come from `tui context push`")
    c.add_argument("--why", metavar="TEXT", help="what it is for, told to the agent beside its value")
    c = csub.add_parser("list", help="the sources, with their age and size")
    c.add_argument("id", help="session id or unique prefix")
    c = csub.add_parser("remove", help="remove a source")
    c.add_argument("id", help="session id or unique prefix")
    c.add_argument("name")
    c = csub.add_parser("push", help="a pushed source's new value, from stdin")
    c.add_argument("id", help="session id or unique prefix")
    c.add_argument("name")

    p = add("stop", _command("sessions", "run_stop"))
    p.add_argument("id", nargs="?")
    p.add_argument("--all", action="store_true", help="every session with a live worker")
    p.add_argument(
        "--idle",
        metavar="DURATION",
        help="every worker idle for DURATION or more: a number and its unit, s m h d w (90s, 30m, 2h, 1h30m)",
    )

    p = add("archive", _command("sessions", "run_archive"))
    p.add_argument("id")

    p = add("unarchive", _command("notes", "run_unarchive"))
    p.add_argument("id")

    p = add("delete", _command("sessions", "run_delete"))
    p.add_argument("id")
    p.add_argument("--force", action="store_true", help="stop a live worker first")

    p = add("transcript", _command("sessions", "run_transcript"))
    p.add_argument("id")
    p.add_argument(
        "--format", choices=("text", "markdown", "jsonl"), default="text", help="jsonl: every event as stored"
    )
    p.add_argument(
        "--redact",
        action="store_true",
        help="replace secrets (keys, tokens, passwords) with [redacted: …] (always so through tui web)",
    )

    p = add("verify", _command("audit", "run_verify"))
    p.add_argument("id")
    p.add_argument("--head", metavar="SEQ:HASH", help="a chain head kept elsewhere (printed by `tui audit`)")
    p.add_argument("--json", action="store_true", help="the verdict as a JSON object")

    p = add("audit", _command("audit", "run_audit"))
    p.add_argument("id")
    p.add_argument("--json", action="store_true", help="the record as a JSON object")

    p = add("diff", _command("files", "run_diff"), remote=False)
    p.add_argument("id", help="session id or unique prefix")
    p.add_argument("--turn", type=int, metavar="N", help="only turn N (1 is the session's first)")
    p.add_argument("--stat", action="store_true", help="files and lines changed, not the whole diff")

    p = add("rewind", _command("files", "run_rewind"))
    p.add_argument("id", help="session id or unique prefix")
    p.add_argument("--to", type=int, metavar="N", help="the first turn undone: files as they were before it")
    p.add_argument("--force", action="store_true", help="overwrite paths someone else changed since")
    p.add_argument("--undo", action="store_true", help="put back the files the last rewind changed")

    p = add("fork", _command("files", "run_fork"), remote=False)
    p.add_argument("id", help="session id or unique prefix")
    p.add_argument("--at", type=int, required=True, metavar="N", help="the new session starts before turn N")
    p.add_argument("--dir", metavar="PATH", help="its folder (new or empty; default beside the session's)")

    p = add("web", _command("web", "run_web"), remote=False)
    p.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="ADDR",
        help="the address to listen on (default 127.0.0.1, this machine only; "
        "another address needs --token-file)",
    )
    p.add_argument("--port", type=int, default=7433, metavar="P", help="0 picks a free one, printed")
    p.add_argument("--token-file", metavar="F", help="where the owner token is written (0600)")
    p.add_argument("--tls-cert", metavar="PEM", help="serve https with this certificate (and --tls-key)")
    p.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    p.add_argument(
        "--link", action="store_true", help="print a fresh sign-in link for the running tui web, and exit"
    )
    p.add_argument(
        "--ray",
        type=_ray_address,
        metavar="HOST:PORT",
        help='run the sessions\' workers on this Ray cluster (as [cluster] engine = "ray" and its address)',
    )

    p = add("remote", _command("web", "run_remote"), remote=False)
    rsub = p.add_subparsers(dest="action", required=True)
    r = rsub.add_parser("add", help="add a remote (checks it first)")
    r.add_argument("name")
    r.add_argument("url", help="http(s)://HOST:PORT of a tui web, or ssh://[USER@]HOST[:PORT]")
    r.add_argument("--token-file", metavar="F", help="a tui web's token")
    r.add_argument("--tui", metavar="COMMAND", help="ssh: how to run tui there (default: tui)")
    rsub.add_parser("list", help="list remotes")
    r = rsub.add_parser("remove", help="forget a remote")
    r.add_argument("name")

    p = sub.add_parser("relay", help=argparse.SUPPRESS, description="serve an SSH remote's connection")
    _global_options(p, nested=True)
    p.set_defaults(run=_command("machines", "run_relay"))

    p = add("share", _command("web", "run_share"))
    p.add_argument("args", nargs="+", metavar="ID | list ID | revoke ID")
    p.add_argument("--name", metavar="N")
    p.add_argument("--kind", choices=("viewer", "collaborator"))
    p.add_argument("--ttl", metavar="DURATION", help="e.g. 2h, 30m, 1d")
    p.add_argument("--turns", type=int, metavar="N", help="a collaborator's turn limit")
    p.add_argument("--token-file", metavar="F", help="write the token here (0600) instead of printing it")
    p.add_argument("--participant", metavar="N", help="with revoke: only this participant")
    return top


_HABITS = {
    "ls": ("sessions", "lists sessions"),
    "list": ("sessions", "lists sessions"),
    "ps": ("sessions", "lists sessions"),
    "status": ("sessions", "lists sessions"),
    "kill": ("stop ID", "stops a session's worker"),
    "rm": ("delete ID", "removes a session"),
    "remove": ("delete ID", "removes a session"),
    "del": ("delete ID", "removes a session"),
}
"""Words typed from other tools' habit, each refused in one line naming the command meant (a
bare word would otherwise start a session with it as its first prompt)."""


def _valued() -> set[str]:
    """Options before a command's name that take a value (so the value, `tui --model smart`'s
    `smart`, is not read as the command or a misspelling of one): every one of `tui [PROMPT]`'s."""
    return {name for action in build_parser()._actions if action.nargs != 0 for name in action.option_strings}


def parse(argv: list[str]) -> argparse.Namespace:
    """Parse a command line: ``tui [PROMPT]``, ``tui -- PROMPT`` or ``tui COMMAND …``."""
    # Global options that take a value hide the command's position; skip them.
    i, words, valued = 0, [], _valued()
    while i < len(argv):
        a = argv[i]
        if a == "--":
            break
        if a in valued and i + 1 < len(argv):
            i += 2
            continue
        if not a.startswith("-"):
            words.append(a)
            break
        i += 1
    first = words[0] if words else None
    if first in _SUBCOMMANDS:
        return _parse_command(argv)
    if first == "help":  # `tui help [COMMAND]`: the help, as --help gives it
        rest = argv[i + 1 :]
        if rest and rest[0] in _SUBCOMMANDS:
            return build_subparsers().parse_args([rest[0], "--help"])
        return build_parser().parse_args(["--help"])
    if first in _HABITS:
        command, what = _HABITS[first]
        print(
            f"tui: {first!r} is not a command; `tui {command}` {what} "
            f"(`tui -- {first}` sends it as a prompt)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    if first is not None and (meant := misspelt(first)) is not None:
        fixed = shlex.join(["tui", *argv[:i], meant, *argv[i + 1 :]])
        print(
            f"tui: {first!r} is not a command; did you mean `{fixed}`? "
            f"(`tui -- {shlex.quote(first)}` sends it as a prompt)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    if "--" in argv:
        cut = argv.index("--")
        ns = build_parser().parse_args(argv[:cut])
        ns.prompt = " ".join(argv[cut + 1 :]) or None
        return ns
    return build_parser().parse_args(argv)


def _parse_command(argv: list[str]) -> argparse.Namespace:
    """``tui COMMAND …``; a word it does not take is refused naming that command (argparse
    would name the top's usage, `tui [-h] …`, whatever the command)."""
    ns, extras = build_subparsers().parse_known_args(argv)
    if extras:
        prog = f"tui {ns.command}"
        if ns.command in ("context", "remote"):
            prog += f" {ns.action}"
        _Parser(prog=prog).error(f"unrecognized arguments: {' '.join(extras)}")
    return ns


def _distance(a: str, b: str) -> int:
    """Edit distance: insertions, deletions, substitutions and swaps of two neighbours each count 1."""
    rows = [list(range(len(b) + 1))]
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            row.append(min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (ca != cb)))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                row[j] = min(row[j], rows[-2][j - 2] + 1)
        rows.append(row)
    return rows[-1][-1]


def misspelt(word: str) -> str | None:
    """The command `word` is a misspelling of (cli.md: a bare word within edit distance 2 of a
    command's name), the nearest by difflib's likeness; None when it is no command's misspelling."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z_-]*", word) or word in _SUBCOMMANDS:
        return None
    near = [name for name in _SUBCOMMANDS if _distance(word.lower(), name) <= 2]
    if not near:
        return None
    like = difflib.get_close_matches(word.lower(), near, n=1, cutoff=0.0)
    return like[0] if like else near[0]


def defer_httpx_command_line() -> None:
    """httpx's ``__init__`` imports its own command line (``from ._main import main``: click,
    rich's progress bars, tables and syntax, Pygments' lexers), about 40 % of its import, which
    no tui process runs. A stand-in ``httpx._main`` whose ``main`` imports the real one when
    called keeps it out until then; nothing else of httpx reads that module."""
    if "httpx" in sys.modules or "httpx._main" in sys.modules:
        return
    import types

    def main(*args: object, **kwargs: object) -> object:
        sys.modules.pop("httpx._main", None)
        return importlib.import_module("httpx._main").main(*args, **kwargs)

    stand_in = types.ModuleType("httpx._main", "stands for httpx's command line until it is run")
    setattr(stand_in, "main", main)  # noqa: B010 - a module's attribute
    sys.modules["httpx._main"] = stand_in


def main(argv: list[str] | None = None) -> int:
    """Run one command and return its exit code (cli.md)."""
    args = parse(list(sys.argv[1:] if argv is None else argv))
    if getattr(args, "everywhere", False) and args.run == _command("listing", "run_sessions"):
        args.run = _command("machines", "run_everywhere")
    module_name, func_name = args.run.split(":")
    from tui.terminal import guard_stdio

    guard_stdio()  # what programs and agents wrote is shown, never acts on a terminal; pipes keep bytes
    defer_httpx_command_line()

    if module_name == "web" and func_name in ("run_web", "run_remote") and getattr(args, "remote", None):
        print(
            f"tui: --remote goes with session commands; `tui {args.command}` works on this machine",
            file=sys.stderr,
        )
        return 2
    try:
        module = importlib.import_module(f"tui.commands.{module_name}")
        command: Command = getattr(module, func_name)
        code = command(args)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # `tui sessions | head`: the reader has what it wanted. Python's docs' way: what is left
        # to write goes to /dev/null, so the flush at exit does not fail again.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except UsageError as exc:
        print(f"tui: {exc}", file=sys.stderr)
        return exc.exit_code
    except TuiError as exc:
        print(f"tui: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:  # one not mapped where it happened: still one line, naming the path
        error = os_error(exc, exc.filename or "a file", "use")
        print(f"tui: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        return 130
