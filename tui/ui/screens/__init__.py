"""The app's screens, each with its ``.tcss`` beside it."""
