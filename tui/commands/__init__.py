"""One module per group of commands; `tui.cli` imports the one it runs."""
