"""An app that only archives: the ad-monetization topics to Parquet, in its own workers.

Run it with ``streamjoin worker -A streamjoin.ads.archive.app:app``. It reads the
example's ``impressions`` and ``clicks``, the join's three outcome topics
and its dead-letter topic (the records it reported late)
in its own consumer group (so it neither slows the join nor depends on it)
and archives them under ``ARCHIVE_DIR`` exactly as
``streamjoin.ads.app`` does with ``ADS_ARCHIVE_DIR`` set. Use one or
the other for an archive root, not both.

Environment:
    ARCHIVE_DIR: the archive root (required).
    ARCHIVE_APP_ID: app id and consumer group (default ``ads-archive``).
    ARCHIVE_TOPIC_PREFIX: prefix of every topic name, as the join app's
        ``ADS_TOPIC_PREFIX`` (default empty).
    ARCHIVE_MAX_RECORDS: rows a partition buffers before writing (default 5000).
    ARCHIVE_FLUSH_INTERVAL: seconds a buffered row waits at most (default 5).

The app is built on first access of ``app`` (:func:`create_app`), so importing
this module has no side effect.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from streamjoin._lazy import lazy_attributes
from streamjoin.ads.errors import ArchiveConfigError
from streamjoin.ads.topics import AdTopics

__all__ = ["create_app"]


def create_app(environ: Mapping[str, str] | None = None) -> Any:
    """A ``streamjoin.App`` with one archive sink, configured by *environ* (``os.environ``).

    Raises:
        ArchiveConfigError: ``ARCHIVE_DIR`` is missing or a number is malformed.
    """
    import streamjoin
    from streamjoin.ads.archive.declare import archive_topics

    env = os.environ if environ is None else environ
    root = env.get("ARCHIVE_DIR")
    if not root:
        raise ArchiveConfigError(
            "streamjoin.ads.archive.app: set ARCHIVE_DIR to the archive root directory"
        )
    topics = AdTopics(env.get("ARCHIVE_TOPIC_PREFIX", ""))
    try:
        max_records = int(env.get("ARCHIVE_MAX_RECORDS", "5000"))
        flush_interval = float(env.get("ARCHIVE_FLUSH_INTERVAL", "5"))
    except ValueError as exc:
        raise ArchiveConfigError(f"streamjoin.ads.archive.app: {exc}") from None
    app = streamjoin.App(env.get("ARCHIVE_APP_ID", "ads-archive"), web_enabled=False)
    archive_topics(
        app,
        root,
        {
            "impressions": topics.impressions,
            "clicks": topics.clicks,
            "outcomes": list(topics.outcomes),
            "late": topics.dead_letters,
        },
        max_records=max_records,
        flush_interval=flush_interval,
    )
    return app


#: built from the environment on first access (``-A streamjoin.ads.archive.app:app``)
__getattr__ = lazy_attributes(__name__, {"app": create_app})
