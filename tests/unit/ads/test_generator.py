"""The ad-monetization event generator's pure core, record files and argument checks."""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka.partitioner import DefaultPartitioner

from streamjoin.ads import generator as gen
from streamjoin.ads import policy
from streamjoin.ads.attribution import Click, Impression
from streamjoin.ads.generator import (
    ATTRIBUTION_WINDOW_MS,
    Event,
    GeneratorConfig,
    GeneratorConfigError,
    RecordWriter,
    clicks_from_record,
    generate,
    impressions_from_record,
    partition_for_key,
    read_record,
    record_row,
    row_value,
)
from streamjoin.ads.generator.cli import bootstrap_servers
from streamjoin.ads.topics import AdTopics
from streamjoin.join.policy import BadRecord

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "examples" / "ad_monetization" / "README.md"
MINUTE = 60_000
TAIL_LABELS = {"tail-impression", "tail-click"}
CLICK_LABELS = {"click", "duplicate", "outside-window", "orphan", "tail-click"}

# Two hours of event time at 2.5 impressions/s: ~18k impressions, ~22k records,
# long enough for clicks outside the 30 min window to appear.
LONG = GeneratorConfig(seed=2026, duration_ms=120 * MINUTE, rate=2.5)
# Many malformed records, to see every kind.
BROKEN = GeneratorConfig(seed=3, impressions=5_000, malformed_rate=0.05)


# -- a tiny, independent validator of the event contract ---------------------

IMPRESSION_FIELDS: dict[str, type | tuple[type, ...]] = {
    "auction_id": str,
    "impression_id": str,
    "campaign": str,
    "cost": (int, float),
    "ts_ms": int,
}
CLICK_FIELDS: dict[str, type | tuple[type, ...]] = {
    "auction_id": str,
    "click_id": str,
    "ts_ms": int,
}


def contract_problem(topic: str, key: bytes, value: bytes) -> str | None:
    """Why a record breaks the event contract, or ``None`` if it is valid."""
    try:
        obj = json.loads(value.decode("utf-8"))
    except UnicodeDecodeError:
        return "not utf-8"
    except json.JSONDecodeError:
        return "not json"
    if not isinstance(obj, dict):
        return "not an object"
    fields = IMPRESSION_FIELDS if topic == "impressions" else CLICK_FIELDS
    if set(obj) != set(fields):
        return f"fields {sorted(obj)}"
    for name, kind in fields.items():
        if isinstance(obj[name], bool) or not isinstance(obj[name], kind):
            return f"{name} is {type(obj[name]).__name__}"
        if obj[name] == "":
            return f"{name} is empty"
    if not 946_684_800_000 <= obj["ts_ms"] < 4_102_444_800_000:  # 2000 .. 2100
        return "ts_ms out of range"
    if obj["auction_id"].encode("utf-8") != key:
        return "key is not the auction id"
    return None


# -- fixtures and helpers ----------------------------------------------------


@pytest.fixture(scope="module")
def long_run() -> list[Event]:
    return list(generate(LONG))


@pytest.fixture(scope="module")
def broken_run() -> list[Event]:
    return list(generate(BROKEN))


def decoded(events: list[Event], topic: str) -> list[tuple[Event, dict[str, Any]]]:
    return [(e, json.loads(e.value)) for e in events if e.topic == topic and e.malformed is None]


def assert_share(hits: int, total: int, expected: float, sigmas: float = 5.0) -> None:
    """``hits / total`` is within ``sigmas`` binomial standard deviations of ``expected``."""
    assert total > 0
    tolerance = sigmas * math.sqrt(expected * (1 - expected) / total)
    share = hits / total
    assert abs(share - expected) <= tolerance, (hits, total, share, expected, tolerance)


def span_end(config: GeneratorConfig, events: list[Event]) -> int:
    """The span's end as the tail reveals it (tail ts = end + tail_ms)."""
    tail = [e for e in events if e.label in TAIL_LABELS]
    return tail[0].timestamp_ms - config.tail_ms


