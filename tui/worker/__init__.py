"""tui.worker."""
