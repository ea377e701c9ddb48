"""Following a session and talking to it, wherever it is. Never imports Textual."""

from tui.link.base import AttachLink, Backoff, Gone, LinkState, Live, Located, Reconnecting

__all__ = ["AttachLink", "Backoff", "Gone", "LinkState", "Live", "Located", "Reconnecting"]