# -- determinism and ids -----------------------------------------------------


def test_the_same_seed_gives_the_same_events_and_another_seed_does_not() -> None:
    config = GeneratorConfig(seed=9, duration_ms=10 * MINUTE, rate=20, malformed_rate=0.01)
    first = list(generate(config))
    assert first == list(generate(config))
    assert len(first) > 10_000
    other = list(generate(GeneratorConfig(seed=10, duration_ms=10 * MINUTE, rate=20)))
    assert [e.value for e in other[:50]] != [e.value for e in first[:50]]


def test_a_fixed_seed_gives_a_pinned_record_file() -> None:
    """The record file of a fixed run, byte for byte: refactors must not change the output.

    The digest was taken from the generator before it became a package.
    """
    config = GeneratorConfig(seed=7, duration_ms=MINUTE, rate=50, malformed_rate=0.05, partitions=3)
    lines = [
        json.dumps(record_row(e, partition_for_key(e.key, 3), i), separators=(",", ":")) + "\n"
        for i, e in enumerate(generate(config))
    ]
    assert len(lines) == 3574
    digest = hashlib.sha256("".join(lines).encode()).hexdigest()
    assert digest == "68bf8efa538c9bb7cf5790bb128c9b95fd534210e677da5a28a357b8ad485ea6"


def test_ids_are_unique_and_carry_the_seed(long_run: list[Event]) -> None:
    imps = decoded(long_run, "impressions")
    clicks = decoded(long_run, "clicks")
    impression_ids = [v["impression_id"] for _, v in imps]
    click_ids = [v["click_id"] for _, v in clicks]
    auctions = [v["auction_id"] for _, v in imps]
    assert len(set(impression_ids)) == len(impression_ids) > 15_000
    assert len(set(click_ids)) == len(click_ids) > 3_000
    assert len(set(auctions)) == len(auctions)
    assert all(i.startswith("i-2026-") for i in impression_ids)
    assert all(k.startswith("k-2026-") for k in click_ids)
    assert all(a.startswith("a-2026-") for a in auctions)
    # malformed records use fresh auctions: no valid record shares their key
    valid_keys = {e.key for e in long_run if e.malformed is None}
    assert not valid_keys & {e.key for e in long_run if e.malformed}


# -- the contract ------------------------------------------------------------


def test_valid_records_follow_the_contract(long_run: list[Event]) -> None:
    for e in long_run:
        if e.malformed is not None:
            continue
        assert contract_problem(e.topic, e.key, e.value) is None, e
        obj = json.loads(e.value)
        assert e.timestamp_ms == obj["ts_ms"]
        assert e.value == json.dumps(obj, separators=(",", ":")).encode()  # compact
        if e.topic == "impressions":
            assert 0.05 <= obj["cost"] <= 2.0 and round(obj["cost"], 2) == obj["cost"]
            assert re.fullmatch(r"camp-0[0-7]", obj["campaign"])
    campaigns = Counter(v["campaign"] for _, v in decoded(long_run, "impressions"))
    assert len(campaigns) == 8
    costs = {v["cost"] for _, v in decoded(long_run, "impressions")}
    assert len(costs) > 50  # spread within and across campaigns


def test_malformed_records_fail_validation_and_cover_every_kind(broken_run: list[Event]) -> None:
    malformed = [e for e in broken_run if e.malformed is not None]
    for e in malformed:
        assert e.label == "malformed"
        assert contract_problem(e.topic, e.key, e.value) is not None, e
    kinds = Counter(e.malformed.split(":")[0] for e in malformed if e.malformed)
    assert set(kinds) == {
        "truncated-json",
        "not-utf8",
        "missing-field",
        "mistyped-field",
        "absurd-ts",
    }
    reasons = {e.malformed for e in malformed}
    assert {"absurd-ts:negative", "absurd-ts:after-2100", "mistyped-field:ts_ms"} <= reasons
    assert {"mistyped-field:cost"} <= reasons
    assert {e.topic for e in malformed} == {"impressions", "clicks"}
    # the Kafka timestamp of a malformed record is the generator's clock: inside the span
    valid_ts = [e.timestamp_ms for e in broken_run if e.malformed is None]
    assert all(min(valid_ts) <= e.timestamp_ms <= max(valid_ts) for e in malformed)


