"""Record files: one JSON object per line, one line per produced record.

``--record`` writes one (:class:`RecordWriter`, :func:`record_row`); the demo,
the tests and the reconciliation read it back (:func:`read_record`,
:func:`impressions_from_record`, :func:`clicks_from_record`). The valid rows
are decoded by the join app's own decoders (:mod:`streamjoin.ads.policy`).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from streamjoin.ads.attribution import Click, Impression
from streamjoin.ads.generator.config import CLICKS, IMPRESSIONS
from streamjoin.ads.generator.core import Event
from streamjoin.ads.policy import decode_click, decode_impression

__all__ = [
    "RecordWriter",
    "clicks_from_record",
    "impressions_from_record",
    "read_record",
    "record_row",
    "row_value",
]


def record_row(event: Event, partition: int, offset: int) -> dict[str, Any]:
    """The record-file row of ``event``, produced to ``partition`` at ``offset``.

    ``value`` is the value as text when it is valid UTF-8 (``value_encoding``
    ``"utf-8"``), else its base64 (``value_encoding`` ``"base64"``).
    """
    try:
        value, encoding = event.value.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        value, encoding = base64.b64encode(event.value).decode("ascii"), "base64"
    return {
        "topic": event.topic,
        "partition": partition,
        "offset": offset,
        "key": event.key.decode("utf-8"),
        "value": value,
        "value_encoding": encoding,
        "ts_ms": event.timestamp_ms,
        "malformed": event.malformed,
        "label": event.label,
    }


def row_value(row: dict[str, Any]) -> bytes:
    """The exact value bytes of a record-file row."""
    if row.get("value_encoding") == "base64":
        return base64.b64decode(row["value"])
    return str(row["value"]).encode("utf-8")


class RecordWriter:
    """Writes a record file atomically: rows go to a temporary file next to it,
    renamed into place by :meth:`commit`; a reader never sees half a file.

    Used as a context manager, it commits on success and discards the
    temporary file on an exception.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        self._file: IO[str] | None = None

    def __enter__(self) -> RecordWriter:
        self._file = self.tmp.open("w", encoding="utf-8")
        return self

    def write(self, row: dict[str, Any]) -> None:
        """Append one row."""
        if self._file is None:
            raise RuntimeError("RecordWriter.write outside its with block")
        self._file.write(json.dumps(row, separators=(",", ":")) + "\n")

    def commit(self) -> None:
        """Flush, fsync and rename the file into place."""
        if self._file is None:
            return
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        self._file = None
        os.replace(self.tmp, self.path)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.commit()
            return
        if self._file is not None:
            self._file.close()
            self._file = None
        self.tmp.unlink(missing_ok=True)


def read_record(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Load a record file: one dict per produced record, in production order."""
    with Path(path).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _valid_rows(rows: Iterable[dict[str, Any]], topic: str) -> Iterator[tuple[bytes, bytes]]:
    """The key and value bytes of ``topic``'s rows that are not malformed, in order."""
    for row in rows:
        if row["topic"] == topic and row.get("malformed") is None:
            yield str(row["key"]).encode("utf-8"), row_value(row)


def impressions_from_record(
    rows: Iterable[dict[str, Any]], topic: str = IMPRESSIONS
) -> list[Impression]:
    """The valid impressions of a record file's rows (malformed rows skipped), in order.

    Raises :class:`~streamjoin.join.policy.BadRecord` for a row that claims to
    be valid but that the join app would reject.
    """
    return [decode_impression(key, value) for key, value in _valid_rows(rows, topic)]


def clicks_from_record(rows: Iterable[dict[str, Any]], topic: str = CLICKS) -> list[Click]:
    """The valid clicks of a record file's rows (malformed rows skipped), in order.

    Raises :class:`~streamjoin.join.policy.BadRecord` like :func:`impressions_from_record`.
    """
    return [decode_click(key, value) for key, value in _valid_rows(rows, topic)]
