"""A rewind seen in the app: the turns it undid, drawn already, say ``rewound`` at once, under the
rewind's line (docs/files.md)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tui.protocol import By, Rewound, TurnRecord
from tui.testing.double import WorkerLink
from tui.ui import TuiApp

Until = Callable[..., Awaitable[None]]


def _turns(n: int) -> list[TurnRecord]:
    return [
        TurnRecord(
            turn_id=f"h{i}",
            number=i,
            prompt=f"print({i})",
            reply=f"{i}\n",
            outcome="completed",
            by=By(name="alice"),
            started_seq=2 * i + 1,
            ended_seq=2 * i + 2,
        )
        for i in range(1, n + 1)
    ]


async def test_the_turns_a_rewind_undid_say_so_as_it_happens(until: Until) -> None:
    link = WorkerLink(history=_turns(4))
    app = TuiApp(link)
    async with app.run_test(size=(100, 30)) as pilot:
        transcript = app.session.transcript
        await until(pilot, lambda: len(transcript.turn_views()) == 4)

        def said(number: int) -> str:
            view = next(v for v in transcript.turn_views() if v.record.number == number)
            return "\n".join(strip.text for strip in view.lines(80))

        assert "rewound" not in said(3)
        link.emit(Rewound(to_turn=3, last_turn=4, turns=["h3", "h4"], files=["a.txt"]))
        await until(pilot, lambda: "rewound" in said(3) and "rewound" in said(4))
        assert "rewound" not in said(2)
        lines = [item.line for item in transcript.items if item.record is None]
        assert any(line.startswith("rewound to before turn 3 by") for line in lines)