def test_the_join_apps_decoder_agrees_on_valid_and_malformed(broken_run: list[Event]) -> None:
    """streamjoin.ads.policy (what the app runs) accepts the valid records, rejects the rest."""
    from streamjoin.ads.policy import decode_click, decode_impression
    from streamjoin.join.policy import BadRecord

    decoders: dict[str, Callable[[bytes, bytes], Impression | Click]] = {
        "impressions": decode_impression,
        "clicks": decode_click,
    }
    rejected = 0
    for e in broken_run:
        decode = decoders[e.topic]
        if e.malformed is None:
            record = decode(e.key, e.value)
            assert (record.key.encode(), record.ts) == (e.key, e.timestamp_ms)
        else:
            with pytest.raises(BadRecord):
                decode(e.key, e.value)
            rejected += 1
    assert rejected > 100


def test_clicks_fall_in_the_window_except_outside_window_and_orphans(
    long_run: list[Event],
) -> None:
    imp_ts = {v["auction_id"]: v["ts_ms"] for _, v in decoded(long_run, "impressions")}
    labels: Counter[str] = Counter()
    for e, v in decoded(long_run, "clicks"):
        labels[e.label] += 1
        if e.label == "orphan":
            assert v["auction_id"] not in imp_ts
            continue
        delay = v["ts_ms"] - imp_ts[v["auction_id"]]
        if e.label == "outside-window":
            assert ATTRIBUTION_WINDOW_MS < delay <= 45 * MINUTE
        else:
            assert 0 <= delay <= ATTRIBUTION_WINDOW_MS
    assert min(labels.values()) > 0 and set(labels) == CLICK_LABELS


def test_labels_are_the_outcomes_of_the_ad_policy(long_run: list[Event]) -> None:
    """An independent oracle of the policy (30 min window) agrees with every click's label."""
    imps = {v["auction_id"]: v["ts_ms"] for _, v in decoded(long_run, "impressions")}
    by_auction: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
    for e, v in decoded(long_run, "clicks"):
        by_auction[v["auction_id"]].append((v["ts_ms"], v["click_id"], e.label))
    for auction, clicks in by_auction.items():
        billed = False
        for ts, _, label in sorted(clicks):
            in_window = auction in imps and imps[auction] <= ts <= imps[auction] + 30 * MINUTE
            if not in_window:
                expected = {"orphan"} if auction not in imps else {"outside-window"}
            elif billed:
                expected = {"duplicate"}
            else:
                expected, billed = {"click", "tail-click"}, True
            assert label in expected, (auction, clicks)


def test_shares_of_clicks_duplicates_orphans_and_malformed(long_run: list[Event]) -> None:
    labels = Counter(e.label for e in long_run if e.label not in TAIL_LABELS)
    cutoff = span_end(LONG, long_run) - LONG.jitter_ms
    # ctr and outside-window share: impressions whose clicks all fit in the span
    settled = {
        v["auction_id"]
        for _, v in decoded(long_run, "impressions")
        if v["ts_ms"] <= cutoff - 45 * MINUTE
    }
    first = {
        v["auction_id"]: e.label
        for e, v in decoded(long_run, "clicks")
        if e.label in ("click", "outside-window") and v["auction_id"] in settled
    }
    assert_share(len(first), len(settled), LONG.ctr)
    outside = sum(1 for label in first.values() if label == "outside-window")
    assert_share(outside, len(first), LONG.late_click_rate)
    assert_share(labels["duplicate"], labels["click"], LONG.dup_rate)
    clicks = sum(labels[k] for k in ("click", "duplicate", "outside-window", "orphan"))
    assert_share(labels["orphan"], clicks, LONG.orphan_rate)
    assert_share(labels["malformed"], sum(labels.values()), LONG.malformed_rate)


