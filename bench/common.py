"""What the benchmarks share: the event loop's lag sampler, this process's memory, the words of
made-up text. Imported by the scripts beside it (a script's folder is on its import path)."""

from __future__ import annotations

import asyncio
import os

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "wizards",
    "quietly",
    "judge",
    "boxing",
]


def rss_mib() -> float:
    """This process's resident memory, in MiB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


class Lag:
    """How late the event loop wakes a task that asks to wake every `every` seconds (from
    `start`, or for the length of a ``with`` block)."""

    def __init__(self, every: float = 0.005) -> None:
        self.every = every
        self.late: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            start = loop.time()
            await asyncio.sleep(self.every)
            self.late.append(loop.time() - start - self.every)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def __enter__(self) -> Lag:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()

    def take(self) -> float:
        """The longest stall since the last take, in seconds."""
        late, self.late = self.late, []
        return max(late, default=0.0)

    def p99_ms(self) -> float:
        late = sorted(self.late) or [0.0]
        return 1000 * late[int(0.99 * (len(late) - 1))]

    def figures(self) -> dict[str, float]:
        """p99 and max in milliseconds."""
        return {"lag_p99_ms": self.p99_ms(), "lag_max_ms": 1000 * max(self.late, default=0.0)}
