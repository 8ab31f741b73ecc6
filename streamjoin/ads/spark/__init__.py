"""The batch side on Apache Spark (PySpark): archive → join → campaign report → reconciliation.

It shares the stream's join *semantics and configuration*
(:class:`~streamjoin.ads.policy.AdAttribution` and its
:class:`~streamjoin.join.window.JoinWindow`), not its code paths: the same
rules are written as DataFrame operations.

Modules:

* :mod:`~streamjoin.ads.spark.archive`: the Parquet archive's contract and reader;
* :mod:`~streamjoin.ads.spark.attribution`: :func:`attribute_batch`, :func:`decided_clicks`;
* :mod:`~streamjoin.ads.spark.report`: :func:`campaign_report`;
* :mod:`~streamjoin.ads.spark.reconciliation`: :func:`reconcile`;
* :mod:`~streamjoin.ads.spark.session`: :func:`spark_session` (quiet, always stopped);
* :mod:`~streamjoin.cli.spark`: ``streamjoin spark report | reconcile | run``.

Importing this package does not import PySpark (it is an optional extra:
``pip install 'streamjoin[spark]'``); the names below load their module on
first use.
"""

from __future__ import annotations

from streamjoin._lazy import lazy_attributes

_LAZY = {
    "Archive": "streamjoin.ads.spark.archive",
    "CampaignReport": "streamjoin.ads.spark.report",
    "Reconciliation": "streamjoin.ads.spark.reconciliation",
    "attribute_batch": "streamjoin.ads.spark.attribution",
    "campaign_report": "streamjoin.ads.spark.report",
    "decided_clicks": "streamjoin.ads.spark.attribution",
    "load_policy": "streamjoin.ads.spark.policy",
    "read_archive": "streamjoin.ads.spark.archive",
    "reconcile": "streamjoin.ads.spark.reconciliation",
    "spark_session": "streamjoin.ads.spark.session",
    "stream_times": "streamjoin.ads.spark.attribution",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_attributes(__name__, _LAZY)
