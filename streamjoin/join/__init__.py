"""Windowed stream-stream joins. ``window`` and ``attribution`` are pure (no I/O)."""
