"""The worker: one process per live session, running its agent and serving its bridge.

`tui.link.launch` starts one detached and waits for its bridge; `python -m tui.worker` is the
process itself (`tui.worker.process`).
"""
