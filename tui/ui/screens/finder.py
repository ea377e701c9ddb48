"""Search across sessions (``/search TEXT``, the palette's "Search: every session"): what to
find, and the hits of every session of the machine the app is attached on, newest first; Enter
on a hit opens it where it was (`SessionScreen.open_hit`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from tui.errors import TuiError
from tui.protocol.ids import short_id
from tui.protocol.web import Found, FoundHit, SearchQuery
from tui.terminal import visible

__all__ = ["Finder", "Searcher"]

Searcher = Callable[[SearchQuery], Awaitable[Found]]
"""Asks the machine's search index (the command line hands the app its `SessionAccess.search`)."""


def hit_label(hit: FoundHit) -> Text:
    """A hit as two lines: where it is, then its snippet with the match marked."""
    place = f"{hit.where} {hit.name}" if hit.name and hit.where in ("tool", "error") else hit.where
    when = hit.at.astimezone().strftime("%Y-%m-%d %H:%M")
    title = visible(" ".join((hit.title or "(untitled)").split()))[:40]
    head = Text(f"{short_id(hit.session_id)}  turn {hit.turn}  {when}  {place}  ", style="bold")
    head.append(title + ("  (archived)" if hit.archived else ""), style="dim")
    a, b = hit.match[0], hit.match[1]
    snippet = Text("  ")
    snippet.append(visible(hit.snippet[:a]))
    snippet.append(visible(hit.snippet[a:b]), style="reverse bold")
    snippet.append(visible(hit.snippet[b:]))
    return Text("\n").join([head, snippet])


class Finder(ModalScreen[tuple[FoundHit, str] | None]):
    """Find text in every session; the hit chosen, with the text it was found for (None: Esc)."""

    BINDINGS = [
        Binding("escape", "dismiss_none", "Close", id="finder.close", tooltip="Back to the session"),
        Binding("down", "hits", "Hits", show=False, id="finder.hits"),
    ]

    DEFAULT_CSS = """
    Finder { align: center middle; }
    Finder > Vertical { width: 90%; height: 80%; background: $panel; border: round $accent; padding: 0 1; }
    Finder Input { margin: 0 0 1 0; }
    Finder #finder-said { height: auto; color: $text-muted; }
    Finder OptionList { height: 1fr; }
    """

    def __init__(self, search: Searcher, text: str = "") -> None:
        super().__init__()
        self.search = search
        self.text = text
        self.hits: list[FoundHit] = []
        """The hits shown, in the list's order."""
        self.searched = ""
        """The text the hits shown are for."""

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Input(
                value=self.text, placeholder="text in every session (Enter searches)", id="finder-input"
            )
            yield Static("", id="finder-said", markup=False)
            yield OptionList(id="finder-hits")

    def on_mount(self) -> None:
        self.query_one("#finder-input", Input).focus()
        if self.text.strip():
            self.find(self.text)

    @on(Input.Submitted, "#finder-input")
    def _submitted(self, event: Input.Submitted) -> None:
        self.find(event.value)

    @work(group="finder", exclusive=True, exit_on_error=False)
    async def find(self, text: str) -> None:
        """Ask the index for `text` and list the hits."""
        said = self.query_one("#finder-said", Static)
        hits = self.query_one("#finder-hits", OptionList)
        if not text.strip():
            return
        said.update("searching every session…")
        try:
            found = await self.search(SearchQuery(q=text, limit=50))
        except TuiError as exc:
            said.update(str(exc))
            return
        self.hits, self.searched = list(found.hits), text
        hits.clear_options()
        hits.add_options([Option(hit_label(hit)) for hit in self.hits])
        if not self.hits:
            said.update(f"no session holds {text!r}")
            return
        more = " (the newest; there are more)" if found.next is not None else ""
        count = "1 hit" if len(self.hits) == 1 else f"{len(self.hits)} hits"
        said.update(f"{count}{more}: Enter opens one where it was, Esc goes back")
        hits.highlighted = 0
        hits.focus()

    @on(OptionList.OptionSelected, "#finder-hits")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss((self.hits[event.option_index], self.searched))

    def action_hits(self) -> None:
        if self.hits:
            self.query_one("#finder-hits", OptionList).focus()

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
