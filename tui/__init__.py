"""tui: attach a full-screen terminal UI to long-lived agent sessions."""

__version__ = "0.1.0"
__all__ = ["__version__"]
