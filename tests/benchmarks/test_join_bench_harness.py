"""The join benchmark's pure parts: percentiles, rates, tables, arguments, directory sizes,
the run's directory."""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.harness import kafka, measure, workers  # noqa: E402
from benchmarks.harness import report as printing  # noqa: E402
from benchmarks.join import __main__ as join  # noqa: E402
from benchmarks.join import latency as join_latency  # noqa: E402
from benchmarks.join import metrics_cost as join_metrics  # noqa: E402
from benchmarks.join import state as join_state  # noqa: E402
from benchmarks.join import takeover as join_takeover  # noqa: E402
from benchmarks.join import throughput as join_throughput  # noqa: E402

# -- percentiles ---------------------------------------------------------------


def test_percentile_is_nearest_rank_and_always_one_of_the_values() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert measure.percentile(values, 50) == 50.0
    assert measure.percentile(values, 95) == 95.0
    assert measure.percentile(values, 99) == 99.0
    assert measure.percentile(values, 100) == 100.0
    assert measure.percentile(values, 0.5) == 1.0
    # order of the input does not matter
    assert measure.percentile(list(reversed(values)), 99) == 99.0


def test_percentile_of_few_values() -> None:
    assert measure.percentile([7.0], 50) == 7.0
    assert measure.percentile([7.0], 99) == 7.0
    assert measure.percentile([3.0, 1.0], 50) == 1.0
    assert measure.percentile([3.0, 1.0], 51) == 3.0
    assert measure.percentile([10.0, 20.0, 30.0, 40.0], 75) == 30.0


@pytest.mark.parametrize("pct", [0, -1, 100.5, math.nan])
def test_percentile_rejects_a_percent_outside_0_100(pct: float) -> None:
    with pytest.raises(ValueError, match="percentile must be in"):
        measure.percentile([1.0, 2.0], pct)


def test_percentile_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="no values"):
        measure.percentile([], 50)


def test_latency_summary() -> None:
    values = [float(v) for v in range(1000, 0, -1)]
    summary = measure.LatencySummary.of(values)
    assert summary == measure.LatencySummary(
        count=1000, p50=500.0, p95=950.0, p99=990.0, max=1000.0
    )


# -- throughput ----------------------------------------------------------------


def test_throughput_times_only_records_between_the_two_polls() -> None:
    run = measure.Throughput(
        "streamjoin",
        records=12_000,
        first=measure.Sample(at=10.0, count=2_000),
        last=measure.Sample(at=15.0, count=12_000),
        startup_s=4.0,
    )
    assert run.seconds == 5.0
    assert run.timed == 10_000
    assert run.rate == 2_000.0


def test_throughput_too_short_to_time_has_no_rate() -> None:
    same = measure.Sample(at=3.0, count=500)
    run = measure.Throughput("peer", records=500, first=same, last=same)
    assert math.isnan(run.rate)
    assert printing.fmt_rate(run.rate) == "n/a"
    assert printing.fmt_rate(12_345.6) == "12,346"


def test_latency_rate_is_half_the_measured_throughput_capped() -> None:
    assert join_latency.latency_rate(4_000.0, None) == 2_000.0
    assert join_latency.latency_rate(4_000.0, 500.0) == 500.0
    assert join_latency.latency_rate(4_000.0, 9_000.0) == 2_000.0
    assert join_latency.latency_rate(None, 300.0) == 300.0
    assert join_latency.latency_rate(math.nan, 300.0) == 300.0
    assert join_latency.latency_rate(None, None) is None


def test_verdicts() -> None:
    assert printing.verdict(True) == "met"
    assert printing.verdict(False) == "NOT met"
    assert printing.verdict(None) == "-"


# -- tables --------------------------------------------------------------------


def test_render_table_aligns_columns() -> None:
    text = printing.render_table(
        ["run", "records/s"], [["peer", "16,873"], ["streamjoin", "2,530"]]
    )
    assert text.splitlines() == [
        "run         records/s",
        "----------  ---------",
        "peer           16,873",
        "streamjoin      2,530",
    ]


