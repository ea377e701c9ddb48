"""What a session's clients read of it: a page of its transcript, a search, a turn's whole output,
its counts. Each answer is made of the session's files (``turns/``, the journal) and the state the
reducer keeps (`tui.protocol.state.SessionState`), which the caller passes in; nothing here writes.
"""

from __future__ import annotations

import asyncio
import os

from tui.errors import NotFound, UnknownCall, UnknownTurn
from tui.protocol import Presence, SearchResult, Stats, Transcript, TurnRecord
from tui.protocol.state import SessionState
from tui.store.journal import Journal
from tui.store.paths import SessionPaths
from tui.store.search import Finder
from tui.store.turns import TurnStore

__all__ = ["SessionReader"]

_WHERE_IDS_ARE = "a turn id comes from the transcript (GET /transcript) or a search (GET /search)"


class SessionReader:
    """The read queries of one session: its files, with the live state handed to each call."""

    def __init__(self, paths: SessionPaths, journal: Journal, turns: TurnStore) -> None:
        self.paths = paths
        self.journal = journal
        self.turns = turns

    def transcript(
        self,
        state: SessionState,
        limit: int,
        before: str | None = None,
        *,
        after: str | None = None,
        around: str | None = None,
        first: bool = False,
        attached: list[Presence] | None = None,
    ) -> Transcript:
        """A page of `limit` ended turns and what is live now: the last ones, those before turn
        `before`, those right after turn `after`, a page holding turn `around`, or (`first`) the
        session's first ones.

        The running turn comes with every page that reaches the newest ended turn (not with a
        `before` page). Its id as `after` gives an empty page; as `around`, the last page.

        Raises:
            NotFound: the turn named is no turn of this session.
        """
        current = state.current
        running = current.turn_id if current is not None else None
        if around is not None and around == running:
            around = None
        turns: list[TurnRecord] = []
        try:
            if after is not None and after == running:
                older, newer = len(self.turns) > 0, False
            else:
                turns, older, newer = self.turns.window(
                    limit, before=before, after=after, around=around, first=first
                )
        except KeyError as exc:
            raise NotFound(
                f"no ended turn {exc.args[0]!r} in this session; {_WHERE_IDS_ARE}",
                turn_id=exc.args[0],
            ) from None
        if state.rewound:
            turns = [
                t.model_copy(update={"rewound": True}) if state.is_rewound(t.number) else t for t in turns
            ]
        return Transcript(
            turns=turns,
            current=current.record() if current is not None and before is None and not newer else None,
            question=state.question,
            queue=list(state.queue),
            queue_held=state.queue_held,
            state=state.state,
            model=state.model,
            cursor=self.journal.last_seq,
            has_more=older,
            has_newer=newer,
            attached=list(attached or []),
            turns_started=state.turns_started,
            notes=list(state.notes) if before is None and not newer else [],
            children=list(state.child_sessions.values()),
        )

    async def search(self, state: SessionState, text: str, limit: int = 200) -> SearchResult:
        """Every turn where `text` occurs (case-insensitive), oldest first: the ended turns from the
        journal (read in a thread, so the turn in progress keeps streaming), then the running one."""
        current = state.current
        record = current.record() if current is not None else None
        finder = Finder(text, limit)
        # Only the worker's thread appends, a line at a time: the size now ends on a whole line.
        try:
            upto = os.stat(self.paths.journal).st_size
        except OSError:
            upto = 0
        await asyncio.to_thread(
            finder.journal, self.paths.journal, upto=upto, skip=record.turn_id if record else None
        )
        if record is not None:
            finder.record(record)
        return SearchResult(hits=finder.hits, total=finder.total, more=finder.more)

    def turn_output(self, state: SessionState, turn_id: str, call_id: str | None = None) -> str:
        """A turn's whole reply (as it stands, if it runs), or one of its tool call's whole output.

        Raises:
            UnknownTurn: no such turn in this session.
            UnknownCall: no such call in that turn.
        """
        record = state.record(turn_id)
        if record is None:
            try:
                record = self.turns.get(turn_id)
            except KeyError:
                raise UnknownTurn(
                    f"no turn {turn_id!r} in this session; {_WHERE_IDS_ARE}", turn_id=turn_id
                ) from None
        if call_id is None:
            return record.reply
        for tool in record.tools:
            if tool.call_id == call_id:
                return tool.output
        calls = ", ".join(t.call_id for t in record.tools) or "none"
        raise UnknownCall(
            f"turn {turn_id} has no tool call {call_id!r}; its calls: {calls} "
            "(leave call_id out for the turn's reply)",
            turn_id=turn_id,
            call_id=call_id,
        )

    def stats(self, state: SessionState, *, uptime: float, attached: list[str], streams: int) -> Stats:
        """The session's counts: ended turns, tokens, events written, who follows it."""
        return Stats(
            turns=state.turns_ended,
            tokens_in=state.tokens_in,
            tokens_out=state.tokens_out,
            uptime=uptime,
            events=self.journal.last_seq,
            attached=attached,
            streams=streams,
        )
