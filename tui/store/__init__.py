"""tui.store."""
