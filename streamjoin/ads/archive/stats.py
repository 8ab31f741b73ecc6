"""The counters of one archive sink on one worker (:class:`ArchiveStats`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ArchiveStats"]


@dataclass
class ArchiveStats:
    """Counters of one archive sink on this worker (since the worker started)."""

    received: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    files: dict[str, int] = field(default_factory=dict)
    skipped_replays: int = 0
    bad: int = 0
    #: dead letters that are not late records (malformed inputs), not archived
    not_late: int = 0
    flushes: int = 0
    takeovers: int = 0
    #: times a partition was delivered from beyond what the archive saw, and
    #: the records then read from the brokers in between
    gaps: int = 0
    gap_records: int = 0

    @property
    def rows_written(self) -> int:
        """Rows written, all datasets."""
        return sum(self.rows.values())

    @property
    def files_written(self) -> int:
        """Files written, all datasets."""
        return sum(self.files.values())

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready copy."""
        return {
            "received": self.received,
            "rows": dict(sorted(self.rows.items())),
            "files": dict(sorted(self.files.items())),
            "skipped_replays": self.skipped_replays,
            "bad": self.bad,
            "not_late": self.not_late,
            "flushes": self.flushes,
            "takeovers": self.takeovers,
            "gaps": self.gaps,
            "gap_records": self.gap_records,
        }
