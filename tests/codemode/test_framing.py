"""Frames survive any split of the stream, and a broken stream is recognised."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tui.codemode.framing import HEADER, KIND_OUTPUT, FrameReader, decode_message, encode_message


def output_frame(data: bytes) -> bytes:
    return HEADER.pack(KIND_OUTPUT, len(data)) + data


@given(
    chunks=st.lists(st.binary(max_size=300), max_size=8),
    cuts=st.lists(st.integers(min_value=1, max_value=97), max_size=40),
)
def test_frames_come_out_whole_and_in_order_however_the_stream_is_cut(
    chunks: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(output_frame(c) + encode_message({"t": "done", "id": i}) for i, c in enumerate(chunks))
    reader = FrameReader()
    frames: list[tuple[int, bytes]] = []
    position = 0
    for cut in [*cuts, len(stream)]:
        frames += reader.feed(stream[position : position + cut])
        position += cut
    frames += reader.feed(stream[position:])
    expected: list[tuple[int, bytes]] = []
    for i, chunk in enumerate(chunks):
        expected.append((KIND_OUTPUT, chunk))
        expected.append((0, encode_message({"t": "done", "id": i})[HEADER.size :]))
    assert frames == expected
    assert [decode_message(p)["id"] for k, p in frames if k == 0] == list(range(len(chunks)))


def test_a_broken_stream_is_refused() -> None:
    with pytest.raises(ValueError, match="kind 255"):
        FrameReader().feed(b"\xff" * 64)
    with pytest.raises(ValueError, match="not a JSON object"):
        decode_message(b"[1, 2]")
