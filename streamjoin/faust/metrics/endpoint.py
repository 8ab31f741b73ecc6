"""``GET /metrics``: the worker's metrics in Prometheus' text exposition format."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

from streamjoin.faust.metrics.collect import StreamjoinCollector

if TYPE_CHECKING:
    from faust.types import AppT
    from faust.web import Request, Response, View

__all__ = ["METRICS_PATH", "add_metrics_page", "exposition"]

#: where ``GET`` returns the metrics
METRICS_PATH = "/metrics"


def exposition(registry: CollectorRegistry) -> bytes:
    """streamjoin's metrics, then whatever the process's default registry holds
    (faust's Prometheus sensor registers there by default, and prometheus_client
    its process and Python collectors): one page, no name twice."""
    return generate_latest(registry) + generate_latest(REGISTRY)


def add_metrics_page(app: AppT) -> CollectorRegistry:
    """Serve the app's metrics at :data:`METRICS_PATH` on its web server; return
    the registry (of this app alone) that holds streamjoin's collector.

    :class:`streamjoin.App` calls this itself; a plain faust app using
    streamjoin's classes can call it once after creating the app. faust's own
    Prometheus sensor keeps working beside it: set it up with another pattern
    (``setup_prometheus_sensors(app, pattern="/faust-metrics")``), and its
    figures also appear on this page when it uses the default registry.
    The page answers only when the web server runs (``--with-web``).
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StreamjoinCollector(app))

    async def metrics(web: View, request: Request) -> Response:
        # the content type has parameters (version, charset): as a header, as
        # faust's sensor sends it (aiohttp refuses a charset in content_type)
        return web.bytes(exposition(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app.page(METRICS_PATH, name="streamjoin-metrics")(metrics)
    return registry
