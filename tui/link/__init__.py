"""tui.link."""
