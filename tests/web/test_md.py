"""The page's Markdown renderer (`tui/web/static/md.js`) under node, with a small DOM of its own
(`md_node.js`): inputs made to be slow (thousands of unclosed `**`, `~~`, `*`, `[`, backticks,
autolinks, a line of spaces after a heading) render as they should, and the work md.js counts
grows with the input's size and no faster. The 256 KB inputs took seconds each, up to 13 s,
before; the subprocess's timeout is only a guard against a hang."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tui.web.page import STATIC

NODE = shutil.which("node")
HARNESS = Path(__file__).with_name("md_node.js")
KB = 1024

if NODE is None:
    pytest.skip(
        "node is not installed (apt-get install nodejs): md.js is tested under it", allow_module_level=True
    )


def render(inputs: list[str]) -> list[dict[str, Any]]:
    """md.js's HTML and counted work for each input, in one node process."""
    assert NODE is not None
    ran = subprocess.run(
        [NODE, str(HARNESS), str(STATIC / "md.js")],
        input=json.dumps({"inputs": inputs}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    answer: list[dict[str, Any]] = json.loads(ran.stdout)
    return answer


def _times(unit: str, size: int) -> str:
    return unit * (size // len(unit))


def _plain(text: str) -> str:
    return f'<div class="md"><p>{html.escape(text.strip(), quote=False)}</p></div>'


def _rising_ticks(size: int) -> str:
    """Runs of backticks each longer than the last: none ever closes."""
    out, n = [], 1
    while sum(map(len, out)) < size:
        out.append("`" * n + "a")
        n += 1
    return "".join(out)


UNCLOSED = {
    "~~": "~~a ",
    "*": "*a ",
    "_": "_a ",
    "[": "[a ",
    "](": "[a](",
    "<": "<http://a ",
    "mixed": "~~a *b [c <http://e _f [g](h ",
}
"""Units repeated to a size, in which no delimiter closes: the whole renders as plain text."""


def _cases(size: int) -> dict[str, tuple[str, str]]:
    cases = {name: (_times(unit, size), _plain(_times(unit, size))) for name, unit in UNCLOSED.items()}
    pairs = _times("**a **a ", size)  # no ** closes; each second * closes an em
    cases["**"] = (
        pairs,
        '<div class="md"><p>' + ("<em>*a *</em>a " * (len(pairs) // 8)).rstrip() + "</p></div>",
    )
    ticks = _rising_ticks(size)
    cases["`"] = (ticks, _plain(ticks))
    spaces = "# " + " " * size + "x ##"
    cases["heading"] = (spaces, '<div class="md"><h1>x</h1></div>')
    quotes = ">" * size + " q"
    cases["quotes"] = (quotes, None)  # nested deeper than the page shows: the rest as text
    return {k: (v[0], v[1] or "") for k, v in cases.items()}


def test_inputs_made_to_be_slow_render_as_they_should_in_work_linear_in_their_size() -> None:
    small, large = _cases(32 * KB), _cases(256 * KB)
    names = list(small)
    done = render([small[n][0] for n in names] + [large[n][0] for n in names])
    for k, name in enumerate(names):
        for case, out in ((small[name], done[k]), (large[name], done[len(names) + k])):
            text, expected = case
            if expected:
                assert out["html"] == expected, (name, out["html"][:300])
            assert out["work"] <= 16 * len(text), (name, out["work"], len(text))
        grew = done[len(names) + k]["work"] / done[k]["work"]
        size = len(large[name][0]) / len(small[name][0])
        assert grew <= 1.25 * size, (name, grew, size)  # 8x the input: about 8x the work, not 64x
    quoted = done[names.index("quotes") + len(names)]["html"]
    assert (
        quoted.count("<blockquote>") == 9
        and "&gt;" * 100 in quoted
        and quoted.endswith(" q</p>" + "</blockquote>" * 9 + "</div>")
    )


def test_markdown_still_renders_what_it_rendered() -> None:
    cases = {
        "# Hi **there** _you_ `code` ~~x~~": (
            "<h1>Hi <strong>there</strong> <em>you</em> <code>code</code> <del>x</del></h1>"
        ),
        '[a](https://x.y "t") <https://q.r> [b](javascript:alert(1))': (
            '<p><a href="https://x.y" rel="noopener noreferrer nofollow" target="_blank">a</a> '
            '<a href="https://q.r" rel="noopener noreferrer nofollow" target="_blank">https://q.r</a> '
            "[b](javascript:alert(1))</p>"
        ),
        "``a ` b`` \\*not em\\* *em* **strong *em* inside**": (
            "<p><code>a ` b</code> *not em* <em>em</em> <strong>strong <em>em</em> inside</strong></p>"
        ),
        "- a\n- b\n  - c\n\n> q\n\n|a|b|\n|--|--|\n|1|2|\n\n---": (
            "<ul><li>a</li><li><p>b</p><ul><li>c</li></ul></li></ul><blockquote><p>q</p></blockquote>"
            '<div class="table"><table><tr><th>a</th><th>b</th></tr>'
            "<tr><td>1</td><td>2</td></tr></table></div><hr></hr>"
        ),
        "```py\n<b>x</b>\n```": "<pre><code>&lt;b&gt;x&lt;/b&gt;</code></pre>",
    }
    done = render(list(cases))
    for (text, expected), out in zip(cases.items(), done, strict=True):
        assert re.sub(r'^<div class="md">|</div>$', "", out["html"]) == expected, (text, out["html"])
