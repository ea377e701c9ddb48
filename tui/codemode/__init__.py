"""tui.codemode."""
