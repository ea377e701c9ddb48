"""The wire models: every event decodes, unknown ones are kept, refusals map back to errors."""

from __future__ import annotations

import pytest

from tui.errors import AmbiguousId, Conflict, Refused, error_from_wire
from tui.protocol import TextChunk, UnknownEvent, decode_event
from tui.protocol.events import ChildStarted
from tui.protocol.wording import child_line


def test_known_event_decodes_to_its_type() -> None:
    event = decode_event('{"seq": 3, "type": "text", "turn_id": "t1", "text": "hi"}')
    assert isinstance(event, TextChunk)
    assert (event.seq, event.text) == (3, "hi")


def test_unknown_event_type_is_kept_not_an_error() -> None:
    event = decode_event('{"seq": 9, "type": "dreaming", "words": 12}')
    assert isinstance(event, UnknownEvent)
    assert event.type == "dreaming"
    assert event.model_extra == {"words": 12}


def test_a_malformed_known_event_is_an_error() -> None:
    with pytest.raises(ValueError, match="malformed text event"):
        decode_event('{"seq": 3, "type": "text"}')


def test_refusals_map_back_to_the_same_exception() -> None:
    err = error_from_wire({"error": "ambiguous_id", "detail": "3f matches 2", "ids": ["3f1", "3f2"]}, 409)
    assert isinstance(err, AmbiguousId)
    assert err.fields["ids"] == ["3f1", "3f2"]
    assert isinstance(error_from_wire({"error": "question_not_pending", "detail": "x"}, 409), Conflict)
    revoked = error_from_wire({"error": "token_revoked", "detail": "revoked"}, 401)
    assert isinstance(revoked, Refused) and revoked.exit_code == 6


def test_a_turn_ended_says_why_its_agent_stopped_and_an_older_one_still_decodes() -> None:
    from tui.protocol import TurnEnded

    old = decode_event('{"seq": 4, "type": "turn_ended", "turn_id": "t1", "outcome": "completed"}')
    assert isinstance(old, TurnEnded) and old.stop_reason is None
    cut = decode_event(
        '{"seq": 5, "type": "turn_ended", "turn_id": "t2", "outcome": "completed", '
        '"stop_reason": "max_tokens"}'
    )
    assert isinstance(cut, TurnEnded) and cut.stop_reason == "max_tokens"


def test_a_childs_long_first_line_is_cut_with_an_ellipsis_in_the_parents_line() -> None:
    long = "x = ask('go on?', options=['yes', 'no']); print('child got', x, 'and more', 1)"
    line = child_line(ChildStarted(seq=1, child_id="b24b3fae" * 2, prompt=long + "\nsecond"))
    assert line == f"child b24b3fae started: {long[:59]}…"
    short = child_line(ChildStarted(seq=1, child_id="b24b3fae" * 2, prompt="print(6*7)"))
    assert short == "child b24b3fae started: print(6*7)"
