"""tui.web."""
