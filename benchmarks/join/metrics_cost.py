"""Join benchmark, ``--metrics-cost``: what serving ``GET /metrics`` costs the join (issue 40).

Part 1 runs the join alone on its backlog (one worker of ``streamjoin.ads.app``,
the live table off). With ``--metrics-cost`` it then runs, ``--metrics-rounds``
times, the same pass while a :class:`MetricsScraper` in this process GETs the
worker's ``/metrics`` every :data:`SCRAPE_INTERVAL_S` seconds (as a Prometheus
server would), followed by the same pass unscraped again, each pass in a
consumer group of its own on the same backlog. Scraped and unscraped passes
alternate, so a drift of the machine's load over the run weighs on both sides.

:func:`metrics_cost` compares the mean rate of the scraped passes with the
mean of the unscraped ones (the join alone's own pass included);
:func:`print_metrics_cost` prints them side by side with the ratio, and
:func:`summary_rows` gives the ratio against :data:`METRICS_RATIO_TARGET`.
"""

from __future__ import annotations

import http.client
import math
import statistics
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from benchmarks.harness.report import fmt_rate, render_table, say, verdict
from streamjoin.dev.broker import LOOPBACK

#: seconds between two scrapes (Prometheus' scrape_interval; its default is 60 s)
SCRAPE_INTERVAL_S = 1.0
#: seconds the worker has to answer one scrape
SCRAPE_TIMEOUT_S = 5.0
#: scraped records/s over unscraped ones: "no measurable slowdown" on this
#: machine, whose run-to-run spread for the same pass is a few percent
METRICS_RATIO_TARGET = 0.95
#: a line every page of a worker running the join has (its joins' input counter)
JOIN_METRIC = b"streamjoin_join_input_records_total"


def metrics_url(port: int) -> str:
    """The ``/metrics`` page of the worker whose web server is on *port*."""
    return f"http://{LOOPBACK}:{port}/metrics"


@dataclass
class ScrapeStats:
    """What the scrapes of one pass saw.

    ``answered``: pages with the join's metrics; ``unanswered``: scrapes that got
    no such page (the worker starting, or a failure); ``seconds``: how long each
    answered GET took, request to last byte; ``page_bytes``, ``families``,
    ``samples``: the last page's size, its metric families named ``streamjoin_*``
    and its samples of those.
    """

    answered: int = 0
    unanswered: int = 0
    seconds: list[float] = field(default_factory=list)
    page_bytes: int = 0
    families: int = 0
    samples: int = 0

    @property
    def median_ms(self) -> float:
        return 1000 * statistics.median(self.seconds) if self.seconds else math.nan

    @property
    def max_ms(self) -> float:
        return 1000 * max(self.seconds) if self.seconds else math.nan

    def line(self) -> str:
        """The scrapes in one line."""
        return (
            f"{self.answered:,} scrapes answered ({self.unanswered:,} while the worker started "
            f"or failed), GET median {self.median_ms:.1f} ms, max {self.max_ms:.1f} ms; last "
            f"page {self.page_bytes / 1024:.1f} KiB, {self.families} streamjoin families, "
            f"{self.samples} samples"
        )


def page_shape(page: bytes) -> tuple[int, int]:
    """``(families, samples)`` named ``streamjoin_*`` on a ``/metrics`` page,
    parsed with prometheus_client's parser (a page it cannot parse: ``(0, 0)``)."""
    from prometheus_client.parser import text_string_to_metric_families

    families = samples = 0
    try:
        for family in text_string_to_metric_families(page.decode()):
            if family.name.startswith("streamjoin_"):
                families += 1
                samples += len(family.samples)
    except ValueError:
        return 0, 0
    return families, samples


