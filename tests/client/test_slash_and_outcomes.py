"""What both client surfaces share: the slash-command table and how a turn's outcome exits."""

from __future__ import annotations

import pytest

from tui.link.outcomes import turn_ending
from tui.link.slash import commands_for, find, format_stats, needs, parse
from tui.link.watch import TurnResult
from tui.protocol import Stats


class TestSlash:
    @pytest.mark.parametrize(
        ("line", "parsed"),
        [
            ("/model  big ", ("/model", "big")),
            ("/exit --delete", ("/exit --delete", "")),
            ("/queue print(1)", ("/queue", "print(1)")),
            ("/stats", ("/stats", "")),
        ],
    )
    def test_a_line_is_a_command_and_its_argument(self, line: str, parsed: tuple[str, str]) -> None:
        assert parse(line) == parsed

    def test_each_surface_takes_its_commands(self) -> None:
        piped = [c.name for c in commands_for("piped")]
        assert piped == [
            "/detach",
            "/exit",
            "/model",
            "/queue",
            "/resume",
            "/stats",
            "/children",
            "/note",
            "/context",
            "/restart",
            "/rewind",
        ]
        assert find("/help", "tui") is not None and find("/help", "piped") is None
        assert find("/copy", "tui") is not None and find("/copy", "piped") is None
        assert needs("/resume") == "write"

    def test_who_may_use_a_command(self) -> None:
        assert needs("/model", "big") == "owner" and needs("/exit --delete") == "owner"
        assert needs("/queue", "print(1)") == "write" and needs("/queue") is None
        assert needs("/stats") is None and needs("/nonsense") is None
        assert needs("/note", "hi") == "write" and needs("/restart") == "owner"
        assert needs("/context") is None and needs("/context", "remove ci") == "owner"
        assert needs("/rewind", "3") == "owner"

    def test_help_says_how_to_undo_a_rewind(self) -> None:
        rewind = find("/rewind", "tui")
        assert rewind is not None and "/rewind --undo" in rewind.help

    def test_stats_read_the_same_everywhere(self) -> None:
        line = format_stats(
            Stats(turns=2, tokens_in=5, tokens_out=7, uptime=12.7, events=30, attached=["ann"])
        )
        assert line == "stats: 2 turns · tokens 5 in / 7 out · up 12s · 30 events · attached: ann"


class TestOutcomes:
    attach = "tui attach 3f2a9c0e"

    def test_a_completed_turn_exits_0_and_a_failed_one_1_naming_its_last_error_line(self) -> None:
        done = turn_ending(TurnResult("t1", "completed", "hi\n"), "verbatim", attach=self.attach)
        assert (done.code, done.line) == (0, "the turn completed")
        failed = turn_ending(
            TurnResult("t1", "failed", "", "Traceback …\nValueError: x"),
            "verbatim",
            attach=self.attach,
            turn="turn 2",
        )
        assert (
            failed.code == 1 and failed.line == "turn 2 failed: ValueError: x; `tui attach 3f2a9c0e` to look"
        )
        stopped = turn_ending(TurnResult("t1", "interrupted", "partial"), "markdown", attach=self.attach)
        assert stopped.code == 1 and "interrupted" in stopped.line

    def test_a_prompt_left_in_a_held_queue_did_not_run_and_says_how_to_resume(self) -> None:
        held = TurnResult("", "interrupted", "", "the queue is held", held=True)
        ending = turn_ending(held, "verbatim", attach=self.attach, turn="turn 3")
        assert ending.code == 1
        assert ending.line == (
            "turn 3 did not run: the queue is held after an interrupt; "
            "`tui attach 3f2a9c0e` and /resume runs it"
        )

    def test_an_empty_reply_is_5_only_for_a_model_s_prose(self) -> None:
        empty = TurnResult("t1", "completed", "")
        assert turn_ending(empty, "verbatim", attach=self.attach).code == 0
        said_nothing = turn_ending(empty, "markdown", attach=self.attach)
        assert said_nothing.code == 5 and "no reply at all" in said_nothing.line
