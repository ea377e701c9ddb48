"""Search over a 10,000-turn session, end to end: ``GET /search`` of a real worker, timed from the
request to the whole answer (the first hits and the total), for a word of one early turn, a word
of every turn, and a word of none.

Run: ``.venv/bin/python bench/search.py [--turns N]``. Each figure is printed on its own line.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from common import WORDS

from tui.link.launch import start_worker
from tui.protocol import By, TextChunk, ToolEnded, ToolOutput, ToolStarted, TurnEnded, TurnStarted
from tui.store import Journal, StatePaths, create_session


def write_session(journal: Path, turns: int) -> int:
    """A journal of `turns` turns, each a prompt, a tool call with a few lines of output, a reply."""
    with Journal.open_for_append(journal) as j:
        for i in range(turns):
            turn_id = f"t-{i:06d}"
            word = "kingfisher" if i == 2 else WORDS[i % len(WORDS)]
            j.append(
                TurnStarted(turn_id=turn_id, prompt=f"print(fib({i % 30}))  # {word}", by=By(name="bench"))
            )
            call = f"call-{i:06d}"
            j.append(
                ToolStarted(turn_id=turn_id, call_id=call, name="run_python", args={"code": f"fib({i})"})
            )
            j.append(ToolOutput(turn_id=turn_id, call_id=call, text="".join(f"row {k}\n" for k in range(20))))
            j.append(ToolEnded(turn_id=turn_id, call_id=call, status="completed"))
            reply = f"fib({i % 30}) is {i * 7}; the {word} said so in {i % 13} ms.\n"
            j.append(TextChunk(turn_id=turn_id, text=reply))
            j.append(TurnEnded(turn_id=turn_id, outcome="completed", reply=reply))
        return journal.stat().st_size


async def timed(sock: str, q: str, runs: int = 5) -> tuple[float, dict[str, object]]:
    async with httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(uds=sock), base_url="http://w", timeout=60
    ) as c:
        times = []
        body: dict[str, object] = {}
        for _ in range(runs):
            t = time.perf_counter()
            reply = await c.get("/search", params={"q": q, "limit": 200})
            times.append(time.perf_counter() - t)
            body = reply.json()
        return statistics.median(times), body


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tui-bench-", dir="/tmp") as d:
        state = StatePaths(Path(d))
        workdir = Path(d) / "work"
        workdir.mkdir()
        sid = create_session(state, working_directory=workdir).id
        size = write_session(state.session(sid).journal, args.turns)
        car = start_worker(state, sid, timeout=600)
        print(f"session: {args.turns:,} turns, journal {size / 2**20:.1f} MiB")
        for q, what in (
            ("Kingfisher", "a word of turn 3"),
            ("wizards", "a word of 1 turn in 15"),
            ("zzyzx", "no turn"),
        ):
            seconds, body = asyncio.run(timed(car.socket, q))
            hits = body.get("hits")
            print(
                f"search {what} ({q!r}): median {seconds * 1000:.0f} ms end to end, "
                f"{len(hits) if isinstance(hits, list) else 0} hits of {body.get('total')}"
            )

        async def leave() -> None:
            async with httpx.AsyncClient(
                transport=httpx.AsyncHTTPTransport(uds=car.socket), base_url="http://w"
            ) as c:
                await c.post("/leave", json={})

        asyncio.run(leave())


if __name__ == "__main__":
    main()
