"""The event stream's reader: the same messages whatever the stream's chunks, as the SSE rules say."""

from __future__ import annotations

import random

from tui.link.client import _SseReader

STREAM = (
    b": ping\n\n"
    b'id: 1\nevent: text\ndata: {"seq":1}\n\n'
    b"retry: 2500\n\n"
    b'id: 2\r\nevent: text\r\ndata: {"seq":2,\r\ndata: "x":"data: y"}\r\n\r\n'
    b'data:{"seq":3}\n: a comment\n\n'
    b'\n\nid: 4\nevent: text\ndata: {"seq":4}\n\n'
    b'id: 5\rdata: {"seq":5}\r\r'
    b'data: {"seq":6}\n\n'
)
EXPECTED = [
    (b'{"seq":1}', "1"),
    (b'{"seq":2,\n"x":"data: y"}', "2"),
    (b'{"seq":3}', "2"),
    (b'{"seq":4}', "4"),
    (b'{"seq":5}', "5"),
    (b'{"seq":6}', "5"),
]


def test_messages_are_the_same_however_the_stream_is_cut() -> None:
    rng = random.Random(16)
    for _ in range(300):
        reader = _SseReader()
        got: list[tuple[bytes, str | None]] = []
        cuts = sorted(rng.sample(range(1, len(STREAM)), rng.randint(0, 12)))
        for a, b in zip([0, *cuts], [*cuts, len(STREAM)], strict=True):
            got += reader.feed(STREAM[a:b])
        assert got == EXPECTED
        assert reader.retry == 2500
