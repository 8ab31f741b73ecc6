"""Scraping the workers' ``GET /metrics`` during the demo, and the chart drawn from it.

Every worker of a ``streamjoin.App`` with its web server on serves its metrics in
Prometheus' text format at ``/metrics``. :class:`MetricsScraper` GETs the page of
every running worker each :data:`SCRAPE_INTERVAL` seconds from a background thread
of the demo process (urllib), parses it with prometheus_client's parser
(:func:`figures`) and records a :class:`Scrape`: the worker's consumer lag
(``streamjoin_consumer_lag_records`` summed over the input partitions of the
tasks it runs) and the records its joins received
(``streamjoin_join_input_records_total``). A worker that does not answer
(starting, killed, stopping) or answers with something unparsable counts as a
failed scrape and nothing else. The loop is bounded: it stops when told to or
after :data:`MAX_ROUNDS` rounds.

:meth:`ScrapeRecord.as_dict` is the report's ``metrics.json``; :func:`lag_chart`
draws ``lag.png``, consumer lag per worker over the run, and :func:`lag_section`
is the report's section around it.
"""

from __future__ import annotations

import html
import http.client
import json
import threading
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "INPUT_METRIC",
    "LAG_METRIC",
    "MetricsScraper",
    "Scrape",
    "ScrapeRecord",
    "figures",
    "lag_chart",
    "lag_section",
    "metrics_url",
]

#: the figure the chart draws: high watermark minus the join's position, per partition
LAG_METRIC = "streamjoin_consumer_lag_records"
#: records the joins received, per input: shows the page was a working worker's
INPUT_METRIC = "streamjoin_join_input_records_total"
#: seconds between two rounds of scrapes
SCRAPE_INTERVAL = 1.0
#: rounds at most (an hour at one a second): the loop ends even if never told to
MAX_ROUNDS = 3600
#: seconds a worker has to answer one scrape
SCRAPE_TIMEOUT = 2.0


def metrics_url(port: int) -> str:
    """Where the worker whose web server listens on *port* serves its metrics."""
    return f"http://127.0.0.1:{port}/metrics"


@dataclass(frozen=True)
class Scrape:
    """One scrape of ``worker`` at ``t`` (seconds since the demo started): its
    consumer lag summed over its partitions, and its joins' input records."""

    t: float
    worker: str
    lag: int
    input_records: int


