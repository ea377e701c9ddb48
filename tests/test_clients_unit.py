"""Clients are told apart: what each is attached with, on each turn and in /stats."""

from __future__ import annotations

from tui.link.slash import format_stats
from tui.protocol import By, Presence, Stats
from tui.protocol.ids import client_label, make_client_id
from tui.protocol.state import who
from tui.ui.widgets.status import attached_text


def test_a_client_id_says_what_the_client_is() -> None:
    assert make_client_id("send", "vm", 7) == "send:vm:7"
    assert [
        client_label(c) for c in ("tui:vm:1", "send:vm:2", "script:vm:3", "answer:vm:4", None, "odd")
    ] == [
        "terminal",
        "tui send",
        "script",
        "tui answer",
        None,
        None,
    ]


def test_a_turn_names_who_and_with_what_unless_a_terminal() -> None:
    assert who(By(name="root"), "send:vm:2") == "root (tui send)"
    assert who(By(name="root"), "tui:vm:1") == "root"
    assert who(By(kind="participant", name="ana"), "script:h:1") == "ana (participant) (script)"


def test_the_status_row_counts_terminals_and_names_other_clients() -> None:
    people = [
        Presence(name="root", via=["terminal", "terminal"]),
        Presence(name="ana", kind="viewer", via=["terminal"]),
        Presence(name="bo", kind="collaborator", via=["script", "terminal"]),
    ]
    assert attached_text(people) == "root · 2 terminals, ana (viewer), bo (collaborator) · script, terminal"


def test_stats_name_the_clients() -> None:
    line = format_stats(Stats(attached=["tui:vm:7019", "send:vm:7020"]))
    assert line.endswith("attached: terminal on vm (pid 7019), tui send on vm (pid 7020)")
