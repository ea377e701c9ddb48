"""What a search of the index (`tui.store.index`) looks for and what it finds: the words typed
(`Query`, as FTS5 and as a pattern), the line shown around a match (`snippet`) and a hit (`Hit`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from tui.errors import UsageError
from tui.store.index_texts import Where

__all__ = ["SNIPPET", "Hit", "Query", "snippet"]

SNIPPET = 100
"""Characters of a hit's snippet."""

# --- what to find ----------------------------------------------------------------------------
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Query:
    """What a person typed, as FTS5 and as a pattern for the snippet.

    The text is found as written: its words in that order whatever separates them (``os.path``
    finds ``os.path`` and ``os path``), case-insensitively; a ``*`` at its end makes its last word
    a prefix (``timeo*`` finds ``timeout``).

    Raises:
        UsageError: the text holds no word to find.
    """

    text: str
    words: tuple[str, ...] = field(init=False)
    prefix: bool = field(init=False)

    def __post_init__(self) -> None:
        words = tuple(w.lower() for w in _WORD.findall(self.text))
        if not words:
            raise UsageError(
                f"nothing to search for in {self.text!r}: give a word or a phrase, "
                "e.g. `tui search 'timed out'`"
            )
        object.__setattr__(self, "words", words)
        object.__setattr__(self, "prefix", self.text.rstrip().endswith("*"))

    @property
    def match(self) -> str:
        """The FTS5 query: one phrase, its last word a prefix when asked."""
        return '"' + " ".join(self.words) + '"' + ("*" if self.prefix else "")

    @property
    def pattern(self) -> re.Pattern[str]:
        """Where the words are in a text (for the snippet and its mark)."""
        body = r"[\W_]+".join(re.escape(w) for w in self.words)
        tail = r"[^\W_]*" if self.prefix else r"(?![^\W_])"  # a prefix marks its whole word
        return re.compile(r"(?<![^\W_])" + body + tail, re.IGNORECASE)


def snippet(text: str, found: re.Match[str], width: int = SNIPPET) -> tuple[str, tuple[int, int]]:
    """The line of `text` around `found`, cut to about `width` characters, and where the match
    is in it (start, end)."""
    at, stop = found.span()
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    line = text[start : len(text) if end < 0 else end]
    at, stop = at - start, min(stop, start + len(line)) - start
    begin = 0
    if len(line) > width:
        begin = max(0, min(at - width // 3, len(line) - width))
    cut = line[begin : begin + width]
    lead = len(cut) - len(cut.lstrip())
    shown = cut.strip()
    pre = "…" if begin else ""
    post = "…" if begin + width < len(line) else ""
    m0 = len(pre) + at - begin - lead
    m1 = min(len(pre) + stop - begin - lead, len(pre) + len(shown))
    return pre + shown + post, (max(0, m0), max(0, m1))


# --- hits ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Hit:
    """One text of one session where the words were found."""

    session_id: str
    turn: int
    """The turn's 1-based number in its session (0: before its first turn)."""
    at: datetime
    """When the turn started (an event between turns: when it was written)."""
    where: Where
    name: str
    """The tool's name for ``tool`` (and a tool's ``error``)."""
    snippet: str
    match: tuple[int, int]
    """Where the words are in `snippet` (start, end)."""
    title: str = ""
    folder: str = ""
    agent: str = ""
    archived: bool = False

    @property
    def place(self) -> str:
        """Where, as read: ``tool grep``, ``reply``."""
        return f"{self.where} {self.name}" if self.name and self.where in ("tool", "error") else self.where

    def marked(self, before: str = "«", after: str = "»") -> str:
        """The snippet with the match between `before` and `after`."""
        a, b = self.match
        return self.snippet[:a] + before + self.snippet[a:b] + after + self.snippet[b:]