class MetricsScraper:
    """GETs *url* every *interval* seconds in a thread of this process until stopped
    (a context manager); :meth:`stats` says what it saw."""

    def __init__(
        self, url: str, interval: float = SCRAPE_INTERVAL_S, timeout: float = SCRAPE_TIMEOUT_S
    ) -> None:
        self.url = url
        self.interval = interval
        self.timeout = timeout
        self._stats = ScrapeStats()
        self._last = b""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="metrics-scraper", daemon=True)

    def __enter__(self) -> MetricsScraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval + self.timeout + 1)

    def scrape(self) -> None:
        """One GET, counted."""
        began = time.perf_counter()
        try:
            with urllib.request.urlopen(self.url, timeout=self.timeout) as response:
                page = response.read()
        except (OSError, http.client.HTTPException):
            self._stats.unanswered += 1
            return
        took = time.perf_counter() - began
        if JOIN_METRIC not in page:
            self._stats.unanswered += 1
            return
        self._stats.answered += 1
        self._stats.seconds.append(took)
        self._last = page

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.scrape()
            next_at += self.interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def stats(self) -> ScrapeStats:
        """What the scrapes saw so far, with the last page's shape."""
        stats = self._stats
        stats.page_bytes = len(self._last)
        stats.families, stats.samples = page_shape(self._last)
        return stats


class _Timed(Protocol):
    """A pass as :func:`metrics_cost` reads it (``throughput.Pass``)."""

    @property
    def rate(self) -> float: ...

    scrapes: ScrapeStats | None
    metrics_cost: bool


@dataclass
class MetricsCost:
    """The join alone's rates without and with scraping, and the scrapes."""

    unscraped: list[float]
    scraped: list[float]
    scrapes: list[ScrapeStats]

    @property
    def without(self) -> float:
        return statistics.fmean(self.unscraped) if self.unscraped else math.nan

    @property
    def with_(self) -> float:
        return statistics.fmean(self.scraped) if self.scraped else math.nan

    @property
    def ratio(self) -> float | None:
        """Mean scraped records/s over mean unscraped (``None``: a side is missing)."""
        if math.isnan(self.without) or math.isnan(self.with_) or self.without <= 0:
            return None
        return self.with_ / self.without


def metrics_cost(passes: Sequence[_Timed]) -> MetricsCost | None:
    """The comparison from part 1's passes (``None``: ``--metrics-cost`` was off)."""
    taking = [p for p in passes if p.metrics_cost and not math.isnan(p.rate)]
    if not any(p.scrapes is not None for p in taking):
        return None
    return MetricsCost(
        [p.rate for p in taking if p.scrapes is None],
        [p.rate for p in taking if p.scrapes is not None],
        [p.scrapes for p in taking if p.scrapes is not None],
    )


def ok(ratio: float | None) -> bool | None:
    """Is *ratio* at least :data:`METRICS_RATIO_TARGET` (``None``: not measured)?"""
    return None if ratio is None else ratio >= METRICS_RATIO_TARGET


def cost_rows(cost: MetricsCost) -> list[list[str]]:
    """The side-by-side table: without, with, with / without."""
    ratio = cost.ratio
    return [
        [
            "records/s (mean)",
            fmt_rate(cost.without),
            fmt_rate(cost.with_),
            "" if ratio is None else f"{ratio:.1%}",
        ],
        [
            "each pass",
            " / ".join(fmt_rate(r) for r in cost.unscraped),
            " / ".join(fmt_rate(r) for r in cost.scraped),
            "",
        ],
    ]


def print_metrics_cost(cost: MetricsCost) -> None:
    """Print the comparison and what the scrapes saw."""
    say(f"metrics cost (issue 40): the join alone, GET /metrics every {SCRAPE_INTERVAL_S:g} s")
    say(
        render_table(
            ["", "without scraping", f"scraped every {SCRAPE_INTERVAL_S:g} s", "with / without"],
            cost_rows(cost),
        )
    )
    for n, stats in enumerate(cost.scrapes, 1):
        say(f"scraped pass {n}: {stats.line()}")
    ratio = cost.ratio
    if ratio is not None:
        say(
            f"scraped / unscraped records/s: {ratio:.1%} (target >= {METRICS_RATIO_TARGET:.0%}): "
            f"{verdict(ok(ratio))}"
        )


def summary_rows(cost: MetricsCost | None) -> list[list[str]]:
    """The summary's row for the comparison (none when it did not run)."""
    if cost is None or cost.ratio is None:
        return []
    return [
        [
            "join alone scraped / not scraped records/s (issue 40)",
            f"{cost.ratio:.1%}",
            f">= {METRICS_RATIO_TARGET:.0%}",
            verdict(ok(cost.ratio)),
        ]
    ]
