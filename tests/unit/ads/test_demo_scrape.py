"""The demo's scrapes of the workers' ``/metrics`` and the report's lag chart drawn from them."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from streamjoin.ads.demo.scrape import (
    INPUT_METRIC,
    LAG_METRIC,
    MetricsScraper,
    Scrape,
    ScrapeRecord,
    figures,
    metrics_url,
)
from streamjoin.dev.broker import free_port

WALL = 1_767_225_600.0


def test_the_scraped_names_are_in_the_catalogue_of_metrics() -> None:
    from streamjoin.faust.metrics.catalog import METRICS

    names = {m.name for m in METRICS}
    assert {LAG_METRIC, INPUT_METRIC} <= names


def _page(lags: dict[int, int], inputs: int) -> bytes:
    """A ``/metrics`` page as prometheus_client writes it, with the catalogue's names."""
    registry = CollectorRegistry()
    lag = Gauge(
        LAG_METRIC, "lag", ["app", "topic", "partition"], registry=registry
    )  # a gauge per input partition
    for partition, value in lags.items():
        lag.labels("ads", "impressions", str(partition)).set(value)
        lag.labels("ads", "clicks", str(partition)).set(1)
    counter = Counter(
        INPUT_METRIC.removesuffix("_total"), "in", ["app", "join", "input"], registry=registry
    )
    counter.labels("ads", "billing", "impressions").inc(inputs)
    return generate_latest(registry)


def test_figures_sum_every_partitions_lag_and_every_inputs_records() -> None:
    sums = figures(_page({0: 10, 3: 5}, 42).decode())
    assert sums == {LAG_METRIC: 17.0, INPUT_METRIC: 42.0}
    # a worker without tasks serves no lag series: 0
    assert figures("# nothing here\n") == {LAG_METRIC: 0.0, INPUT_METRIC: 0.0}
    with pytest.raises(ValueError):
        figures("<html>not metrics</html>\n")


class _Pages(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        if self.path != "/metrics":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _serve(body: bytes) -> Iterator[int]:
    handler = type("Handler", (_Pages,), {"body": body})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def worker_port() -> Iterator[int]:
    yield from _serve(_page({1: 7}, 100))


@pytest.fixture
def garbage_port() -> Iterator[int]:
    yield from _serve(b"<html>a proxy's error page</html>\n")


def test_a_round_records_the_workers_that_answer_and_counts_the_others(
    worker_port: int, garbage_port: int
) -> None:
    down = free_port()  # nothing listens: a worker killed or not up yet
    targets = [("w1", worker_port), ("w2", down), ("w3", garbage_port)]
    scraper = MetricsScraper(lambda: targets, lambda: 3.5, timeout=1.0)
    scraper.scrape_once()
    scraper.scrape_once()
    record = scraper.record()
    assert record.scrapes == [Scrape(3.5, "w1", 8, 100)] * 2
    assert record.failed == {"w2": 2, "w3": 2}
    assert record.urls == {
        "w1": metrics_url(worker_port),
        "w2": metrics_url(down),
        "w3": metrics_url(garbage_port),
    }
    data = record.as_dict()
    assert data["metric"] == LAG_METRIC
    assert data["workers"]["w1"]["samples"] == [{"t": 3.5, "lag": 8, "input_records": 100}] * 2
    assert data["workers"]["w2"] == {"url": metrics_url(down), "failed": 2, "samples": []}


def test_the_background_loop_is_bounded_and_stops_when_told(worker_port: int) -> None:
    ticks = iter(range(1000))
    scraper = MetricsScraper(
        lambda: [("w1", worker_port)], lambda: float(next(ticks)), interval=0.01, max_rounds=3
    )
    scraper.start()
    assert scraper._thread is not None
    scraper._thread.join(timeout=10)
    assert not scraper._thread.is_alive()  # three rounds, then it ended by itself
    assert [s.t for s in scraper.record().scrapes] == [0.0, 1.0, 2.0]
    scraper.stop()  # stopping an ended loop is fine
    # told to stop: it ends long before its rounds are done
    endless = MetricsScraper(lambda: [("w1", worker_port)], lambda: 0.0, interval=0.01)
    endless.start()
    endless.stop()
    assert endless._thread is not None and not endless._thread.is_alive()
    assert len(endless.record().scrapes) < endless.max_rounds


# matplotlib's font-config parser uses pyparsing names that pyparsing 3.3 deprecates
@pytest.mark.filterwarnings("ignore:.* deprecated - use:DeprecationWarning")
def test_the_report_draws_the_scraped_lag_and_says_where_it_comes_from(tmp_path: Path) -> None:
    from streamjoin.ads.demo.report import write_report
    from streamjoin.ads.demo.timeline import Sample

    scraped = ScrapeRecord(
        scrapes=[
            Scrape(1.0, "w1", 0, 10),
            Scrape(2.0, "w1", 250, 900),
            Scrape(1.0, "w2", 3, 12),
            Scrape(3.0, "w1", 4, 1_500),
        ],
        failed={"w2": 1},
        urls={"w1": "http://127.0.0.1:6001/metrics", "w2": "http://127.0.0.1:6002/metrics"},
    )
    options = SimpleNamespace(seed=1, duration=10.0, speed=1.0, partitions=2)
    page = write_report(
        tmp_path,
        samples=[Sample(0.0, "w1", (0,)), Sample(0.0, "w2", (1,))],
        events=[(1.5, "w2 killed (-9)")],
        end=4.0,
        verdict=None,
        options=options,
        wall_start=WALL,
        scraped=scraped,
    )
    text = page.read_text()
    assert '<img src="lag.png"' in text
    assert "w1 at <code>http://127.0.0.1:6001/metrics</code>" in text
    assert f"summed <code>{LAG_METRIC}</code>" in text
    assert "4 scrapes, 1 without an answer" in text
    assert (tmp_path / "report" / "lag.png").stat().st_size > 0
    data = json.loads((tmp_path / "report" / "metrics.json").read_text())
    assert [s["lag"] for s in data["workers"]["w1"]["samples"]] == [0, 250, 4]
    assert data["workers"]["w2"]["failed"] == 1
    # the existing sections are still there
    assert "<h2>Tasks over time</h2>" in text and (tmp_path / "report" / "tasks.png").exists()


@pytest.mark.filterwarnings("ignore:.* deprecated - use:DeprecationWarning")
def test_a_report_without_scrapes_says_so_and_draws_no_lag_chart(tmp_path: Path) -> None:
    from streamjoin.ads.demo.report import write_report

    options = SimpleNamespace(seed=1, duration=10.0, speed=1.0, partitions=2)
    page = write_report(
        tmp_path, samples=[], events=[], end=1.0, verdict=None, options=options, wall_start=WALL
    )
    assert "No worker's <code>/metrics</code> page was scraped." in page.read_text()
    assert not (tmp_path / "report" / "lag.png").exists()
    assert not (tmp_path / "report" / "metrics.json").exists()
