"""`tui acp`: tui as an ACP agent on stdin/stdout, for editors (Zed, Toad, acpx …).

Its sessions are tui sessions (this machine's, or a remote's through `tui.access`); each one is
followed through a `SessionWatch`, and what the session says is told to the editor as ACP
``session/update`` notifications (`tui.editor.shapes`). `tui.editor.face` is the ACP agent side.
"""