def test_render_table_without_rows_is_the_header() -> None:
    assert printing.render_table(["a", "bb"], []).splitlines() == ["a  bb", "-  --"]


def test_columns_left_aligns_unless_numeric() -> None:
    rows = [("", "streamjoin", "ratio"), ("fresh time", "1.2 ms", "")]
    assert printing.columns(rows) == ["            streamjoin  ratio", "fresh time  1.2 ms"]
    assert printing.columns(rows, numeric=True) == [
        "            streamjoin  ratio",
        "fresh time      1.2 ms",
    ]
    assert printing.columns([]) == []


def test_progress_is_due_once_per_interval() -> None:
    progress = printing.Progress(start=100.0, every=3.0)
    assert not progress.due(102.9)
    assert progress.due(103.0)
    assert not progress.due(105.0)
    assert progress.due(106.5)


def test_render_table_rejects_a_short_row() -> None:
    with pytest.raises(ValueError, match="1 cells for 2 headers"):
        printing.render_table(["a", "b"], [["only"]])


def test_summary_rows_report_targets() -> None:
    first, last = measure.Sample(0.0, 100), measure.Sample(10.0, 100_100)
    peer = measure.Throughput("peer", 100_100, first, last)
    ours = measure.Throughput("streamjoin", 100_100, first, measure.Sample(20.0, 100_100))
    report = join_throughput.ThroughputReport(kafka.Backlog(), peer, ours, {"late": 3})
    rows = {row[0]: row for row in join.summary_rows(report, None, None)}
    assert rows["streamjoin / peer"][1:] == ["50%", ">= 100%", "NOT met"]
    assert rows["late records (throughput run)"][1:] == ["3", "0", "NOT met"]

    traffic = join_latency.Traffic(
        sent={"c1": 100.0, "c2": 100.0},
        received={"c1": (102.5, 102_400), "c2": (101.0, 100_900)},
    )
    lat = join_latency.LatencyReport(300.0, 250.0, 2_000, 1_000, 10.0, traffic)
    assert lat.latencies(stamped=False) == [2_500.0, 1_000.0]
    assert lat.latencies(stamped=True) == [2_400.0, 900.0]
    rows = {row[0]: row for row in join.summary_rows(None, lat, None)}
    # the target is grace + 0.5 s at every rate
    assert rows["latency p99 ms at 300/s (grace 2000 ms)"][1:] == ["2,500", "<= 2,500", "met"]
    assert rows["clicks without an outcome at 300/s"][1:] == ["0", "0", "met"]
    fast = join_latency.LatencyReport(4_000.0, 3_000.0, 2_000, 1_000, 10.0, traffic)
    rows = {row[0]: row for row in join.summary_rows(None, [lat, fast], None)}
    assert rows["latency p99 ms at 4,000/s (grace 2000 ms)"][1:] == ["2,500", "<= 2,500", "met"]


# -- the comparison table (issue 38) -------------------------------------------


def _pass(label: str, rate: float, records: int = 1_000, **kw: object) -> join_throughput.Pass:
    run = measure.Throughput(
        label, records, measure.Sample(0.0, 0), measure.Sample(records / rate, records)
    )
    return join_throughput.Pass(label, run=run, **kw)  # type: ignore[arg-type]


def test_share_of_the_ceiling() -> None:
    assert join_throughput.share(50.0, 200.0) == 0.25
    assert join_throughput.share(50.0, None) is None
    assert join_throughput.share(50.0, math.nan) is None
    assert join_throughput.share(50.0, 0.0) is None
    assert join_throughput.share(math.nan, 200.0) is None
    assert join_throughput.fmt_share(0.254) == "25%"
    assert join_throughput.fmt_share(None) == ""


