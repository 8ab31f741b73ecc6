"""Restore progress: one log line per table per second, and a terminal progress bar.

:func:`format_progress` and :func:`format_bar` are pure; :class:`ProgressReporter`
decides when to print and where.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

__all__ = ["ProgressReporter", "TableProgress", "format_bar", "format_eta", "format_progress"]


@dataclass(frozen=True)
class TableProgress:
    """A snapshot of one table's restore."""

    table: str
    restored: int
    total: int
    elapsed: float

    @property
    def rate(self) -> float:
        """Records applied per second so far."""
        return self.restored / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def eta(self) -> float | None:
        """Seconds left at the current rate, ``None`` when unknown."""
        left = max(0, self.total - self.restored)
        if left == 0:
            return 0.0
        if self.rate <= 0:
            return None
        return left / self.rate


def format_eta(seconds: float | None) -> str:
    """``1m05s`` style duration, ``?`` when unknown."""
    if seconds is None:
        return "?"
    whole = round(seconds)
    minutes, secs = divmod(whole, 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def format_progress(p: TableProgress) -> str:
    """The per-second log line for one table."""
    pct = 100.0 * p.restored / p.total if p.total else 100.0
    return (
        f"restoring table {p.table}: {p.restored}/{p.total} records ({pct:.1f}%), "
        f"{p.rate:,.0f} records/s, ETA {format_eta(p.eta)}"
    )


def format_bar(p: TableProgress, width: int = 30) -> str:
    """A one-line text progress bar for one table."""
    frac = min(1.0, p.restored / p.total) if p.total else 1.0
    filled = int(frac * width)
    bar = "#" * filled + "." * (width - filled)
    return f"{p.table} [{bar}] {100 * frac:5.1f}% {p.rate:,.0f}/s ETA {format_eta(p.eta)}"


@dataclass
class ProgressReporter:
    """Emits restore progress at most once per ``interval`` seconds per table."""

    logger: logging.Logger
    interval: float = 1.0
    stream: TextIO = field(default_factory=lambda: sys.__stderr__ or sys.stderr)
    clock: Callable[[], float] = time.monotonic
    _last: dict[str, float] = field(default_factory=dict)

    def is_terminal(self) -> bool:
        """``True`` when progress bars should be drawn."""
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    def maybe_report(self, snapshots: list[TableProgress], *, force: bool = False) -> None:
        """Log each table's line if its interval has passed (or *force*)."""
        now = self.clock()
        due = [
            p for p in snapshots if force or now - self._last.get(p.table, -1e9) >= self.interval
        ]
        if not due:
            return
        for p in due:
            self._last[p.table] = now
            self.logger.info("%s", format_progress(p))
        if self.is_terminal():
            self.stream.write("\r" + " | ".join(format_bar(p) for p in snapshots) + "\x1b[K")
            if force:
                self.stream.write("\n")
            self.stream.flush()
