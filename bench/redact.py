"""What redaction and the journal's chain cost (issue 43).

Run with ``.venv/bin/python bench/redact.py [EVENTS]``:

- the web bridge's shared stream of a session, as `tui.web.fanout.Shared` reads it: EVENTS SSE
  messages (a program's output lines in chunks, a status now and then) split and kept as before,
  beside the same with each message passed through `StreamRedactor` (done once per event for
  every follower of the session: followers are sent the ring's bytes);
- the journal's append (`Journal.append`, one ``write`` each) with its chain (`tui.store.chain`:
  one SHA-256 and one more ``write``) beside the same with no chain;
- the lines of this project's own source and tests (``tui/``, ``tests/``) `redact` changes: what
  it takes out that is not a secret.

The figures go into docs/performance.md, "Redaction and the journal's chain".
"""

from __future__ import annotations

import glob
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import WORDS

from tui.protocol import TextChunk
from tui.redact import StreamRedactor, lines_changed
from tui.store import Journal
from tui.web.fanout import _messages, _seq

ROOT = Path(__file__).resolve().parent.parent


def _stream(events: int) -> list[bytes]:
    out = []
    for seq in range(1, events + 1):
        if seq % 20 == 0:
            data = {"seq": seq, "at": "2026-12-05T02:00:00.000000Z", "type": "status", "state": "working"}
        else:
            words = " ".join(WORDS[(seq + i) % len(WORDS)] for i in range(12))
            text = f"step {seq}: {words}\n" if seq % 3 else f"step {seq}: {words} "
            data = {
                "seq": seq,
                "at": "2026-12-05T02:00:00.000000Z",
                "type": "text",
                "turn_id": "t-1",
                "text": text,
            }
        body = json.dumps(data, separators=(",", ":")).encode()
        out.append(b"id: %d\nevent: %s\ndata: %s\n\n" % (seq, data["type"].encode(), body))
    return out


def _plain(chunks: list[bytes]) -> int:
    rest, kept = b"", 0
    for chunk in chunks:
        messages, rest = _messages(rest, chunk)
        for message in messages:
            if _seq(message) is not None:
                kept += len(message + b"\n\n")
    return kept


def _redacted(chunks: list[bytes]) -> int:
    rest, kept, redactor = b"", 0, StreamRedactor()
    for chunk in chunks:
        messages, rest = _messages(rest, chunk)
        for message in messages:
            if _seq(message) is not None:
                kept += sum(len(m) + 2 for m in redactor.feed(message))
    return kept + sum(len(m) + 2 for m in redactor.flush())


def _best(run: object, *args: object, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        run(*args)  # type: ignore[operator]
        times.append(time.perf_counter() - t)
    return min(times)


def _appends(events: int, chained: bool) -> float:
    with tempfile.TemporaryDirectory() as d:
        journal = Journal.open_for_append(Path(d) / "journal.jsonl")
        if not chained and journal.chain is not None:
            journal.chain.close()
            journal.chain = None
        t = time.perf_counter()
        for i in range(events):
            journal.append(TextChunk(turn_id="t-1", text=f"line {i} {WORDS[i % len(WORDS)]}\n"))
        took = time.perf_counter() - t
        journal.close()
        return took


def main() -> None:
    events = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    stream = _stream(events)
    chunks = [b"".join(stream[i : i + 4]) for i in range(0, len(stream), 4)]
    StreamRedactor().feed(stream[0][:-2])  # the rules are made once, on first use
    plain = _best(_plain, chunks)
    redacted = _best(_redacted, chunks)
    print(
        f"shared stream, {events} events: plain {plain / events * 1e6:.1f} µs/event, "
        f"redacted {redacted / events * 1e6:.1f} µs/event ({redacted / plain:.1f}x), "
        f"{events / redacted:,.0f} events/s redacted"
    )

    runs = [(_appends(events, False), _appends(events, True)) for _ in range(3)]
    bare = statistics.median(r[0] for r in runs)
    chained = statistics.median(r[1] for r in runs)
    print(
        f"journal append, {events} events: plain {bare / events * 1e6:.1f} µs, "
        f"chained {chained / events * 1e6:.1f} µs ({chained / bare:.2f}x)"
    )

    files = sorted(glob.glob(str(ROOT / "tui/**/*.py"), recursive=True))
    files += sorted(glob.glob(str(ROOT / "tests/**/*.py"), recursive=True))
    t = time.perf_counter()
    changed, total = lines_changed(iter(files))
    took = time.perf_counter() - t
    print(
        f"own source and tests: {changed} of {total} lines changed ({changed / total:.3%}), "
        f"{total / took:,.0f} lines/s"
    )


if __name__ == "__main__":
    main()