def test_comparison_rows_share_each_backlogs_own_ceiling() -> None:
    tp = join_throughput
    passes = [
        _pass(tp.CEILING, 100_000.0, ceiling=True),
        _pass(tp.JOIN_ALONE, 25_000.0, rss_bytes=150 * 2**20, changelog_records=1_340),
        tp.Pass(tp.QUIX, not_run="quixstreams is not installed"),
        _pass(tp.CEILING, 50_000.0, 5_000, backlog=tp.LARGE, ceiling=True),
        _pass(tp.JOIN_ALONE, 20_000.0, 5_000, backlog=tp.LARGE),
    ]
    rows = tp.comparison_rows(passes)
    assert rows == [
        [tp.CEILING, "1,000", "100,000", "100%", "", ""],
        [tp.JOIN_ALONE, "1,000", "25,000", "25%", "150 MiB", "1.340"],
        [tp.QUIX, "", "not run", "", "", ""],
        [f"{tp.CEILING}, large backlog", "5,000", "50,000", "100%", "", ""],
        [f"{tp.JOIN_ALONE}, large backlog", "5,000", "20,000", "40%", "", ""],
    ]
    text = printing.render_table(tp.COMPARISON_HEADERS, rows)
    assert text.splitlines()[0].split("  ")[0].strip() == "pass"


def test_comparison_rows_without_a_ceiling_have_no_share() -> None:
    rows = join_throughput.comparison_rows([_pass(join_throughput.PEER, 9_000.0)])
    assert rows == [[join_throughput.PEER, "1,000", "9,000", "", "", ""]]


def test_changelog_records_per_input() -> None:
    assert _pass("x", 10.0, 1_000, changelog_records=1_500).changelog_per_input == 1.5
    assert _pass("x", 10.0, 1_000).changelog_per_input is None
    assert join_throughput.Pass("x", not_run="why").changelog_per_input is None


def test_large_backlog_ratio_is_within_15_percent() -> None:
    assert join_throughput.large_ratio(20_000.0, 18_000.0) == 0.9
    assert join_throughput.large_ratio(math.nan, 18_000.0) is None
    assert join_throughput.large_ratio(20_000.0, math.nan) is None
    assert join_throughput.large_ratio_ok(0.86) is True
    assert join_throughput.large_ratio_ok(1.15) is True
    assert join_throughput.large_ratio_ok(0.84) is False
    assert join_throughput.large_ratio_ok(None) is None


def test_summary_rows_with_every_pass() -> None:
    tp = join_throughput
    peer = _pass(tp.PEER, 10_000.0)
    alone = _pass(tp.JOIN_ALONE, 25_000.0)
    large = _pass(tp.JOIN_ALONE, 20_000.0, 5_000, backlog=tp.LARGE)
    passes = [
        _pass(tp.CEILING, 100_000.0, ceiling=True),
        peer,
        _pass(tp.JOIN_LIVE, 5_000.0),
        alone,
        tp.Pass(tp.QUIX, not_run="no"),
        large,
    ]
    assert peer.run is not None and alone.run is not None
    report = tp.ThroughputReport(kafka.Backlog(), peer.run, alone.run, {}, [peer.run], passes)
    assert report.large_ratio == 0.8
    rows = {row[0]: row[1:] for row in join.summary_rows(report, None, None)}
    assert rows[f"{tp.CEILING} records/s"] == ["100,000", "", ""]
    assert rows[f"{tp.JOIN_LIVE} / ceiling"] == ["5%", "", ""]
    assert rows[f"{tp.QUIX} records/s"] == ["not run", "", ""]
    assert rows["streamjoin / peer"] == ["250%", ">= 100%", "met"]
    assert rows["streamjoin (join alone) large / main backlog"] == [
        "80%",
        "within 15%",
        "NOT met",
    ]
    assert f"{tp.PEER} records/s" not in rows
    # issue 38's targets
    assert rows[f"{tp.JOIN_ALONE} records/s (issue 38)"] == ["25,000", ">= 100,000", "NOT met"]
    assert rows[f"{tp.JOIN_LIVE} / join alone"] == ["20%", ">= 60%", "NOT met"]


