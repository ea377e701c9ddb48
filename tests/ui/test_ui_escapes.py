"""Escape sequences a program prints are shown in the app, never sent to the terminal (issue 21):
what the app would write to the terminal is read from the screen's full update, as its driver
writes it."""

from __future__ import annotations

import contextlib
import os
import re
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from textual.strip import Strip

from tui.access.local import LocalAccess
from tui.store import StatePaths, read_sidecar
from tui.terminal import visible
from tui.ui import TuiApp
from tui.ui.pieces import tool_title, verbatim_text

Until = Callable[..., Awaitable[None]]

pytestmark = pytest.mark.slow

SEQUENCES = {
    "osc52-bel": "\x1b]52;c;cHduZWQ=\x07",
    "osc52-st": "\x1b]52;c;cHduZWQ=\x1b\\",
    "osc0-title": "\x1b]0;PWNED\x07",
    "osc8-link": "\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    "csi-2j": "\x1b[2J",
    "dcs": "\x1bP1$r0m\x1b\\",
    "c1-csi": "\x9b2J",
    "c1-osc": "\x9d0;C1TITLE\x9c",
    "bel": "\x07",
}
"""What a program may print to act on a terminal, each by name."""

ACTING = re.compile(r"\x1b\]|\x1bP|\x1b\[2J|\x07|[\x80-\x9f]")
"""What must never be in what the app writes: OSC, DCS, a screen clear, BEL, any C1 control."""


@pytest.fixture
async def session(state_dir: Path, tmp_path: Path) -> AsyncIterator[tuple[LocalAccess, str]]:
    access = LocalAccess(StatePaths(state_dir))
    sid = await access.create(working_directory=str(tmp_path))
    try:
        yield access, sid
    finally:
        for car_path in StatePaths(state_dir).sessions.glob("*/worker.json"):
            car = read_sidecar(car_path)
            if car is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(car.pid, signal.SIGKILL)


def written(app: TuiApp) -> tuple[str, list[str]]:
    """What the app's driver writes for the whole screen now, and the text of its segments
    (the characters drawn, without the app's own escape sequences)."""
    update = app.screen._compositor.render_full_update()
    texts = [seg.text for line in update.strips for strip in line for seg in strip if not seg.control]
    return update.render_segments(app.console), texts


class TestProgramOutputInTheApp:
    async def test_no_escape_sequence_a_program_prints_reaches_the_terminal(
        self, session: tuple[LocalAccess, str], until: Until
    ) -> None:
        access, sid = session
        app = TuiApp(await access.link(sid, client_id="tui:test:escapes"))
        async with app.run_test(size=(160, 60)) as pilot:
            await until(pilot, app.session.attached.is_set, 30)
            raw_prompt = "print('start')\n" + "\n".join(
                f"print('{name}:' + {seq!r} + ':end')" for name, seq in SEQUENCES.items()
            ).replace("\\x1b", "\x1b")  # the prompt holds a raw ESC as well
            app.session.submit(raw_prompt)
            await until(pilot, lambda: app.session.transcript.turn_views() and not app.session.busy, 30)
            turn = app.session.transcript.turn_views()[-1].record
            assert turn.outcome == "completed"
            await pilot.pause()
            out, texts = written(app)
            drawn = "".join(texts)
            assert "\x1b" not in drawn
            assert not ACTING.search(out), repr(ACTING.search(out))
            assert not any(re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", t) for t in texts)
            # Shown instead: ESC as ␛, BEL as ␇, the 8-bit CSI as ␛[
            assert "osc52-bel:␛]52;c;cHduZWQ=␇:end" in drawn
            assert "osc0-title:␛]0;PWNED␇:end" in drawn
            assert "csi-2j:␛[2J:end" in drawn
            assert "c1-csi:␛[2J:end" in drawn
            assert "dcs:␛P1$r0m␛\\:end" in drawn


class TestPieces:
    """Each piece that draws text a program, an agent or a model chose shows its controls."""

    @pytest.mark.parametrize("name", sorted(SEQUENCES))
    def test_verbatim_output_and_titles_show_every_control(self, name: str) -> None:
        seq = SEQUENCES[name]
        for text in (
            verbatim_text(f"a{seq}b").plain,
            tool_title("t", {}, "completed", title=f"a{seq}b"),
            tool_title("run", {"code": f"a{seq}b"}, None),
        ):
            assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text), repr(text)
            assert visible(seq) in text

    def test_strips_of_program_output_hold_no_escape(self) -> None:
        from rich.console import Console

        console = Console(width=60, color_system="truecolor")
        text = verbatim_text("".join(SEQUENCES.values()))
        lines = console.render_lines(text, console.options.update_width(60))
        strip_text = "".join(seg.text for line in lines for seg in Strip(line) if not seg.control)
        assert "\x1b" not in strip_text and "\x07" not in strip_text