def test_malformed_share_with_a_higher_rate(broken_run: list[Event]) -> None:
    records = [e for e in broken_run if e.label not in TAIL_LABELS]
    assert_share(sum(1 for e in records if e.malformed), len(records), BROKEN.malformed_rate)


# -- production order ----------------------------------------------------------


def max_lateness(events: list[Event]) -> int:
    """max over records r of (largest timestamp produced before r) - r.timestamp_ms."""
    worst, highest = 0, None
    for e in events:
        if highest is not None:
            worst = max(worst, highest - e.timestamp_ms)
        highest = e.timestamp_ms if highest is None else max(highest, e.timestamp_ms)
    return worst


@pytest.mark.parametrize(("seed", "jitter_ms"), [(1, 2_000), (2, 500), (3, 10_000), (4, 0)])
def test_no_record_is_produced_more_than_jitter_after_a_later_one(
    seed: int, jitter_ms: int
) -> None:
    """For every record r: every record produced before r has timestamp <= r's + jitter_ms.

    So with stream time = the largest timestamp seen, no record is late for a
    join whose grace is at least jitter_ms (nor on any one partition, a subsequence).
    """
    config = GeneratorConfig(
        seed=seed, duration_ms=5 * MINUTE, rate=40, jitter_ms=jitter_ms, malformed_rate=0.01
    )
    events = list(generate(config))
    assert max_lateness(events) <= jitter_ms
    if jitter_ms == 0:
        assert [e.timestamp_ms for e in events] == sorted(e.timestamp_ms for e in events)
        return
    assert max_lateness(events) > jitter_ms // 2  # records really are out of order
    for p in range(config.partitions):
        part = [e for e in events if partition_for_key(e.key, config.partitions) == p]
        assert max_lateness(part) <= jitter_ms
    # some clicks are produced before their impression
    seen: set[bytes] = set()
    early = 0
    for e in events:
        if e.topic == "impressions":
            seen.add(e.key)
        elif e.label == "click" and e.key not in seen:
            early += 1
    assert early > 0


def test_every_record_arrives_within_the_span_and_the_tail_comes_last() -> None:
    config = GeneratorConfig(seed=6, duration_ms=3 * MINUTE, rate=50, tail_ms=45_000)
    events = list(generate(config))
    end = config.start_ts_ms + 3 * MINUTE
    body = [e for e in events if e.label not in TAIL_LABELS]
    tail = events[len(body) :]
    assert all(e.label in TAIL_LABELS for e in tail) and len(tail) == 2 * config.partitions
    assert all(config.start_ts_ms <= e.timestamp_ms <= end - config.jitter_ms for e in body)
    assert all(e.arrival_ms <= end for e in body)
    assert [e.arrival_ms for e in body] == sorted(e.arrival_ms for e in body)
    assert {e.timestamp_ms for e in tail} == {end + 45_000}


def test_impressions_mode_produces_exactly_that_many() -> None:
    config = GeneratorConfig(seed=8, impressions=1_234, rate=30, tail=False)
    events = list(generate(config))
    assert sum(1 for e in events if e.label == "impression") == 1_234
    assert not any(e.label in TAIL_LABELS for e in events)
    # the span ends jitter_ms after the last impression; the tail follows tail_ms later
    last = max(e.timestamp_ms for e in events if e.label == "impression")
    assert max(e.timestamp_ms for e in events) == last
    with_tail = list(generate(GeneratorConfig(seed=8, impressions=1_234, rate=30)))
    assert with_tail[: len(events)] == events
    assert {e.timestamp_ms for e in with_tail[len(events) :]} == {last + 2_000 + 60_000}
    only_tail = list(generate(GeneratorConfig(seed=8, impressions=0)))
    assert len(only_tail) == 8 and all(e.label in TAIL_LABELS for e in only_tail)


