"""The page's Markdown renderer (`tui/web/static/md.js`) under node: one render of inputs made to
be slow (unclosed `**`, `~~`, `[`, backticks, a mix) and of plain prose, at 32 KB and 256 KB,
each beside a `JSON.parse` of a string of the same size in the same node process (the baseline),
with the ratio. Run: `.venv/bin/python bench/page.py [REPEAT]` (node must be installed)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "tests" / "web" / "md_node.js"
MD = ROOT / "tui" / "web" / "static" / "md.js"

UNITS = {
    "unclosed **": "**a ",
    "unclosed ~~": "~~a ",
    "unclosed [": "[a ",
    "backticks": "` `` ``` ",
    "mixed": "**a ~~b *c _d `e [f]( <http://g ",
    "prose": "The quick **brown** fox jumps over the *lazy* dog, `twice`. ",
}


def main() -> int:
    node = shutil.which("node")
    if node is None:
        print("node is not installed (apt-get install nodejs)", file=sys.stderr)
        return 2
    repeat = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    sizes = (32 * 1024, 256 * 1024)
    rows = [
        (name, size, (unit * (size // len(unit) + 1))[:size])
        for size in sizes
        for name, unit in UNITS.items()
    ]
    ran = subprocess.run(
        [node, str(HARNESS), str(MD)],
        input=json.dumps({"inputs": [text for _, _, text in rows], "repeat": repeat}),
        capture_output=True,
        text=True,
        check=True,
    )
    print(f"md.js, one render (mean of {repeat}), beside JSON.parse of a string as long")
    print(f"{'input':<14}{'size':>7}{'md.js ms':>11}{'JSON ms':>10}{'ratio':>9}{'work/char':>11}")
    for (name, size, _), out in zip(rows, json.loads(ran.stdout), strict=True):
        ratio = out["ms"] / max(out["json_ms"], 1e-3)
        work = out["work"] / size
        times = f"{out['ms']:>11.1f}{out['json_ms']:>10.2f}{ratio:>9.0f}"
        print(f"{name:<14}{size // 1024:>5}KB{times}{work:>11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
