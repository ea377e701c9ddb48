"""The search index of every session (`tui.store.index`): what is found and where, a word cut
between two output pieces, phrases, prefixes and code-ish words, filters and pages, and the
journal as the only truth (a deleted index rebuilt, a session written without one caught up, a
replaced journal indexed again, a turn still running left until it ends)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tui.errors import UsageError
from tui.protocol import (
    Note,
    QuestionAsked,
    QuestionResolved,
    TextChunk,
    ToolEnded,
    ToolOutput,
    ToolStarted,
    TurnEnded,
    TurnStarted,
)
from tui.protocol.events import Option
from tui.store import Journal, SessionRecord, StatePaths, save_session
from tui.store.index import INDEX_FILE, SearchIndex, find
from tui.store.index_query import Query
from tui.store.index_texts import texts_of
from tui.store.index_worker import Indexer


def _session(
    state: StatePaths, sid: str, *, folder: str = "/work/a", agent: str = "python", archived: bool = False
) -> Journal:
    state.session(sid).root.mkdir(parents=True)
    save_session(
        state,
        SessionRecord(
            id=sid,
            title=f"title {sid[:4]}",
            created_at=datetime.now(UTC),
            working_directory=folder,
            agent=agent,
            status="archived" if archived else "active",
        ),
    )
    return Journal.open_for_append(state.session(sid).journal)


def _turn(j: Journal, turn_id: str, prompt: str, reply: str = "", *, end: bool = True) -> None:
    j.append(TurnStarted(turn_id=turn_id, prompt=prompt))
    if reply:
        j.append(TextChunk(turn_id=turn_id, text=reply))
    if end:
        j.append(TurnEnded(turn_id=turn_id, outcome="completed", reply=reply))


A = "a" * 16
B = "b" * 16


@pytest.fixture
def state(tmp_path: Path) -> StatePaths:
    state = StatePaths(tmp_path)
    with _session(state, A) as j:
        _turn(j, "t1", "print('hello')", "hello world")
        j.append(TurnStarted(turn_id="t2", prompt="run the shell"))
        j.append(ToolStarted(turn_id="t2", call_id="c1", name="shell", args={"cmd": "ls os.path"}))
        j.append(ToolOutput(turn_id="t2", call_id="c1", text="connection ref"))
        j.append(ToolOutput(turn_id="t2", call_id="c1", text="used by my_server\n"))
        j.append(ToolEnded(turn_id="t2", call_id="c1", status="error", error="exit status 7"))
        j.append(
            QuestionAsked(turn_id="t2", question_id="q1", text="Deploy now?", options=[Option(label="later")])
        )
        j.append(QuestionResolved(question_id="q1", how="answered", freeform="tomorrow morning"))
        j.append(TurnEnded(turn_id="t2", outcome="failed", reply="", error="Traceback: ZeroDivisionError"))
        j.append(Note(text="remember the zebras", source="ci"))
    with _session(state, B, folder="/work/b", agent="model", archived=True) as j:
        _turn(j, "u1", "what about HELLO", "Hello again, connection refused")
    return state


def _found(state: StatePaths, text: str, **kw: object) -> list[tuple[str, int, str]]:
    return [(h.session_id[:1], h.turn, h.where) for h in find(state, text, **kw).hits]  # type: ignore[arg-type]


def test_every_kind_of_text_is_found_where_it_was(state: StatePaths) -> None:
    assert _found(state, "hello world") == [("a", 1, "reply")]
    assert _found(state, "exit status 7") == [("a", 2, "error")]
    assert _found(state, "deploy now") == [("a", 2, "question")]
    assert _found(state, "tomorrow") == [("a", 2, "answer")]
    assert _found(state, "zebras") == [("a", 2, "note")]
    assert _found(state, "zerodivisionerror") == [("a", 2, "error")]
    (hit,) = find(state, "ls os.path").hits
    assert (hit.where, hit.name, hit.title, hit.folder) == ("tool", "shell", "title aaaa", "/work/a")


def test_a_word_cut_between_two_output_pieces_is_found_and_marked(state: StatePaths) -> None:
    hits = find(state, "connection refused").hits
    assert [(h.session_id[:1], h.where) for h in hits] == [("b", "reply"), ("a", "tool")]
    tool = hits[1]
    assert tool.snippet == "connection refused by my_server"
    a, b = tool.match
    assert tool.snippet[a:b] == "connection refused"


def test_phrases_prefixes_case_and_code_words(state: StatePaths) -> None:
    assert _found(state, "HELLO") == [
        ("b", 1, "prompt"),
        ("b", 1, "reply"),
        ("a", 1, "prompt"),
        ("a", 1, "reply"),
    ]
    assert _found(state, "world hello") == []  # a phrase: its words in that order
    assert _found(state, "zeb*") == [("a", 2, "note")]
    assert _found(state, "zeb") == []
    assert _found(state, "my_server") == [("a", 2, "tool")]
    assert _found(state, "server") == [("a", 2, "tool")]
    assert _found(state, "os path") == [("a", 2, "tool")]
    with pytest.raises(UsageError, match="nothing to search for"):
        Query("  ...  ")


def test_filters_and_pages(state: StatePaths) -> None:
    assert _found(state, "hello", where=["prompt"]) == [("b", 1, "prompt"), ("a", 1, "prompt")]
    assert _found(state, "hello", active=True) == [("a", 1, "prompt"), ("a", 1, "reply")]
    assert _found(state, "hello", folder="/work/b/") == [("b", 1, "prompt"), ("b", 1, "reply")]
    assert _found(state, "hello", folder="/work") != []
    assert _found(state, "hello", folder="/wor") == []
    assert _found(state, "hello", agent="model") == [("b", 1, "prompt"), ("b", 1, "reply")]
    assert _found(state, "hello", since=datetime.now(UTC) + timedelta(hours=1)) == []
    first = find(state, "hello", limit=3)
    assert len(first.hits) == 3 and first.next is not None
    rest = find(state, "hello", limit=3, before=first.next)
    assert len(rest.hits) == 1 and rest.next is None
    with pytest.raises(UsageError, match="--in"):
        find(state, "hello", where=["nowhere"])


def test_a_deleted_index_is_rebuilt_and_a_session_written_without_it_caught_up(state: StatePaths) -> None:
    assert _found(state, "zebras")
    for suffix in ("", "-wal", "-shm"):
        Path(str(state.root / INDEX_FILE) + suffix).unlink(missing_ok=True)
    seen: list[tuple[int, int]] = []
    with SearchIndex(state) as index:
        assert index.catch_up(lambda done, total: seen.append((done, total))) == 2
    assert seen[-1][0] == seen[-1][1] > 0  # the progress line ends at its total
    assert _found(state, "zebras") == [("a", 2, "note")]
    (state.root / INDEX_FILE).write_bytes(b"not a database at all" * 100)  # a torn copy
    assert _found(state, "zebras") == [("a", 2, "note")]  # made again from the journals
    with _session(state, "c" * 16) as j:  # as an older worker, or a hand, would leave it
        _turn(j, "v1", "print('platypus')", "platypus")
    assert _found(state, "platypus") == [("c", 1, "prompt"), ("c", 1, "reply")]


def test_a_running_turn_is_found_once_it_ended_and_a_replaced_journal_is_read_again(
    state: StatePaths,
) -> None:
    with Journal.open_for_append(state.session(A).journal) as j:
        _turn(j, "t3", "print('quokka')", end=False)
    assert _found(state, "quokka") == []
    with Journal.open_for_append(state.session(A).journal) as j:
        j.append(TextChunk(turn_id="t3", text="quok"))
        j.append(TextChunk(turn_id="t3", text="ka!"))
        j.append(TurnEnded(turn_id="t3", outcome="completed", reply="quokka!"))
    assert _found(state, "quokka") == [("a", 3, "prompt"), ("a", 3, "reply")]
    path = state.session(A).journal
    path.rename(path.with_suffix(".old"))
    with Journal.open_for_append(path) as j:
        _turn(j, "w1", "print('wombat')", "wombat")
    assert _found(state, "wombat") == [("a", 1, "prompt"), ("a", 1, "reply")]
    assert _found(state, "quokka") == []  # what the old journal held is gone with it


def test_the_workers_indexer_indexes_in_its_own_thread(state: StatePaths) -> None:
    with SearchIndex(state) as index:
        index.catch_up()
    with Journal.open_for_append(state.session(A).journal) as j:
        _turn(j, "t9", "print('axolotl')", "axolotl")
    indexer = Indexer(state, A)
    indexer.most = 10  # a backlog longer than this is left to the next search
    indexer.poke()
    assert indexer.idle.wait(30)
    with SearchIndex(state) as index:
        assert [sid for sid, *_ in index.behind()] == [A]
    indexer.most = 1 << 20
    indexer.poke()
    assert indexer.idle.wait(30)
    indexer.stop()
    assert indexer.runs == 2
    with SearchIndex(state) as index:
        assert index.behind() == []  # nothing left for a search to catch up
        hits, _ = index.search(Query("axolotl"))
    assert [h.where for h in hits] == ["prompt", "reply"]
    assert os.path.exists(state.root / INDEX_FILE)


def _every_kind(state: StatePaths, sid: str, turns: int) -> None:
    """A session holding every kind of event, a turn that never ended, a text between turns, a
    line written by hand in another key order and a torn one."""
    from tui.protocol import ChildAsking, ChildEnded, ChildStarted, Question, Status, Thinking, ToolUpdated

    with _session(state, sid) as j:
        for t in range(turns):
            tid, call = f"t{t}", f"c{t}"
            j.append(TurnStarted(turn_id=tid, prompt=f"print({t}) # pelican{t}"))
            j.append(Thinking(turn_id=tid, text=f"pondering heron{t}"))
            j.append(ToolStarted(turn_id=tid, call_id=call, name="shell", args={"cmd": f"ls dir{t}"}))
            j.append(ToolUpdated(turn_id=tid, call_id=call, title=f"listing {t}", output="partial"))
            j.append(ToolOutput(turn_id=tid, call_id=call, text="connection ref"))
            j.append(ToolOutput(turn_id=tid, call_id=call, text=f"used by server{t}\n"))
            j.append(ToolEnded(turn_id=tid, call_id=call, status="error", error=f"exit status {t}"))
            j.append(Status(state="working"))
            if t % 3 == 1:
                j.append(TextChunk(turn_id=tid, text=f"half a reply gannet{t}"))
                continue  # never ended: it ends where the next turn starts
            j.append(
                QuestionAsked(
                    turn_id=tid, question_id=f"q{t}", text=f"Deploy {t}?", options=[Option(label="later")]
                )
            )
            j.append(QuestionResolved(question_id=f"q{t}", how="answered", freeform=f"tomorrow {t}"))
            j.append(TextChunk(turn_id=tid, text=f"reply puffin{t}"))
            j.append(TurnEnded(turn_id=tid, outcome="completed", reply=f"reply puffin{t}", error=None))
            j.append(Status(state="idle"))
            j.append(Note(text=f"remember zebra{t}", source="ci"))
            j.append(ChildStarted(child_id="c" * 16, prompt=f"child prompt kiwi{t}"))
            j.append(
                ChildAsking(
                    child_id="c" * 16, question=Question(turn_id="x", question_id="y", text=f"child asks {t}")
                )
            )
            j.append(ChildEnded(child_id="c" * 16, outcome="failed", error=f"child failed {t}"))
            j.append(TextChunk(turn_id="stray", text=f"a stray text ibis{t}"))
    with open(state.session(sid).journal, "ab") as f:
        f.write(b'{"type":"note","seq":9998,"at":"2026-01-01T00:00:00Z","text":"by hand albatross"}\n')
        f.write(  # left until it ends
            b'{"seq":9999,"at":"2026-01-01T00:00:01Z","type":"turn_started","turn_id":"o","prompt":"osprey"}\n'
        )
    lines = state.session(sid).journal.read_bytes().split(b"\n")
    torn = [*lines[:5], lines[5][:20], *lines[5:]]
    state.session(sid).journal.write_bytes(b"\n".join(torn))


def test_the_quick_cut_reads_what_the_line_by_line_one_reads() -> None:
    """`cut` skips the lines not searched in one scan; `_cut_lines` reads every line: from any
    line on, with a hand-written line, they give the same texts, rowids, places and ends."""
    import tempfile

    from tui.store.index_texts import _cut_lines, cut

    with tempfile.TemporaryDirectory() as tmp:
        state = StatePaths(Path(tmp))
        _every_kind(state, A, 7)
        data = state.session(A).journal.read_bytes()
    clean = b"\n".join(line for line in data.split(b"\n") if not line.endswith(b'"at":"2026-'))
    assert len(clean) < len(data)  # the torn line left out
    starts = [0, *[i + 1 for i, c in enumerate(clean) if c == 0x0A][:-1]]

    def flat(out: tuple[list[tuple[int, int, object, object]], int, int]) -> object:
        batch, done, turns = out
        rows = [(r, k, t, s.start, s.stop, s.turn) for r, k, t, s in batch]  # type: ignore[attr-defined]
        return rows, done, turns

    for at in starts:
        for block in (clean[at:], clean[at : at + 900], data[at:]):
            block = block[: block.rfind(b"\n") + 1]
            assert flat(cut(block, at, 3)) == flat(_cut_lines(block, at, 3))
    assert any(flat(cut(clean, 0, 0))[0])  # type: ignore[index]


def test_a_prefix_asked_word_by_word_finds_what_fts5s_prefix_query_finds(
    state: StatePaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tui.store.index

    with _session(state, "e" * 16) as j:
        for n, word in enumerate(["zebu", "zebra", "zebras", "connection refusal", "hello zebrafish"]):
            _turn(j, f"z{n}", f"print('{word}')", word)
    asked = ["zeb*", "zebr*", "connection ref*", "hello z*", "hel*", "nothing*", "h*"]
    word_by_word = {q: _found(state, q) for q in asked}
    monkeypatch.setattr(tui.store.index, "PREFIX_MOST", 0)  # FTS5's own prefix query
    assert {q: _found(state, q) for q in asked} == word_by_word
    assert [h.where for h in find(state, "zeb*").hits].count("note") == 1
    assert len(word_by_word["zeb*"]) == 1 + 2 * 4  # the note, and zebu, zebra, zebras, zebrafish twice
    assert word_by_word["connection ref*"][0] == ("e", 4, "prompt")


def test_a_record_is_looked_at_again_when_saved_or_when_its_journal_changed(state: StatePaths) -> None:
    import json

    from tui.store import archive_session, get_session

    assert _found(state, "hello", active=True) == [("a", 1, "prompt"), ("a", 1, "reply")]
    archive_session(state, A)  # `tui archive`: the record saved, the sessions folder touched
    assert _found(state, "hello", active=True) == []
    record = json.loads(state.session(B).record.read_text())
    record["title"] = "renamed by hand"
    state.session(B).record.write_text(json.dumps(record))  # no save_session: not looked at yet
    with Journal.open_for_append(state.session(B).journal) as j:
        _turn(j, "u2", "print('narwhal')", "narwhal")
    assert {h.title for h in find(state, "narwhal").hits} == {"renamed by hand"}
    assert get_session(state, A).status == "archived"


def test_a_calls_arguments_are_words_of_their_own() -> None:
    """``ask(question='Ship it?', options=[…])``: two arguments' words never join into one."""
    events = [
        {"type": "turn_started", "turn_id": "t", "prompt": "p"},
        {
            "type": "tool_started",
            "turn_id": "t",
            "call_id": "c",
            "name": "ask",
            "args": {"a": "ship", "b": "it"},
        },
        {"type": "turn_ended", "turn_id": "t", "outcome": "completed", "reply": ""},
    ]
    (tool,) = [t for t in texts_of(events) if t.where == "tool"]
    assert tool.text.split() == ["ship", "it"]
