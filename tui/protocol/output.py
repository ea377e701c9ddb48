"""A running call's output as the reducer keeps it: whole, or folded to a head and a tail.

The worker keeps every character (the ended turn's record holds the whole output); a client's
`Attachment` keeps, for each call of the running turn, its first and last characters and counts
what it left out between them (`KEEP_OUTPUT`), as a folded program output shows its first and
last lines and counts the rest: a call printing gigabytes costs a client no more than one
printing a megabyte. The head ends and the tail starts at a line's boundary (a line longer than
either is cut where it must be), so the pieces the output came in are joined first: a word cut
between two pieces is kept whole.

`received` counts every character that arrived, a cursor for a reader drawing it as it grows:
`since(n)` is what came after the first `n`, while it is still kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["KEEP_OUTPUT", "KeptOutput", "left_out_line"]

KEEP_OUTPUT = (100_000, 1_000_000)
"""Characters of a running call's output a client keeps: its first and its last (what the screen
shows of it, its first 20 and last 200 lines of at most 4,000 characters each, fits)."""


def left_out_line(lines: int, chars: int) -> str:
    """The line standing in a folded output for what was left out."""
    plural = "" if lines == 1 else "s"
    return f"[… {lines:,} line{plural} ({chars:,} characters) left out …]\n"


@dataclass(slots=True)
class KeptOutput:
    """One call's output: all of it, or its head, its tail and a count of what is between.

    A plain dataclass (pydantic validates and dumps it as a field of `RunningTurn`): adding a
    piece costs no model's attribute hooks.
    """

    head: str = ""
    """The first characters, once the output was folded (up to the end of a line)."""
    tail: list[str] = field(default_factory=list)
    """The pieces after the head (or after what was left out), as they came."""
    tail_chars: int = 0
    left_out: int = 0
    """Characters left out between the head and the tail."""
    left_out_lines: int = 0
    """Line ends among them: how many lines were left out."""
    received: int = 0
    """Every character that arrived, kept or not."""

    @classmethod
    def of(cls, text: str, keep: tuple[int, int] | None = None) -> KeptOutput:
        """An output that is `text` (kept as `add` keeps it)."""
        kept = cls()
        kept.add(text, keep)
        return kept

    @property
    def folded(self) -> bool:
        """Whether some of it was left out."""
        return self.left_out > 0

    def add(self, text: str, keep: tuple[int, int] | None = None) -> None:
        """More output; `keep` (head, tail characters) folds it once it grows past twice that, so
        each character costs O(1) however much arrives. None keeps every character."""
        if not text:
            return
        self.tail.append(text)
        self.tail_chars += len(text)
        self.received += len(text)
        if keep is None:
            return
        head, tail = keep
        if self.tail_chars > (2 * tail if self.head or self.left_out else head + 2 * tail):
            self._fold(head, tail)

    def tail_text(self) -> str:
        """What is kept after the head, as one string (kept joined from now on)."""
        if len(self.tail) > 1:
            self.tail[:] = ["".join(self.tail)]
        return self.tail[0] if self.tail else ""

    def _fold(self, head: int, tail: int) -> None:
        rest = self.tail_text()
        if not self.head and not self.left_out:
            end = rest.rfind("\n", 0, head) + 1 or head  # after the last line end within it
            self.head, rest = rest[:end], rest[end:]
        start = len(rest) - tail
        if start <= 0:
            self.tail[:] = [rest] if rest else []
            self.tail_chars = len(rest)
            return
        line = rest.find("\n", start, len(rest) - 1) + 1 or start  # the tail starts a line
        self.left_out += line
        self.left_out_lines += rest.count("\n", 0, line)
        kept = rest[line:]
        self.tail[:] = [kept]
        self.tail_chars = len(kept)

    def text(self) -> str:
        """The output as kept: whole, or its head, a line saying what was left out, its tail."""
        tail = self.tail_text()
        if not self.left_out:
            return self.head + tail
        head = self.head if not self.head or self.head.endswith("\n") else self.head + "\n"
        return head + left_out_line(self.left_out_lines, self.left_out) + tail

    def since(self, seen: int) -> str | None:
        """What arrived after the first `seen` characters; None when some of it was left out
        (a reader draws `text()` again then)."""
        want = self.received - seen
        if want <= 0:
            return ""
        if want > self.tail_chars:  # the head is kept only once some was left out after it
            return None
        got: list[str] = []
        have = 0
        for piece in reversed(self.tail):
            got.append(piece)
            have += len(piece)
            if have >= want:
                break
        got.reverse()
        text = "".join(got)
        return text[len(text) - want :]
