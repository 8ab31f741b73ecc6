"""``/metrics`` of a real app object (the shipped ad app, not started): every family
is in the catalogue with its labels, the join's counters come through, odd label
values are escaped, and a part that fails leaves the rest of the page standing.

Real workers scraped by a real Prometheus: ``tests/integration/test_prometheus.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from streamjoin._histogram import Buckets
from streamjoin.faust.metrics.catalog import METRICS, by_name
from streamjoin.faust.metrics.collect import StreamjoinCollector
from streamjoin.faust.metrics.endpoint import exposition


@pytest.fixture
def app() -> Iterator[Any]:
    """The shipped ad app, its joins' counters fresh for the test and put back after
    (the app object is shared by every test that imports it)."""
    from streamjoin.ads.app import app as ad_app
    from streamjoin.faust.join.stats import JoinStats

    kept = {name: join.stats for name, join in ad_app.joins.items()}
    for join in ad_app.joins.values():
        join.stats = JoinStats()
    try:
        yield ad_app
    finally:
        for name, stats in kept.items():
            ad_app.joins[name].stats = stats


def _scrape(registry: CollectorRegistry) -> dict[str, Any]:
    text = exposition(registry).decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def _samples(family: Any) -> Iterator[tuple[str, dict[str, str], float]]:
    for sample in family.samples:
        yield sample.name, sample.labels, sample.value


def test_every_family_is_in_the_catalogue_with_its_labels(app: Any) -> None:
    join = next(iter(app.joins.values()))
    join.stats.batch_seconds.observe(0.2)
    families = _scrape(app.metrics)
    catalog = by_name()
    ours = {name: f for name, f in families.items() if name.startswith("streamjoin_")}
    assert ours, "no streamjoin family on the page"
    for name, family in ours.items():
        full = f"{name}_total" if family.type == "counter" else name
        assert full in catalog, full
        spec = catalog[full]
        assert family.type == spec.kind, name
        for _, labels, _ in _samples(family):
            assert set(labels) - {"le"} == {"app", *spec.labels}, (name, labels)
            assert labels["app"] == app.conf.id


def test_the_join_counters_and_histograms_come_through(app: Any) -> None:
    name, join = next(iter(app.joins.items()))
    stats = join.stats
    stats.received["left"] += 7
    stats.late += 2
    stats.bad += 3
    stats.changelog_records += 11
    stats.emitted["attributed"] = stats.emitted.get("attributed", 0) + 5
    stats.batch_records.observe(40)
    families = _scrape(app.metrics)

    def value(family: str, **labels: str) -> float:
        for _, got, v in _samples(families[family]):
            if all(got.get(k) == want for k, want in labels.items()):
                return v
        raise AssertionError(f"{family} {labels} not on the page")

    left = join.config.left_topic
    assert value("streamjoin_join_input_records", join=name, input=left) == stats.received["left"]
    assert value("streamjoin_join_dead_letters", join=name, reason="late") == stats.late
    assert value("streamjoin_join_dead_letters", join=name, reason="malformed") == stats.bad
    assert value("streamjoin_join_changelog_records", join=name) == stats.changelog_records
    assert value("streamjoin_join_outputs", join=name, kind="attributed") >= 5
    counts = {
        labels["le"]: v
        for sample, labels, v in _samples(families["streamjoin_join_batch_records"])
        if sample.endswith("_bucket")
    }
    assert counts["+Inf"] == stats.batch_records.count
    assert counts["10.0"] <= counts["100.0"] == counts["+Inf"] - _above(stats.batch_records, 100)


def _above(buckets: Buckets, bound: float) -> int:
    return sum(
        n for b, n in zip((*buckets.bounds, float("inf")), buckets.counts, strict=True) if b > bound
    )


def test_dead_letters_are_not_counted_as_outputs(app: Any) -> None:
    """A record the router dead-letters (its own name for the output, the policy's
    ``DEAD_LETTER``) is in ``join_dead_letters_total`` alone: not also an output
    kind of ``join_outputs_total`` (a real Prometheus saw it there, issue 40)."""
    from streamjoin.faust.join.router import RecordRouter
    from streamjoin.faust.join.types import Fetched

    name, join = next(iter(app.joins.items()))
    router = RecordRouter(name, join.policy, join.stats, {}, join.config.dead_letters)
    record = Fetched(join.config.right_topic, 0, 7, b"a-1", b"{not json", 0)
    router.dead_letter(record, b"click: not JSON")  # as apply() does for a bad record
    join.stats.bad += 1
    join.stats.emitted["attributed"] = 4
    families = _scrape(app.metrics)
    outputs = {
        labels["kind"]: v
        for _, labels, v in _samples(families["streamjoin_join_outputs"])
        if labels["join"] == name
    }
    assert outputs == {"attributed": 4}
    dead = {
        labels["reason"]: v
        for _, labels, v in _samples(families["streamjoin_join_dead_letters"])
        if labels["join"] == name
    }
    assert dead == {"late": 0, "malformed": 1}


def test_odd_label_values_are_escaped_not_broken(app: Any) -> None:
    join = next(iter(app.joins.values()))
    odd = 'kind "quoted"\\with\nnewline and ünïcode'
    join.stats.emitted[odd] = 1
    try:
        families = _scrape(app.metrics)
        kinds = {labels["kind"] for _, labels, _ in _samples(families["streamjoin_join_outputs"])}
        assert odd in kinds
    finally:
        del join.stats.emitted[odd]


class _Failing(StreamjoinCollector):
    """A collector whose joins part fails, as a task torn down mid-scrape would."""

    def _joins(self, out: Any, now: float) -> None:
        raise RuntimeError("task closed under the scrape")


def test_a_failing_part_is_counted_and_the_rest_still_answers(app: Any) -> None:
    registry = CollectorRegistry(auto_describe=False)
    collector = _Failing(app)
    registry.register(collector)
    for _ in range(2):
        families = {
            f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())
        }
    errors = {labels["part"]: v for _, labels, v in _samples(families["streamjoin_scrape_errors"])}
    assert errors == {"joins": 2.0}
    assert "streamjoin_rebalances" in families  # the assignment part still answered


def test_buckets_are_cumulative_and_bounds_must_increase() -> None:
    buckets = Buckets((1.0, 2.0))
    for value in (0.5, 1.0, 1.5, 3.0):
        buckets.observe(value)
    assert buckets.cumulative() == [("1.0", 2), ("2.0", 3), ("+Inf", 4)]
    assert buckets.sum == 6.0 and buckets.count == 4
    with pytest.raises(ValueError, match="increase"):
        Buckets((2.0, 1.0))


def test_catalogue_names_follow_prometheus_rules() -> None:
    seen = set()
    for metric in METRICS:
        assert metric.name.startswith("streamjoin_")
        assert metric.name not in seen
        seen.add(metric.name)
        assert metric.name.endswith("_total") == (metric.kind == "counter"), metric.name
        assert "app" not in metric.labels
        assert not metric.name.endswith(("_milliseconds", "_ms", "_kb")), metric.name


def test_fausts_prometheus_sensor_works_beside_it_without_a_name_twice(app: Any) -> None:
    """faust's sensor registers its families on prometheus-client's default registry
    (``setup_prometheus_sensors`` does ``FaustMetrics.create(REGISTRY, prefix)``):
    they are on /metrics too, and no family name appears twice, even with faust's
    prefix ``streamjoin`` (the closest a name could come to ours)."""
    from faust.sensors.prometheus import FaustMetrics
    from prometheus_client import REGISTRY

    try:
        faust_metrics = FaustMetrics.create(REGISTRY, "streamjoin")
        faust_metrics.messages_received.inc()  # (a faust figure to see)
    except ValueError:  # registered by an earlier run in this process
        pass
    text = exposition(app.metrics).decode()
    names = [family.name for family in text_string_to_metric_families(text)]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert "streamjoin_messages_received" in names  # faust's, from the default registry
    assert "streamjoin_rebalances" in names  # ours


def test_state_bytes_counts_what_is_still_in_the_memtables(tmp_path: Any) -> None:
    """A join's state that has not been flushed yet is not 0 bytes (RocksDB's live
    data estimate alone counts only flushed files)."""
    from rocksdict import Rdict

    from streamjoin.faust.kafka.stores import state_bytes

    db = Rdict(str(tmp_path / "state"))
    try:
        empty = state_bytes(db)
        for i in range(2_000):
            db[f"key-{i}".encode()] = b"x" * 100
        assert empty is not None
        assert db.property_int_value("rocksdb.estimate-live-data-size") == 0  # not flushed
        grown = state_bytes(db)
        assert grown is not None and grown > empty + 100_000
    finally:
        db.close()
