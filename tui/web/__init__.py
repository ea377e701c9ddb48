"""The web bridge (``tui web``): this machine's sessions for other machines, behind bearer tokens."""

from tui.web.app import create_app
from tui.web.bridge import FEATURES, WebBridge
from tui.web.participants import Participant, ParticipantStore
from tui.web.paths import WebPaths
from tui.web.server import read_server, serve

__all__ = [
    "FEATURES",
    "Participant",
    "ParticipantStore",
    "WebBridge",
    "WebPaths",
    "create_app",
    "read_server",
    "serve",
]