def test_quix_pass_says_why_it_did_not_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(join_throughput, "quix_missing", lambda: "quixstreams is not installed")
    args = join.parse_args(["--skip-latency"])
    broker: Any = None  # not reached: the pass returns before it starts anything
    done, counts = join_throughput._run_quix(args, broker, Path(), "r", "p-", kafka.Backlog())
    assert (done.label, done.not_run, done.run, counts) == (
        join_throughput.QUIX,
        "quixstreams is not installed",
        None,
        {},
    )
    assert "not run: quixstreams is not installed" in capsys.readouterr().out
    rows = join_throughput.comparison_rows([done])
    assert rows == [[join_throughput.QUIX, "", "not run", "", "", ""]]


def test_peak_rss_of_a_process() -> None:
    import os

    rss = measure.process_peak_rss_bytes(os.getpid())
    assert rss is None or rss > 0
    assert measure.process_peak_rss_bytes(None) is None


def test_resident_memory_of_a_process_now() -> None:
    import os

    rss = measure.process_rss_bytes(os.getpid())
    assert rss is None or 0 < rss <= (measure.process_peak_rss_bytes(os.getpid()) or rss)
    assert measure.process_rss_bytes(None) is None


def test_memory_is_shown_where_a_pass_read_each_fifth_of_its_backlog() -> None:
    mib = 2**20
    samples = (
        (100, 10 * mib),
        (250, 20 * mib),
        (400, 30 * mib),
        (900, 40 * mib),
        (1_000, 50 * mib),
    )
    assert measure.memory_at(samples, 200) == 20 * mib  # the first sample at or past it
    assert measure.memory_at(samples, 1_001) is None
    run = measure.Throughput("w", 1_000, measure.Sample(0.0, 100), measure.Sample(1.0, 1_000),
                             memory=samples)  # fmt: skip
    line = join_throughput.memory_line(join_throughput.Pass("join", join_throughput.LARGE, run))
    assert line == (
        "join, large backlog: resident memory (MiB) as the backlog is read: "
        "20% 20, 40% 30, 60% 40, 80% 40, 100% 50"
    )
    assert join_throughput.memory_line(_pass("unwatched", 10.0)) is None
    # from the sample at 60% (40 MiB) to the last (50 MiB)
    growth = join_throughput.memory_growth(join_throughput.Pass("join", run=run))
    assert growth == pytest.approx(0.25)
    assert join_throughput.memory_growth(_pass("unwatched", 10.0)) is None


def test_count_is_served_on_loopback() -> None:
    from benchmarks.harness import counter
    from streamjoin.dev.broker import free_port

    counts = {"processed": 0}
    port = free_port()
    server = counter.serve_counts(port, counts)
    try:
        counts["processed"] = 42
        assert join_throughput.peer_processed(port) == 42
        assert workers.http_json(f"http://127.0.0.1:{port}/elsewhere") is None
    finally:
        server.shutdown()
        server.server_close()


# -- arguments -----------------------------------------------------------------


