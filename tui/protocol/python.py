"""What a python session's prompt is: a whole Python program, as the session compiles it.

One rule for the worker (a prompt that is not Python gets a reply saying so) and the clients (a
script's line that is not Python fails without being sent).
"""

from __future__ import annotations

import ast
import traceback

__all__ = ["syntax_error", "syntax_report"]


def syntax_error(source: str) -> str | None:
    """None when `source` is a whole Python program (top-level ``await`` allowed), else why not
    (one short phrase naming the line)."""
    try:
        compile(source, "<program>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}" if exc.lineno else str(exc.msg)
    except ValueError as exc:
        return str(exc)
    return None


def syntax_report(source: str, filename: str = "<program>") -> str | None:
    """None when `source` is a whole Python program, else the error as Python prints it: the
    file and line, the line itself, a caret under where it broke, and ``SyntaxError: …``."""
    try:
        compile(source, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        return "".join(traceback.format_exception_only(exc))
    return None
