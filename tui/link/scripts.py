"""How a script on stdin becomes turns: by lines, the way Python's REPL reads a program, or whole.

A session says in `/info` what its prompts are (``prompt_syntax``). For a ``python`` session a
script is split as Python reads it: a simple statement is one input as soon as it is complete;
a compound statement (``for``, ``def``, ``if``/``else``, ``try``, a decorated definition …)
goes on through its indented lines, its blank lines and its ``else``/``elif``/``except``/
``finally`` clauses, and ends at the first line that starts a new statement at column 0 (or at
the end of the script); an open bracket, a backslash or an open string keeps it going. A line
that starts with ``/`` between statements is a slash command. For any other session a line is
one input, and a line ending in ``\\`` continues on the next. ``--whole`` sends the whole script
as one input.
"""

from __future__ import annotations

import ast
import codeop
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

__all__ = ["Input", "Split", "Splitter", "split"]

Split = Literal["lines", "python", "whole"]
"""How a script is cut into inputs."""

_CLAUSE = re.compile(r"(else|elif|except|finally)\b")
"""A line at column 0 that goes on with the compound statement before it."""
_COMPOUND = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    ast.TryStar,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Match,
)


@dataclass(frozen=True)
class Input:
    """One input of a script: a prompt or a slash command, and where it stands in the script."""

    text: str
    first: int
    """Its first line's number in the script (1-based)."""
    last: int
    """Its last line's number."""

    @property
    def slash(self) -> bool:
        return self.text.startswith("/") and not self.text.startswith("//")


def _compiler() -> codeop.CommandCompiler:
    compiler = codeop.CommandCompiler()
    # A program may await at top level, as the session runs it.
    compiler.compiler.flags |= ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    return compiler


class Splitter:
    """Cuts a script into inputs as its lines arrive (`feed`), and at its end (`end`).

    Args:
        how: ``lines``, ``python`` or ``whole`` (see the module's docstring).
    """

    def __init__(self, how: Split) -> None:
        self.how = how
        self._lines: list[str] = []
        self._first = 0
        self._blank: list[str] = []
        self._compile = _compiler()

    def feed(self, number: int, line: str) -> list[Input]:
        """Take line `number` (1-based, without its newline); the inputs it completes."""
        if self.how == "whole":
            if not self._lines:
                self._first = number
            self._lines.append(line)
            return []
        if self.how == "lines":
            return self._feed_line(number, line)
        return self._feed_python(number, line)

    def end(self, number: int) -> list[Input]:
        """The script ended after line `number`: what is still held."""
        if self.how == "whole":
            text = "\n".join(self._lines)
            return [Input(text, self._first or 1, number)] if text.strip() else []
        return self._flush(number - len(self._blank))

    def _flush(self, last: int) -> list[Input]:
        if not self._lines:
            self._blank = []
            return []
        text = "\n".join(self._lines)
        self._lines, self._blank = [], []
        return [Input(text, self._first, last)]

    def _feed_line(self, number: int, line: str) -> list[Input]:
        if not self._lines:
            self._first = number
        if line.endswith("\\"):
            self._lines.append(line[:-1])
            return []
        self._lines.append(line)
        done = self._flush(number)
        return [i for i in done if i.text.strip()]

    def _state(self) -> Literal["incomplete", "open", "done", "invalid"]:
        """Whether what is held is incomplete, a complete compound statement that may go on,
        a complete simple statement, or not Python at all."""
        source = "\n".join(self._lines)
        try:
            code = self._compile(source, "<script>", "exec")
        except (SyntaxError, ValueError, OverflowError):
            return "invalid"
        if code is None:
            return "incomplete"
        try:
            body = ast.parse(source).body
        except SyntaxError:
            return "done"
        return "open" if body and isinstance(body[-1], _COMPOUND) else "done"

    def _feed_python(self, number: int, line: str) -> list[Input]:
        out: list[Input] = []
        if self._lines:
            if not line.strip():
                self._blank.append(line)
                return out
            state = self._state()
            goes_on = state == "incomplete" or (
                state == "open" and (line[:1].isspace() or _CLAUSE.match(line) is not None)
            )
            if goes_on:
                self._lines += [*self._blank, line]
                self._blank = []
                return out
            out += self._flush(number - 1 - len(self._blank))
        if not line.strip():
            return out
        if line.startswith("/") and not line.startswith("//"):
            return [*out, Input(line.strip(), number, number)]
        self._lines, self._first = [line], number
        state = self._state()
        if state in ("done", "invalid"):
            out += self._flush(number)
        return out


def split(lines: Iterable[str], how: Split) -> Iterator[Input]:
    """The inputs of a whole script (for tests and whole-file reads)."""
    splitter = Splitter(how)
    number = 0
    for number, raw in enumerate(lines, start=1):
        yield from splitter.feed(number, raw.rstrip("\n").rstrip("\r"))
    yield from splitter.end(number)