def test_defaults_are_valid() -> None:
    args = join.parse_args([])
    assert args.impressions == 800_000
    assert args.large_impressions == 4_000_000
    assert args.partitions == 4
    assert args.latency_seconds == 30.0
    assert args.state_events == 1_000_000
    assert (args.metrics_cost, args.metrics_rounds) == (False, 1)
    assert join.argument_problems(args) == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--impressions", "10"], "--impressions: must be >= 1000, got 10"),
        (["--partitions", "0"], "--partitions: must be >= 1"),
        (["--large-impressions", "10"], "--large-impressions: must be 0 (skip) or >= 1000"),
        (["--grace-ms", "500"], "--grace-ms: must be >= the backlog's generator jitter"),
        (["--latency-seconds", "0"], "--latency-seconds: must be a positive number"),
        (["--latency-seconds", "nan"], "--latency-seconds: must be a positive number"),
        (["--latency-rate", "-5"], "--latency-rate: must be a positive number of records/s"),
        (["--latency-jitter-ms", "3000"], "--latency-jitter-ms: must be in [0, --latency-grace"),
        (["--state-events", "0"], "--state-events: must be >= 1"),
        (["--state-commit-every", "0"], "--state-commit-every: must be >= 1"),
        (["--timeout", "0"], "--timeout: must be a positive number"),
        (["--metrics-cost", "--metrics-rounds", "0"], "--metrics-rounds: must be >= 1, got 0"),
        (
            ["--metrics-cost", "--skip-throughput"],
            "--metrics-cost: needs part 1, which --skip-throughput skips",
        ),
        (["--takeover-rate", "0"], "--takeover-rate: must be a positive number"),
        (["--takeover-after", "inf"], "--takeover-after: must be a positive number"),
        (
            ["--skip-throughput", "--skip-latency", "--skip-takeover", "--skip-state"],
            "nothing left to run",
        ),
        (["--impressions", "many"], "invalid int value"),
    ],
)
def test_bad_arguments_exit_2_with_a_clear_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        join.parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_every_problem_is_reported_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        join.parse_args(["--impressions", "1", "--state-events", "0"])
    err = capsys.readouterr().err
    assert "--impressions" in err and "--state-events" in err


def test_skipping_throughput_works_with_a_latency_rate() -> None:
    args = join.parse_args(["--skip-throughput", "--latency-rate", "500"])
    assert join.argument_problems(args) == []
    args = join.parse_args(["--skip-throughput", "--skip-latency"])
    assert join.argument_problems(args) == []


# -- the cost of /metrics (issue 40) -------------------------------------------


def _metrics_passes() -> list[join_throughput.Pass]:
    tp = join_throughput
    scraped = join_metrics.ScrapeStats(answered=30, unanswered=4, seconds=[0.002, 0.004, 0.010])
    return [
        _pass(tp.CEILING, 100_000.0, ceiling=True),
        _pass(tp.JOIN_ALONE, 30_000.0, metrics_cost=True),
        _pass(tp.JOIN_SCRAPED, 29_400.0, metrics_cost=True, scrapes=scraped),
        _pass(tp.JOIN_AGAIN, 32_000.0, metrics_cost=True),
        _pass(tp.JOIN_ALONE, 25_000.0, 5_000, backlog=tp.LARGE),
    ]


def test_metrics_cost_compares_scraped_passes_with_the_unscraped_ones() -> None:
    cost = join_metrics.metrics_cost(_metrics_passes())
    assert cost is not None
    assert cost.unscraped == pytest.approx([30_000.0, 32_000.0])
    assert cost.scraped == pytest.approx([29_400.0])
    assert cost.without == pytest.approx(31_000.0) and cost.with_ == pytest.approx(29_400.0)
    assert cost.ratio == pytest.approx(29_400 / 31_000)
    assert join_metrics.cost_rows(cost) == [
        ["records/s (mean)", "31,000", "29,400", "94.8%"],
        ["each pass", "30,000 / 32,000", "29,400", ""],
    ]
    assert join_metrics.summary_rows(cost) == [
        ["join alone scraped / not scraped records/s (issue 40)", "94.8%", ">= 95%", "NOT met"]
    ]
    assert join_metrics.ok(0.95) is True and join_metrics.ok(None) is None
    # without --metrics-cost: no comparison, no row
    plain = [p for p in _metrics_passes() if p.scrapes is None]
    assert join_metrics.metrics_cost(plain) is None
    assert join_metrics.summary_rows(None) == []


