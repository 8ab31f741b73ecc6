"""``archive_topics(app, root, topics)``: an archive sink declared from dataset
names and topics (:class:`~streamjoin.ads.archive.sink.ArchiveSink`), checked first."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streamjoin.ads.archive.rows import Dataset
from streamjoin.ads.archive.sink import DATASET_KEYS, ArchiveSink
from streamjoin.ads.errors import ArchiveConfigError

__all__ = ["archive_topics"]


def _topic_names(value: Any) -> list[str]:
    items = value if isinstance(value, list | tuple) else [value]
    names = []
    for item in items:
        if isinstance(item, str):
            names.append(item)
            continue
        topics = list(getattr(item, "topics", ()) or ())
        if not topics or getattr(item, "pattern", None):
            raise ArchiveConfigError(f"archive: expected topic names or faust topics, got {item!r}")
        names.extend(str(t) for t in topics)
    return names


def archive_topics(
    app: Any,
    root: str | Path,
    topics: Mapping[str, Any],
    *,
    max_records: int = 5000,
    flush_interval: float = 5.0,
    name: str = "archive",
) -> ArchiveSink:
    """Archive topics of *app* as Parquet under *root*, exactly once per record.

    Arguments:
        app: the faust app (a ``streamjoin.App``) whose workers run the sink agent.
        root: the archive root (created as needed; shared by all workers).
        topics: dataset -> topic(s): ``{"impressions": topic, "clicks": topic,
            "outcomes": [attributed, duplicate, unattributed], "late":
            dead_letters}``; each topic is a name or a faust topic (only its
            name is used: the sink reads raw bytes). Any subset of the datasets
            may be given.
        max_records: rows a partition buffers before its files are written.
        flush_interval: seconds a buffered row waits at most.
        name: the sink's name (agent ``streamjoin.ads.archive.<name>``, log lines).

    Returns:
        The :class:`ArchiveSink` (its ``stats`` and ``describe()`` show progress).

    Raises:
        ArchiveConfigError: an unknown dataset, a topic given twice, bad settings.
    """
    unknown = sorted(set(topics) - set(DATASET_KEYS))
    if unknown:
        raise ArchiveConfigError(
            f"archive {name!r}: unknown datasets {unknown}; use {sorted(DATASET_KEYS)}"
        )
    datasets: dict[str, Dataset] = {}
    for key, value in topics.items():
        for topic in _topic_names(value):
            if topic in datasets:
                raise ArchiveConfigError(f"archive {name!r}: topic {topic!r} is given twice")
            datasets[topic] = DATASET_KEYS[key]
    return ArchiveSink(
        app,
        root,
        datasets,
        max_records=max_records,
        flush_interval=flush_interval,
        name=name,
    )