# -- the tail ------------------------------------------------------------------


@pytest.mark.parametrize("partitions", [1, 3, 4, 12])
def test_the_tail_hits_every_partition_of_both_topics(partitions: int) -> None:
    config = GeneratorConfig(seed=5, duration_ms=MINUTE, rate=10, partitions=partitions)
    events = list(generate(config))
    tail = events[-2 * partitions :]
    end = config.start_ts_ms + MINUTE
    for topic in ("impressions", "clicks"):
        keys = [e.key for e in tail if e.topic == topic]
        assert sorted(partition_for_key(k, partitions) for k in keys) == list(range(partitions))
    assert {e.key for e in tail if e.topic == "impressions"} == {
        e.key for e in tail if e.topic == "clicks"
    }
    for e in tail:
        assert e.malformed is None and contract_problem(e.topic, e.key, e.value) is None
        assert e.timestamp_ms == json.loads(e.value)["ts_ms"] == end + config.tail_ms
    # the tail's auctions are fresh
    assert not {e.key for e in tail} & {e.key for e in events[: -2 * partitions]}


def test_partition_for_key_is_the_kafka_default_partitioner() -> None:
    partitioner = DefaultPartitioner()
    for n in (1, 2, 4, 7, 32):
        for i in range(200):
            key = f"a-{i}-{n}".encode()
            assert partition_for_key(key, n) == partitioner(key, list(range(n)), list(range(n)))


def test_partition_for_key_matches_kafka_on_arbitrary_bytes() -> None:
    """streamjoin.partitioner's compiled murmur2 (the generator imports no Kafka
    client) hashes any bytes like Kafka's."""
    partitioner = DefaultPartitioner()
    rng = random.Random(0)
    for _ in range(3_000):
        key = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 24)))
        n = rng.randrange(1, 64)
        assert partition_for_key(key, n) == partitioner(key, list(range(n)), list(range(n)))


# -- record files ------------------------------------------------------------------


def test_record_file_round_trip(tmp_path: Path, broken_run: list[Event]) -> None:
    path = tmp_path / "run.jsonl"
    offsets: Counter[tuple[str, int]] = Counter()
    with RecordWriter(path) as writer:
        for e in broken_run:
            p = partition_for_key(e.key, 4)
            writer.write(record_row(e, p, offsets[(e.topic, p)]))
            offsets[(e.topic, p)] += 1
    assert [f.name for f in tmp_path.iterdir()] == ["run.jsonl"]  # no temporary file left
    rows = read_record(path)
    assert len(rows) == len(broken_run)
    assert {r["value_encoding"] for r in rows} == {"utf-8", "base64"}
    for row, e in zip(rows, broken_run, strict=True):
        assert row_value(row) == e.value
        assert row["key"].encode() == e.key and row["ts_ms"] == e.timestamp_ms
        assert (row["topic"], row["malformed"], row["label"]) == (e.topic, e.malformed, e.label)
        assert row["partition"] == partition_for_key(e.key, 4)
    expected_imps = [
        Impression(v["auction_id"], v["impression_id"], v["ts_ms"], v["campaign"], v["cost"])
        for _, v in decoded(broken_run, "impressions")
    ]
    expected_clicks = [
        Click(v["auction_id"], v["click_id"], v["ts_ms"]) for _, v in decoded(broken_run, "clicks")
    ]
    assert impressions_from_record(rows) == expected_imps
    assert clicks_from_record(rows) == expected_clicks