def test_the_summary_and_the_printout_put_the_scraped_pass_beside_the_join_alone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    tp = join_throughput
    passes = _metrics_passes()
    alone = passes[1]
    assert alone.run is not None
    report = tp.ThroughputReport(kafka.Backlog(), None, alone.run, {}, [], passes)
    rows = {row[0]: row[1:] for row in join.summary_rows(report, None, None)}
    assert rows["join alone scraped / not scraped records/s (issue 40)"][0] == "94.8%"
    # the join alone keeps its own rows (issue 38); the repeats are compared, not listed
    assert rows[f"{tp.JOIN_ALONE} records/s (issue 38)"][0] == "30,000"
    assert f"{tp.JOIN_SCRAPED} records/s" not in rows and f"{tp.JOIN_AGAIN} records/s" not in rows
    labels = [row[0] for row in tp.comparison_rows(passes)]
    assert tp.JOIN_SCRAPED in labels and tp.JOIN_AGAIN in labels
    tp.print_throughput(report)
    out = capsys.readouterr().out
    assert "metrics cost (issue 40): the join alone, GET /metrics every 1 s" in out
    assert "without scraping  scraped every 1 s  with / without" in out
    assert "scraped pass 1: 30 scrapes answered (4 while the worker started or failed)" in out
    assert "GET median 4.0 ms, max 10.0 ms" in out
    assert "scraped / unscraped records/s: 94.8% (target >= 95%): NOT met" in out


def test_metrics_cost_runs_rounds_of_a_scraped_then_an_unscraped_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[str, str, str, bool]] = []

    def fake(*a: Any, live: bool, scrape: bool = False) -> tuple[join_throughput.Pass, dict]:
        _args, _broker, _workdir, name, app_id, _prefix, _backlog, label, _which = a
        calls.append((name, app_id, label, scrape))
        return _pass(label, 10_000.0), {}

    monkeypatch.setattr(join_throughput, "_run_streamjoin", fake)
    args = join.parse_args(["--metrics-cost", "--metrics-rounds", "2"])
    passes = join_throughput._run_metrics_cost(args, None, Path(), "r", "p-", kafka.Backlog())
    tp = join_throughput
    assert calls == [
        ("streamjoin-scraped1", "r-sj-scraped1", f"{tp.JOIN_SCRAPED} (1)", True),
        ("streamjoin-again1", "r-sj-again1", f"{tp.JOIN_AGAIN} (1)", False),
        ("streamjoin-scraped2", "r-sj-scraped2", f"{tp.JOIN_SCRAPED} (2)", True),
        ("streamjoin-again2", "r-sj-again2", f"{tp.JOIN_AGAIN} (2)", False),
    ]
    assert all(p.metrics_cost for p in passes)


def _exposition() -> bytes:
    from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

    registry = CollectorRegistry()
    Counter(
        "streamjoin_join_input_records", "in", ["app", "join", "input"], registry=registry
    ).labels("a", "billing", "impressions").inc(5)
    lag = Gauge("streamjoin_consumer_lag_records", "lag", ["app", "topic", "partition"],
                registry=registry)  # fmt: skip
    for partition in range(3):
        lag.labels("a", "impressions", str(partition)).set(partition)
    Gauge("other_metric", "not ours", registry=registry).set(1)
    return generate_latest(registry)


def test_the_scraper_counts_pages_with_the_joins_metrics_and_times_them() -> None:
    import http.server
    import threading

    page = _exposition()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = page if self.path == "/metrics" else b"# starting\n"
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    port = server.server_address[1]
    try:
        scraper = join_metrics.MetricsScraper(join_metrics.metrics_url(port), timeout=1.0)
        scraper.scrape()
        scraper.scrape()
        # a page without the join's metrics (the worker not running it yet): unanswered
        scraper.url = f"http://127.0.0.1:{port}/elsewhere"
        scraper.scrape()
        from streamjoin.dev.broker import free_port

        scraper.url = join_metrics.metrics_url(free_port())  # nothing listens
        scraper.scrape()
        stats = scraper.stats()
        assert (stats.answered, stats.unanswered, len(stats.seconds)) == (2, 2, 2)
        assert stats.page_bytes == len(page)
        # the counter (with its _created gauge, a family of its own) and the lag gauge
        assert (stats.families, stats.samples) == (3, 5)
        # the background loop: started and stopped as a context manager
        with join_metrics.MetricsScraper(
            join_metrics.metrics_url(port), interval=0.01, timeout=1.0
        ) as looping:
            time.sleep(0.3)
        assert looping.stats().answered >= 2
    finally:
        server.shutdown()
        server.server_close()
    assert join_metrics.page_shape(b"<html>no</html>") == (0, 0)


