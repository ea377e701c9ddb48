"""`tui.terminal`: what text may reach a terminal (issue 21)."""

from __future__ import annotations

import io

from tui.protocol import TextChunk, ToolStarted
from tui.terminal import VisibleBytes, visible, visible_data


def test_controls_are_shown_and_newlines_and_tabs_kept() -> None:
    assert visible("a\x1b]52;c;eA==\x07b") == "a␛]52;c;eA==␇b"
    assert visible("\x1b]0;t\x1b\\") == "␛]0;t␛\\"
    assert visible("\x9b2J \x9d0;t\x9c \x90q") == "␛[2J ␛]0;t␛\\ ␛Pq"  # C1: the ESC form of each
    assert visible("x\ty\nz\r\nw\rv\x7f\x00\x08") == "x\ty\nz\r\nw␍v␡␀␈"
    plain = "nothing to do: ünïcode, ␛ itself"
    assert visible(plain) is plain


def test_bytes_to_a_terminal_are_shown_even_when_cut_between_writes() -> None:
    out = io.BytesIO()
    stream = VisibleBytes(out)
    data = "é\x9b[2J".encode() + b"\x9b\xff\x1b]0;x\x07"
    for i in range(len(data)):  # one byte a write: a character cut in two is held until whole
        stream.write(data[i : i + 1])
    assert out.getvalue().decode() == "é␛[[2J\\x9b\\xff␛]0;x␇"


def test_every_string_of_an_event_is_cleaned_and_clean_ones_are_not_copied() -> None:
    chunk = TextChunk(seq=1, turn_id="t", text="\x1b[2Jhi")
    assert visible_data(chunk).text == "␛[2Jhi"
    clean = TextChunk(seq=2, turn_id="t", text="hi")
    assert visible_data(clean) is clean
    tool = ToolStarted(
        seq=3, turn_id="t", call_id="c", name="run", args={"code": "print('\x07')", "n": [1, "\x1b"]}
    )
    got = visible_data(tool)
    assert got.args == {"code": "print('␇')", "n": [1, "␛"]}