def test_a_failed_write_leaves_no_record_file(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    event = next(iter(generate(GeneratorConfig(seed=1, duration_ms=MINUTE))))
    with pytest.raises(RuntimeError), RecordWriter(path) as writer:
        writer.write(record_row(event, 0, 0))
        raise RuntimeError("broker went away")
    assert list(tmp_path.iterdir()) == []


def test_record_helpers_follow_renamed_topics(tmp_path: Path) -> None:
    config = GeneratorConfig(
        seed=4, duration_ms=MINUTE, impressions_topic="imp-x", clicks_topic="clk-x"
    )
    rows = [record_row(e, 0, i) for i, e in enumerate(generate(config))]
    assert {r["topic"] for r in rows} == {"imp-x", "clk-x"}
    assert impressions_from_record(rows) == []
    assert len(impressions_from_record(rows, topic="imp-x")) > 1_000
    assert len(clicks_from_record(rows, topic="clk-x")) > 100


def test_record_helpers_decode_with_the_join_apps_decoders() -> None:
    """A row that claims to be valid but that the join app would reject is an error."""
    event = next(
        e for e in generate(GeneratorConfig(seed=1, duration_ms=MINUTE)) if e.label == "click"
    )
    row = record_row(event, 0, 0)
    assert clicks_from_record([row]) == [policy.decode_click(event.key, event.value)]
    row["key"] = "someone-else"
    with pytest.raises(BadRecord):
        clicks_from_record([row])


# -- configuration and command line ------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"duration_ms": None}, "impressions"),
        ({"impressions": 10}, "impressions"),
        ({"ctr": 1.5}, "ctr"),
        ({"dup_rate": -0.1}, "dup_rate"),
        ({"orphan_rate": 1.0}, "orphan_rate"),
        ({"malformed_rate": 1.0}, "malformed_rate"),
        ({"rate": 0}, "rate"),
        ({"rate": math.inf}, "rate"),
        ({"jitter_ms": -1}, "jitter_ms"),
        ({"duration_ms": 2_000}, "duration_ms"),
        ({"partitions": 0}, "partitions"),
        ({"campaigns": 0}, "campaigns"),
        ({"seed": -1}, "seed"),
        ({"seed": True}, "seed"),
        ({"start_ts_ms": 4_102_444_800_000}, "start_ts_ms"),
        ({"start_ts_ms": 0}, "start_ts_ms"),
        ({"clicks_topic": "impressions"}, "clicks_topic"),
    ],
)
def test_bad_settings_are_rejected_naming_the_field(changes: dict[str, Any], field: str) -> None:
    settings: dict[str, Any] = {"duration_ms": MINUTE, **changes}
    with pytest.raises(GeneratorConfigError) as info:
        GeneratorConfig(**settings)
    assert info.value.field == field


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        ([], "--bootstrap"),
        (["--bootstrap", "x:1", "--ctr", "2"], "--ctr"),
        (["--bootstrap", "x:1", "--rate", "fast"], "--rate"),
        (["--bootstrap", "x:1", "--duration", "5", "--impressions", "3"], "--impressions"),
        (["--bootstrap", "x:1", "--duration", "1"], "--duration"),
        (["--bootstrap", "x:1", "--duration", "-5"], "--duration"),
        (["--bootstrap", "x:1", "--speed", "-1"], "--speed"),
        (["--bootstrap", "x:1", "--record", "/no/such/dir/x.jsonl"], "--record"),
        (["--bootstrap", "x:1", "--jitter-ms", "-3"], "--jitter-ms"),
        (["--bootstrap", "x:1", "--bogus"], "--bogus"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert gen.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("generator: error: ") and fragment in lines[0]


def test_command_line_maps_onto_the_config() -> None:
    args = gen._parser().parse_args(
        ["--bootstrap", "h:1", "--seed", "3", "--impressions", "50", "--no-tail", "--ctr", "0.5"]
    )
    config = gen.config_from_args(args)
    assert config == GeneratorConfig(seed=3, impressions=50, tail=False, ctr=0.5)
    args = gen._parser().parse_args(["--bootstrap", "h:1", "--duration", "2.5"])
    assert gen.config_from_args(args).duration_ms == 2_500
    args = gen._parser().parse_args(["--bootstrap", "h:1"])
    assert gen.config_from_args(args) == GeneratorConfig(duration_ms=60_000)
    args = gen._parser().parse_args(["--bootstrap", "h:1", "--topic-prefix", "t1-"])
    config = gen.config_from_args(args)
    assert (config.impressions_topic, config.clicks_topic) == ("t1-impressions", "t1-clicks")
    args = gen._parser().parse_args(
        ["--bootstrap", "h:1", "--topic-prefix", "t1-", "--clicks-topic", "c"]
    )
    config = gen.config_from_args(args)
    assert (config.impressions_topic, config.clicks_topic) == ("t1-impressions", "c")


@pytest.mark.parametrize(
    ("raw", "servers"),
    [
        ("h:1", "h:1"),
        ("kafka://h:1", "h:1"),
        ("kafka://h:1,kafka://g:2", "h:1,g:2"),
        ("h:1, kafka://g:2 ,i:3", "h:1,g:2,i:3"),
    ],
)
def test_bootstrap_takes_a_comma_separated_list(raw: str, servers: str) -> None:
    assert bootstrap_servers(raw) == servers


def test_rules_come_from_the_ad_policy_and_topic_names() -> None:
    assert ATTRIBUTION_WINDOW_MS is policy.ATTRIBUTION_WINDOW_MS
    assert (gen.MIN_VALID_TS_MS, gen.MAX_VALID_TS_MS) == (policy.MIN_EVENT_TS, policy.MAX_EVENT_TS)
    assert AdTopics().inputs == (gen.IMPRESSIONS, gen.CLICKS)
    config = GeneratorConfig(duration_ms=MINUTE)
    assert (config.impressions_topic, config.clicks_topic) == AdTopics().inputs
    args = gen._parser().parse_args(["--bootstrap", "h:1", "--topic-prefix", "p-"])
    config = gen.config_from_args(args)
    assert (config.impressions_topic, config.clicks_topic) == AdTopics("p-").inputs


def test_importing_the_generator_imports_no_kafka_client() -> None:
    code = (
        "import sys\n"
        "from streamjoin.ads import generator as gen\n"
        "list(gen.generate(gen.GeneratorConfig(seed=1, impressions=50)))\n"
        "assert not [m for m in sys.modules if m.startswith('aiokafka')], 'aiokafka imported'\n"
        "gen.main\n"
        "assert 'aiokafka' in sys.modules\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert result.returncode == 0, result.stderr


# -- the README stays true ---------------------------------------------------------


def test_readme_examples_and_flags_match_the_code() -> None:
    text = README.read_text().split("## The join app")[0]
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)\n```", text, re.S)]
    impression, click, row = blocks
    for topic, obj in (("impressions", impression), ("clicks", click)):
        value = json.dumps(obj, separators=(",", ":")).encode()
        assert contract_problem(topic, obj["auction_id"].encode(), value) is None
    event = next(iter(generate(GeneratorConfig(seed=7, duration_ms=MINUTE))))
    assert list(row) == list(record_row(event, 0, 0))
    assert contract_problem(row["topic"], row["key"].encode(), row_value(row)) is None
    known = set(gen._parser()._option_string_actions)
    ours = "\n".join(line for line in text.splitlines() if not line.startswith("streamjoin "))
    mentioned = set(re.findall(r"(--[a-z][a-z-]*)", ours))
    assert len(mentioned) > 20
    assert mentioned <= known, mentioned - known


def test_readme_outcome_example_is_what_the_join_emits() -> None:
    from streamjoin.ads.attribution import ClickOutcome, Outcome
    from streamjoin.ads.policy import encode_outcome

    text = README.read_text().split("## The join app")[1]
    (example,) = re.findall(r"```json\n(.*?)\n```", text, re.S)
    doc = json.loads(example)
    outcome = ClickOutcome(
        doc["click_id"],
        doc["auction_id"],
        doc["click_ts_ms"],
        Outcome(doc["outcome"]),
        doc["impression_id"],
        doc["campaign"],
        doc["cost"],
    )
    assert encode_outcome(outcome).decode() == example