# -- state size ----------------------------------------------------------------


def test_dir_bytes_splits_sst_wal_and_the_rest(tmp_path: Path) -> None:
    (tmp_path / "000012.sst").write_bytes(b"s" * 1000)
    (tmp_path / "000013.log").write_bytes(b"w" * 300)
    (tmp_path / "MANIFEST-000005").write_bytes(b"m" * 40)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "LOG").write_bytes(b"l" * 2)
    assert measure.dir_bytes(tmp_path) == {"sst": 1000, "wal": 300, "other": 42, "total": 1342}


def test_state_report_per_event_figures() -> None:
    sizes = {"sst": 0, "wal": 0, "other": 0, "total": 50 * 2**20}
    report = join_state.StateReport(
        events=1_000_000,
        impressions=800_000,
        clicks=200_000,
        seconds=1.0,
        flushed=sizes,
        compacted=sizes,
        keys={},
        logical_bytes=0,
    )
    assert report.per_event(sizes) == pytest.approx(52.4288)
    assert report.mib_per_million(sizes) == pytest.approx(50.0)


# -- the run's directory -------------------------------------------------------


def test_run_directory_is_removed_after_a_run_and_kept_after_a_failure(tmp_path: Path) -> None:
    with workers.run_directory("sj-test-") as done:
        (done / "w1.log").write_text("ok")
    assert not done.exists()
    with pytest.raises(RuntimeError), workers.run_directory("sj-test-") as failed:
        raise RuntimeError("a worker died")
    assert failed.exists()
    with workers.run_directory("sj-test-", keep=True) as kept:
        pass
    given = tmp_path / "given"
    with workers.run_directory("sj-test-", given=given) as used:
        assert used == given
    assert kept.exists() and given.exists()
    for path in (failed, kept):
        path.rmdir()


# -- takeover ------------------------------------------------------------------


def test_takeover_waits_split_at_the_kill_and_the_catch_up() -> None:
    """Task 0 is kept, task 1 taken over at t=10 (killed at t=5); task 0's record
    appended at t=10.0 waits until t=10.9: 0.7 s more than its 0.2 s before the
    kill, against a longest batch of 0.3 s in the catch-up."""
    look = join_takeover.Look
    looks = [
        look(1.2, {0: {"left": 1}}, 1),
        look(5.5, {0: {"left": 1}}, 2),
        look(10.0, {0: {"left": 2}, 1: {"left": 5}}, 3),
        look(10.3, {0: {"left": 2}, 1: {"left": 8}}, 4),
        look(10.6, {0: {"left": 2}, 1: {"left": 10}}, 5),
        look(10.9, {0: {"left": 3}, 1: {"left": 10}}, 6),
    ]
    appended = {
        (0, "left"): [(0, 1.0), (1, 5.2), (2, 10.0)],
        (1, "left"): [(o, 1.0 + o) for o in range(10)],
    }
    report = join_takeover.TakeoverReport(8_000.0, [0], [1], killed_at=5.0)
    report.catch_up = join_takeover._catch_up(looks, appended, [1])
    assert report.catch_up == (10.0, 10.6)  # task 1 applied offset 9 (appended at 10.0) at 10.6
    join_takeover._waits(looks, appended, report)
    report.longest_batch = join_takeover._longest_batch(looks, *report.catch_up)
    assert report.waits[0] == pytest.approx((0.2, 4.8, 0.9))
    assert report.longest_batch == pytest.approx(0.3)
    assert report.kept_extra == pytest.approx(0.7) and not report.ok
    # appended before the catch-up, applied in it: task 1's offsets 0..8, task 0's offset 1
    assert report.backlog == {0: 1, 1: 9}
