"""tui.access."""
