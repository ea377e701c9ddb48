"""Bounding one result's output by ``max_output_tokens``."""

from __future__ import annotations

__all__ = ["CHARS_PER_TOKEN", "shorten"]

CHARS_PER_TOKEN = 4
"""A token, for the purpose of ``max_output_tokens``, is this many characters."""


def shorten(text: str, max_output_tokens: int | None) -> str:
    """Keep the beginning and the end of ``text`` within ``max_output_tokens``.

    Args:
        text: the output of one observation.
        max_output_tokens: the bound, in tokens of 4 characters; None for no bound.

    Returns:
        ``text`` itself when it fits; else its head, one marker line saying how many characters
        were left out, and its tail, together no longer than the bound (the marker line alone
        when the bound is smaller than it).
    """
    if max_output_tokens is None:
        return text
    budget = max(max_output_tokens, 0) * CHARS_PER_TOKEN
    if len(text) <= budget:
        return text
    left_out = len(text)
    for _ in range(8):
        marker = f"\n[... {left_out} characters left out ...]\n"
        keep = max(budget - len(marker), 0)
        head = (keep + 1) // 2
        tail = keep - head
        if len(text) - head - tail == left_out:
            break
        left_out = len(text) - head - tail
    return text[:head] + marker + (text[len(text) - tail :] if tail else "")
