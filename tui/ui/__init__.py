"""The full-screen Textual app (`TuiApp`), its screens and widgets."""

from tui.ui.app import Reach, Reached, TuiApp

__all__ = ["Reach", "Reached", "TuiApp"]
