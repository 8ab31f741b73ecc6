"""Prometheus metrics of a worker: the catalogue, the collector and ``/metrics``.

:func:`~streamjoin.faust.metrics.endpoint.add_metrics_page` serves the text
exposition format on the worker's web server (``streamjoin.App`` calls it); the
figures come from :class:`~streamjoin.faust.metrics.collect.StreamjoinCollector`,
and every metric is declared once in :mod:`~streamjoin.faust.metrics.catalog`
(docs/operations.rst, "Metrics", lists them).
"""
