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
    (b'{"seq":1}', b"1"),
    (b'{"seq":2,\n"x":"data: y"}', b"2"),
    (b'{"seq":3}', b"2"),
    (b'{"seq":4}', b"4"),
    (b'{"seq":5}', b"5"),
    (b'{"seq":6}', b"5"),
]


def test_messages_are_the_same_however_the_stream_is_cut() -> None:
    rng = random.Random(16)
    for _ in range(300):
        reader = _SseReader()
        got: list[tuple[bytes, bytes | None]] = []
        cuts = sorted(rng.sample(range(1, len(STREAM)), rng.randint(0, 12)))
        for a, b in zip([0, *cuts], [*cuts, len(STREAM)], strict=True):
            got += reader.feed(STREAM[a:b])
        assert got == EXPECTED
        assert reader.retry == 2500


def test_a_replay_of_worker_messages_reads_the_same_with_comments_and_fields_among_them() -> None:
    # The worker's own messages are read by one search over a chunk; anything else among them
    # (a comment, a retry, a second data line, an id with no event) must still be read by the rules.
    messages = [b'id: %d\nevent: text\ndata: {"seq":%d}\n\n' % (n, n) for n in range(1, 201)]
    messages[50] = b": ping\n\n" + messages[50]
    messages[90] = b": disk_full no space left\n\n" + messages[90]
    messages[120] = b'id: 121\nevent: text\ndata: {"seq":121}\nretry: 700\n\n'
    messages[150] = b'id: 151\nevent: text\ndata: {"seq":151,\ndata: "x":1}\n\n'
    messages[170] = b'id: 171\ndata: {"seq":171}\n\n'
    stream = b"".join(messages)
    expected: list[tuple[bytes, bytes | None]] = [(b'{"seq":%d}' % n, b"%d" % n) for n in range(1, 201)]
    expected[150] = (b'{"seq":151,\n"x":1}', b"151")
    rng = random.Random(32)
    for _ in range(200):
        reader = _SseReader()
        got: list[tuple[bytes, bytes | None]] = []
        cuts = sorted(rng.sample(range(1, len(stream)), rng.randint(0, 8)))
        for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True):
            got += reader.feed(stream[a:b])
        assert got == expected
        assert reader.retry == 700
        assert reader.disk_full == "no space left"
