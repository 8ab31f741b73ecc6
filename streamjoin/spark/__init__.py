"""The batch side on Apache Spark (PySpark): archive → join → campaign report → reconciliation.

It shares the stream's join *semantics and configuration*
(:class:`~streamjoin.join.ads.AdAttribution` and its
:class:`~streamjoin.join.window.JoinWindow`), not its code paths: the same
rules are written as DataFrame operations.

Modules:

* :mod:`~streamjoin.spark.archive`: the Parquet archive's contract and reader;
* :mod:`~streamjoin.spark.attribution`: :func:`attribute_batch`, :func:`decided_clicks`;
* :mod:`~streamjoin.spark.report`: :func:`campaign_report`;
* :mod:`~streamjoin.spark.reconciliation`: :func:`reconcile`;
* :mod:`~streamjoin.spark.session`: :func:`spark_session` (quiet, always stopped);
* :mod:`~streamjoin.spark.cli`: ``streamjoin spark report | reconcile | run``.

Importing this package does not import PySpark (it is an optional extra:
``pip install 'streamjoin[spark]'``); the names below load their module on
first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Archive": "streamjoin.spark.archive",
    "CampaignReport": "streamjoin.spark.report",
    "Reconciliation": "streamjoin.spark.reconciliation",
    "attribute_batch": "streamjoin.spark.attribution",
    "campaign_report": "streamjoin.spark.report",
    "decided_clicks": "streamjoin.spark.attribution",
    "load_policy": "streamjoin.spark.policy",
    "read_archive": "streamjoin.spark.archive",
    "reconcile": "streamjoin.spark.reconciliation",
    "spark_session": "streamjoin.spark.session",
    "stream_times": "streamjoin.spark.attribution",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'streamjoin.spark' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
