"""The worker: one process per live session, running its agent and serving its bridge.

`tui.link.launch` starts one detached (``python -m tui.commands.worker``, which hands it the
access layer for its children) and waits for its bridge; `tui.worker.process` is the process itself.
"""
