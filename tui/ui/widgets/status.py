"""The status rows at the bottom: what the session is doing, and how this client is linked to it.

They draw the attachment's `Snapshot`, handed to `StatusRows.show` once per batch; what they keep
of their own is what only this client sees: when it saw the running turn start, when the next
reconnect try is, when the last event arrived (its clock)."""

from __future__ import annotations

from collections.abc import Callable

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Static

from tui.link.base import Gone, Live, Reconnecting
from tui.link.changes import Snapshot
from tui.protocol.wording import attached_text

__all__ = ["StatusRows", "attached_text"]

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _fit(parts: list[tuple[int, str]], width: int | None) -> str:
    """The fields joined by `` · ``, leaving out those of the highest rank (1 first, then 2, …;
    0 is always kept) until the row fits `width`."""
    shown = list(parts)
    for rank in sorted({r for r, _ in parts if r}):
        if width is None or len(" · ".join(t for _, t in shown)) <= width:
            break
        shown = [(r, t) for r, t in shown if r != rank]
    return " · ".join(t for _, t in shown)


def _tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


class StatusRows(Vertical):
    """Two rows: the session (state, model, context, queue, children) and the link (where,
    connection, worker version, time since the last event)."""

    DEFAULT_CSS = """
    StatusRows { height: auto; background: $panel; padding: 0 1; }
    StatusRows > Static { height: auto; width: 1fr; color: $text-muted; }
    StatusRows > #status-session.-busy { color: $text; }
    StatusRows > #status-session.-asking { color: $text-accent; }
    StatusRows > #status-link.-reconnecting { color: $text-warning; }
    StatusRows > #status-link.-gone { color: $text-error; }
    """

    status: reactive[Snapshot] = reactive(Snapshot, always_update=True, init=False)
    """What is shown: the attachment's last snapshot (`show`)."""

    def __init__(self, *, clock: Callable[[], float], id: str | None = None) -> None:
        super().__init__(id=id)
        self.clock = clock
        self.busy_since: float | None = None
        """The client clock when the running turn started (as this client saw it)."""
        self.reconnect_at: float | None = None
        """The client clock of the next reconnect try."""
        self._turn: str | None = None
        """The running turn `busy_since` is of."""
        self._tick: Timer | None = None
        self.last_event: float | None = None
        """The client clock of the last event applied (shown at the next tick: it changes with
        every streamed chunk, too often to redraw for)."""
        self._spin: Timer | None = None
        self._shown: dict[str, str] = {}
        """What each row shows now, by the row's id."""

    def compose(self) -> ComposeResult:
        yield Static(id="status-session", markup=False)
        yield Static(id="status-link", markup=False)

    def on_mount(self) -> None:
        self._tick = self.set_interval(1.0, self._redraw)
        self._redraw()

    def show(self, snapshot: Snapshot, *, started: float | None = None) -> None:
        """Draw `snapshot` (`Attachment.snapshot`, once per batch). A turn that started since the
        last one started at `started` (the client clock), else now; a reconnect is tried the
        link's delay after it was first said."""
        if snapshot.turn_id != self._turn:
            self._turn = snapshot.turn_id
            self.busy_since = (
                None if snapshot.turn_id is None else (started if started is not None else self.clock())
            )
        elif snapshot.state == "working" and self.busy_since is None:
            self.busy_since = self.clock()
        if snapshot.link != self.status.link or not isinstance(snapshot.link, Reconnecting):
            link = snapshot.link
            self.reconnect_at = self.clock() + link.delay if isinstance(link, Reconnecting) else None
        self.status = snapshot

    def retry_now(self) -> None:
        """The next reconnect try is now (Ctrl+R)."""
        self.reconnect_at = self.clock()
        self._redraw()

    def watch_status(self, status: Snapshot) -> None:
        busy = status.state in ("working", "asking")
        if busy and self._spin is None:
            self._spin = self.set_interval(0.1, self._redraw)
        elif not busy and self._spin is not None:
            self._spin.stop()
            self._spin = None
        self._redraw()

    def touch(self) -> None:
        """An event was applied now (redrawn at most once a second for it)."""
        previous, self.last_event = self.last_event, self.clock()
        if previous is None or self.last_event - previous >= 1.0:
            self._redraw()

    def session_row(self, width: int | None = None) -> str:
        """The first row as text; fields are left out, least useful first, to fit `width`."""
        s = self.status
        now = self.clock()
        known = isinstance(s.link, Live)
        if s.state in ("working", "asking") and not known:
            # Not followed now: what it does is unknown, so no clock counts on as if it were.
            seen = self.last_event if self.last_event is not None else self.busy_since
            ago = f", last seen {_age(now - seen)} ago" if seen is not None else ""
            head = f"◌ {s.state} (unknown while the link is down{ago})"
        elif s.state == "working":
            since = f" {_age(now - self.busy_since)}" if self.busy_since is not None else ""
            head = f"{SPINNER[int(now * 10) % len(SPINNER)]} working{since}"
        elif s.state == "asking":
            head = f"{SPINNER[int(now * 10) % len(SPINNER)]} asking"
        else:
            head = "● " + s.state
        parts: list[tuple[int, str]] = [(0, head)]
        if s.agent in (None, "model"):
            parts.append((3, f"model {s.model or 'default'}"))
        else:
            parts.append((0, s.agent))
            if s.agent_model:
                parts.append((3, f"model {s.agent_model}"))
        if s.mode:
            parts.append((2, f"mode {s.mode}"))
        if s.context_limit:
            share = 100 * s.context_used // max(1, s.context_limit)
            parts.append((2, f"context {_tokens(s.context_used)}/{_tokens(s.context_limit)} ({share}%)"))
        if any(s.tokens):
            parts.append((1, f"tokens {_tokens(s.tokens[0])} in / {_tokens(s.tokens[1])} out"))
        if s.cost:
            parts.append((1, f"cost {s.cost}"))
        if s.activity:
            parts.append((0, s.activity))
        if s.queued:
            parts.append((0, f"queued {s.queued}"))
        live_children = {k: v for k, v in s.children.items() if v}
        if live_children:
            parts.append((1, "children " + ", ".join(f"{v} {k}" for k, v in live_children.items())))
        return _fit(parts, width)

    def link_row(self, width: int | None = None) -> str:
        """The second row as text; fields are left out, least useful first, to fit `width` (a
        reconnect's or an end's reason is kept whole: the row wraps for it)."""
        s = self.status
        now = self.clock()
        if isinstance(s.link, Live):
            # The worker's own sentence: what is full, and that it goes on once space is freed.
            full = s.link.disk_full
            connection = "live"
            if full:
                connection += ", " + (full if full.startswith("disk full") else f"disk full: {full}")
        elif isinstance(s.link, Reconnecting):
            left = max(0.0, (self.reconnect_at or now) - now)
            connection = f"reconnecting in {left:.0f} s (Ctrl+R now): {s.link.reason}"
        else:
            connection = f"gone: {s.link.reason}"
        parts: list[tuple[int, str]] = [(2, s.where), (0, connection)]
        if s.principal.kind != "owner":
            me = f"as {s.principal.name} ({s.principal.kind})"
            if s.principal.kind == "collaborator" and s.principal.turns_left is not None:
                left = s.principal.turns_left
                me += f", {left} turn{'s' if left != 1 else ''} left"
            parts.append((0, me))
        if s.attached:
            parts.append((3, "attached: " + attached_text(s.attached)))
        if s.version:
            newer = f" (tui {s.installed} installed: /restart)" if s.installed else ""
            parts.append((1, f"worker {s.version}{newer}"))
        if self.last_event is not None:
            parts.append((1, f"last event {_age(now - self.last_event)} ago"))
        return _fit(parts, width)

    def on_resize(self) -> None:
        self._redraw()

    def _redraw(self) -> None:
        if not self.is_mounted:
            return
        s = self.status
        session = self.query_one("#status-session", Static)
        link = self.query_one("#status-link", Static)
        width = self.content_region.width or None
        self._show(session, self.session_row(width), width)
        session.set_class(s.state == "working", "-busy")
        session.set_class(s.state == "asking", "-asking")
        self._show(link, self.link_row(width), width)
        link.set_class(isinstance(s.link, Reconnecting), "-reconnecting")
        link.set_class(isinstance(s.link, Gone), "-gone")

    def _show(self, row: Static, text: str, width: int | None) -> None:
        """Show `text` in `row`: nothing is drawn when it did not change, and the screen is laid
        out again only when the row's height may (a text that wraps: a reconnect's reason). The
        clock ticks once a second; a layout of the whole screen at each tick stalled the app
        while it paged or streamed."""
        old = self._shown.get(row.id or "")
        if text == old:
            return
        self._shown[row.id or ""] = text

        def one_row(t: str | None) -> bool:
            return t is not None and width is not None and "\n" not in t and cell_len(t) <= width

        row.update(text, layout=not (one_row(old) and one_row(text)))
