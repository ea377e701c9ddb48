"""tui.ui."""
