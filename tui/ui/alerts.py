"""A desktop notification through the terminal when the app is not in front.

When a question arrives or a turn ends while the terminal's window is not the one in front
(Textual's ``AppBlur``/``AppFocus``, from the terminal's focus reports), the app writes one
notification: OSC 9 (iTerm2, WezTerm, Ghostty), OSC 99 (kitty) or OSC 777 (foot) where the
terminal is known to show them, else the bell (which most terminals and tmux turn into an urgent
window). config.toml's ``[notify] terminal`` chooses (``auto``, ``osc9``, ``osc99``, ``osc777``,
``bell``, ``off``).
What is written is cleaned first: no control character of a program's text reaches the terminal.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from textual.app import App

from tui.link.changes import CaughtUp, QuestionChanged, TurnEnded

__all__ = ["Alerts", "alert", "pick"]

Mode = Literal["auto", "osc9", "osc99", "osc777", "bell", "off"]
Way = Literal["osc9", "osc99", "osc777", "bell"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")
QUIET = 10.0
"""Seconds after a turn's end was told in which the next turn's end is not (a script's quick
turns ring once); a question always rings."""
LIMIT = 180
"""Characters of a notification's text at most."""


def pick(environ: Mapping[str, str]) -> Way:
    """The way `auto` rings the terminal of `environ`: by what it says it is."""
    term = environ.get("TERM", "")
    program = environ.get("TERM_PROGRAM", "")
    if "TMUX" in environ or term.startswith(("screen", "tmux")):
        return "bell"  # tmux passes a bell on as an alert, and swallows the OSCs
    if term == "xterm-kitty" or "KITTY_WINDOW_ID" in environ:
        return "osc99"
    if program in ("iTerm.app", "WezTerm", "ghostty") or term == "xterm-ghostty":
        return "osc9"
    if term.startswith("foot"):
        return "osc777"
    return "bell"


def _clean(text: str, limit: int = LIMIT) -> str:
    text = _CONTROL.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def sequence(mode: Way, title: str, body: str) -> str:
    """What is written to the terminal for one notification."""
    if mode == "osc9":
        return f"\x1b]9;{_clean(f'{title}: {body}' if body else title)}\x07"
    if mode == "osc99":
        return f"\x1b]99;;{_clean(f'{title}: {body}' if body else title)}\x1b\\"
    if mode == "osc777":
        return f"\x1b]777;notify;{_clean(title).replace(';', ',')};{_clean(body).replace(';', ',')}\x07"
    return "\x07"


class Alerts:
    """The app's notifications: `saw` is given what the link delivered."""

    def __init__(
        self,
        mode: Mode = "auto",
        label: str = "tui",
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        chosen = pick(os.environ if environ is None else environ) if mode == "auto" else mode
        self.mode: Way | Literal["off"] = chosen
        self.label = label
        self.clock = clock
        self._turn_told = -QUIET
        self.sent: list[str] = []
        """Every sequence written (or that would have been, headless), newest last."""

    def saw(self, app: App[Any], items: Iterable[object]) -> None:
        """Ring once for what arrived at once, when the terminal is not in front: a question
        before a turn's end."""
        if self.mode == "off" or app.app_focus:
            return
        said: tuple[str, str] | None = None
        for item in items:
            if isinstance(item, QuestionChanged) and item.question is not None:
                said = (f"{self.label} asks", item.question.text)
            elif isinstance(item, TurnEnded | CaughtUp) and (said is None or not said[0].endswith("asks")):
                record = item.record if isinstance(item, TurnEnded) else item.records[-1]
                said = (f"{self.label}: turn {record.outcome}", record.error or record.reply[-LIMIT:])
        if said is None:
            return
        if not said[0].endswith("asks"):
            if self.clock() - self._turn_told < QUIET:
                return
            self._turn_told = self.clock()
        data = sequence(self.mode, *said)
        self.sent.append(data)
        driver = app._driver  # Textual writes its own escapes the same way (App.bell)
        if not app.is_headless and driver is not None:
            driver.write(data)


def alert(app: App[Any], items: Iterable[object]) -> None:
    """Hand `items` to the app's `Alerts`, when it has one."""
    alerts = getattr(app, "alerts", None)
    if isinstance(alerts, Alerts):
        alerts.saw(app, items)
