"""A script is cut into turns the way its session reads prompts: Python programs as Python does."""

from __future__ import annotations

from tui.link.scripts import Input, split
from tui.protocol.python import syntax_error

PROGRAM = """import math

for i in range(2):
    print(i)

    print(i * 10)
print('after')
if 1 > 2:
    x = 1
else:
    x = 2
@staticmethod
def f():
    return (1,
2)
/stats
x = (1,
     2)
try:
    1/0
except ZeroDivisionError:
    pass
elsewhere = 3
await something()
"""


def test_a_python_script_is_cut_as_python_reads_it() -> None:
    got = [(i.first, i.last, i.text) for i in split(PROGRAM.splitlines(), "python")]
    assert got == [
        (1, 1, "import math"),
        (3, 6, "for i in range(2):\n    print(i)\n\n    print(i * 10)"),
        (7, 7, "print('after')"),
        (8, 11, "if 1 > 2:\n    x = 1\nelse:\n    x = 2"),
        (12, 15, "@staticmethod\ndef f():\n    return (1,\n2)"),
        (16, 16, "/stats"),
        (17, 18, "x = (1,\n     2)"),
        (19, 22, "try:\n    1/0\nexcept ZeroDivisionError:\n    pass"),
        (23, 23, "elsewhere = 3"),
        (24, 24, "await something()"),
    ]
    assert all(syntax_error(text) is None for _, _, text in got if not text.startswith("/"))


def test_prose_is_one_input_that_is_not_python() -> None:
    (prose, after) = split(["hello there, world", "print(1)"], "python")
    assert prose == Input("hello there, world", 1, 1) and after.text == "print(1)"
    assert syntax_error(prose.text) is not None


def test_an_unfinished_statement_at_the_end_is_sent_as_it_is() -> None:
    (only,) = split(["print(1,", "   2"], "python")
    assert only == Input("print(1,\n   2", 1, 2) and syntax_error(only.text) is not None


def test_lines_and_whole() -> None:
    assert [i.text for i in split(["a \\", "b", "", "c"], "lines")] == ["a \nb", "c"]
    (whole,) = split(["def f():", "    return 1", "", "print(f())"], "whole")
    assert whole == Input("def f():\n    return 1\n\nprint(f())", 1, 4)