def figures(text: str) -> dict[str, float]:
    """The sum of every sample of :data:`LAG_METRIC` and :data:`INPUT_METRIC` on a
    ``/metrics`` page (0 for a metric without samples: a worker with no task).

    Raises:
        ValueError: the page is not Prometheus' text format.
    """
    from prometheus_client.parser import text_string_to_metric_families

    sums = {LAG_METRIC: 0.0, INPUT_METRIC: 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in sums:
                sums[sample.name] += sample.value
    return sums


@dataclass
class ScrapeRecord:
    """Every scrape of a run: the figures, the failed scrapes and each worker's URL."""

    scrapes: list[Scrape] = field(default_factory=list)
    failed: dict[str, int] = field(default_factory=dict)
    urls: dict[str, str] = field(default_factory=dict)
    interval: float = SCRAPE_INTERVAL

    def workers(self) -> list[str]:
        """Every worker scraped or tried, sorted by name."""
        return sorted(set(self.urls) | {s.worker for s in self.scrapes})

    def as_dict(self) -> dict[str, Any]:
        """The record as ``metrics.json`` holds it: per worker its URL, scrapes
        that failed and samples ``{t, lag, input_records}`` in time order."""
        workers: dict[str, Any] = {}
        for name in self.workers():
            samples = sorted((s for s in self.scrapes if s.worker == name), key=lambda s: s.t)
            workers[name] = {
                "url": self.urls.get(name, ""),
                "failed": self.failed.get(name, 0),
                "samples": [
                    {"t": s.t, "lag": s.lag, "input_records": s.input_records} for s in samples
                ],
            }
        return {
            "source": f"GET /metrics of every running worker every {self.interval:g} s, "
            "parsed with prometheus_client.parser",
            "metric": LAG_METRIC,
            "summed_over": "the input partitions of the tasks the worker runs",
            "interval_s": self.interval,
            "workers": workers,
        }


class MetricsScraper:
    """A background thread scraping ``/metrics`` of the workers *targets* gives.

    *targets*: called each round, ``(name, web port)`` of every worker running
    now; *clock*: seconds since the demo started.
    """

    def __init__(
        self,
        targets: Callable[[], Iterable[tuple[str, int]]],
        clock: Callable[[], float],
        *,
        interval: float = SCRAPE_INTERVAL,
        max_rounds: int = MAX_ROUNDS,
        timeout: float = SCRAPE_TIMEOUT,
    ) -> None:
        self.targets = targets
        self.clock = clock
        self.interval = interval
        self.max_rounds = max_rounds
        self.timeout = timeout
        self._record = ScrapeRecord(interval=interval)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start scraping (a daemon thread: it never keeps the demo alive)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="metrics-scraper", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop scraping and wait for the round under way."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval + 4 * self.timeout)

    def _loop(self) -> None:
        rounds = 0
        while rounds < self.max_rounds and not self._stop.is_set():
            self.scrape_once()
            rounds += 1
            self._stop.wait(self.interval)

    def scrape_once(self) -> None:
        """One round: scrape every worker running now, one after the other."""
        for name, port in list(self.targets()):
            if self._stop.is_set():
                return
            url = metrics_url(port)
            t = self.clock()
            try:
                with urllib.request.urlopen(url, timeout=self.timeout) as response:
                    sums = figures(response.read().decode())
            except (OSError, ValueError, http.client.HTTPException):
                with self._lock:
                    self._record.urls[name] = url
                    self._record.failed[name] = self._record.failed.get(name, 0) + 1
                continue
            scrape = Scrape(t, name, int(sums[LAG_METRIC]), int(sums[INPUT_METRIC]))
            with self._lock:
                self._record.urls[name] = url
                self._record.scrapes.append(scrape)

    def record(self) -> ScrapeRecord:
        """A copy of what was scraped so far."""
        with self._lock:
            r = self._record
            return ScrapeRecord(list(r.scrapes), dict(r.failed), dict(r.urls), r.interval)


def lag_chart(
    record: ScrapeRecord,
    events: Sequence[tuple[float, str]],
    end: float,
    path: Path,
    colour: Mapping[str, str],
) -> None:
    """Draw consumer lag per worker over the run from *record*'s scrapes, with
    the timeline's events (a worker joining, one killed) marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    fig, axis = plt.subplots(figsize=(11, 3.8))
    for name in record.workers():
        samples = sorted((s for s in record.scrapes if s.worker == name), key=lambda s: s.t)
        if samples:
            axis.plot(
                [s.t for s in samples],
                [s.lag for s in samples],
                drawstyle="steps-post",
                marker=".",
                markersize=3,
                linewidth=1.2,
                color=colour.get(name, "grey"),
                label=name,
            )
    for t, label in events:
        if label.startswith(("w1 ", "w2 ", "w3 ")) and "killed" not in label:
            continue  # the first three start together, before the generator
        axis.axvline(t, color="red" if "killed" in label else "darkgreen", linewidth=1.2)
        axis.text(
            t,
            1.0,
            f" {label}",
            transform=axis.get_xaxis_transform(),
            fontsize=8,
            va="top",
            ha="right",
            rotation=90,
            bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none", "pad": 1},
        )
    axis.set_xlim(0, max(end, 1))
    # a moved task's catch-up is thousands of records, a steady worker's lag a
    # handful: linear up to 10, logarithmic above, so both show
    axis.set_yscale("symlog", linthresh=10)
    # plain numbers: the default 10^n labels need matplotlib's mathtext parser
    axis.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
    axis.set_ylim(bottom=0)
    axis.set_xlabel("seconds since start")
    axis.set_ylabel("records behind the high watermark\n(linear to 10, log above)")
    axis.set_title(f"Consumer lag per worker (scraped from /metrics every {record.interval:g} s)")
    axis.grid(alpha=0.3)
    axis.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def lag_section(
    report: Path,
    scraped: ScrapeRecord | None,
    events: Sequence[tuple[float, str]],
    end: float,
    colours: Callable[[Sequence[str]], Mapping[str, str]],
) -> str:
    """The report's section "Consumer lag, scraped from /metrics" (HTML); draws
    ``lag.png`` (*colours*: each worker's colour, from the workers' names) and
    writes ``metrics.json`` in the directory *report* when anything was scraped."""
    head = "<h2>Consumer lag, scraped from /metrics</h2>\n"
    if scraped is None or not scraped.scrapes:
        return head + "<p>No worker's <code>/metrics</code> page was scraped.</p>"
    (report / "metrics.json").write_text(json.dumps(scraped.as_dict(), indent=1))
    lag_chart(scraped, events, end, report / "lag.png", colours(scraped.workers()))
    where = ", ".join(
        f"{html.escape(name)} at <code>{html.escape(url)}</code>"
        for name, url in sorted(scraped.urls.items())
    )
    failed = sum(scraped.failed.values())
    return (
        head + '<img src="lag.png" alt="consumer lag per worker" width="1000">\n'
        "<p>Drawn from the workers' own Prometheus endpoints, not from the demo's "
        f"bookkeeping: the demo fetched every running worker's <code>/metrics</code> "
        f"every {scraped.interval:g} s ({where}), parsed it with prometheus_client and "
        f"summed <code>{LAG_METRIC}</code> (each input partition's high watermark minus "
        "the join's position, for the tasks the worker runs). "
        f"{len(scraped.scrapes):,} scrapes, {failed:,} without an answer (a worker "
        "starting, killed or stopping). The figures are in <code>metrics.json</code>.</p>"
    )
