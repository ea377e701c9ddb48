"""The wire: pydantic models shared by the worker, the web bridge and every client."""

from tui.protocol.events import *  # noqa: F403
from tui.protocol.events import __all__ as _events_all
from tui.protocol.messages import *  # noqa: F403
from tui.protocol.messages import __all__ as _messages_all

__all__ = [*_events_all, *_messages_all]
