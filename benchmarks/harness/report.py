"""Report printing: progress lines, aligned tables, verdicts and number formats."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence

#: at most one progress line this often (seconds)
PROGRESS_EVERY_S = 3.0


def say(line: str = "") -> None:
    """Print a line now (progress must show while the run goes on)."""
    print(line, flush=True)


def log(message: str) -> None:
    """Print a progress line to stderr now (stdout carries only the report)."""
    print(message, file=sys.stderr, flush=True)


class Progress:
    """Whether a progress line is due: the first *every* seconds after *start*, then
    *every* seconds after the last line that was due."""

    def __init__(self, start: float, every: float = PROGRESS_EVERY_S) -> None:
        self.last = start
        self.every = every

    def due(self, now: float) -> bool:
        """True (and the clock restarts at *now*) when a line is due at *now*."""
        if now - self.last >= self.every:
            self.last = now
            return True
        return False


def column_widths(rows: Sequence[Sequence[str]]) -> list[int]:
    """The widest cell of each column of *rows* (all rows as long as the first)."""
    return [max(len(row[i]) for row in rows) for i in range(len(rows[0]))] if rows else []


def columns(rows: Sequence[Sequence[str]], *, numeric: bool = False) -> list[str]:
    """*rows* as lines, cells two spaces apart, each column as wide as its widest cell.

    Cells are left-aligned; with *numeric*, all columns but the first are right-aligned.
    Trailing spaces are stripped.
    """
    widths = column_widths(rows)

    def line(cells: Sequence[str]) -> str:
        out = [
            cell.rjust(width) if numeric and i else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(out).rstrip()

    return [line(row) for row in rows]


def render_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A plain-text table: first column left-aligned, the others right-aligned.

    Raises:
        ValueError: a row does not have one cell per header.
    """
    body = [list(row) for row in rows]
    for row in body:
        if len(row) != len(headers):
            raise ValueError(f"row {row!r} has {len(row)} cells for {len(headers)} headers")
    table = [list(headers), *body]
    head, *lines = columns(table, numeric=True)
    rule = "  ".join("-" * w for w in column_widths(table))
    return "\n".join([head, rule, *lines])


def verdict(ok: bool | None) -> str:
    """``met`` / ``NOT met`` / ``-`` (no target or not measured)."""
    if ok is None:
        return "-"
    return "met" if ok else "NOT met"


def fmt_rate(rate: float) -> str:
    """Records per second with thousands separators (``n/a`` for NaN)."""
    return "n/a" if math.isnan(rate) else f"{rate:,.0f}"


def mib(n: float) -> str:
    """Bytes as MiB with two decimals."""
    return f"{n / 2**20:,.2f} MiB"
