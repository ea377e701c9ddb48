"""The full-screen Textual app (`TuiApp`), its screens and widgets."""

from tui.ui.app import TuiApp

__all__ = ["TuiApp"]
