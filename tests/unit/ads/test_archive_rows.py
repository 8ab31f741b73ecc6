"""Record-to-row conversion (pure), on the example generator's events and the join's outcomes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from streamjoin.ads.archive.layout import hour_bucket
from streamjoin.ads.archive.rows import (
    CLICKS,
    DATASETS,
    IMPRESSIONS,
    OUTCOMES,
    BadRecord,
    SourceRecord,
    click_row,
    impression_row,
    outcome_row,
)
from streamjoin.ads.attribution import Click, attribute
from streamjoin.ads.policy import decode_click, decode_impression, encode_outcome
from streamjoin.join.window import JoinWindow

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from streamjoin.ads.generator import (  # noqa: E402
    CLICKS as CLICKS_TOPIC,
)
from streamjoin.ads.generator import (  # noqa: E402
    GeneratorConfig,
    generate,
)

WINDOW = JoinWindow(before=0, after=30 * 60 * 1000, grace=10_000)
EVENTS = list(
    generate(GeneratorConfig(seed=11, impressions=400, rate=2.0, malformed_rate=0.08, dup_rate=0.5))
)


def _record(event: object, offset: int) -> SourceRecord:
    return SourceRecord(event.topic, 2, offset, event.key, event.value)  # type: ignore[attr-defined]


def test_every_valid_generated_event_becomes_a_row_and_every_malformed_one_is_refused() -> None:
    kinds = set()
    valid = 0
    for offset, event in enumerate(EVENTS):
        dataset = CLICKS if event.topic == CLICKS_TOPIC else IMPRESSIONS
        record = _record(event, offset)
        if event.malformed is not None:
            kinds.add(event.malformed.split(":")[0])
            with pytest.raises(BadRecord):
                dataset.convert(record)
            continue
        valid += 1
        row = dataset.convert(record)
        doc = json.loads(event.value)
        assert list(row) == [c.name for c in dataset.columns]
        assert row["partition"] == 2 and row["offset"] == offset
        assert row["auction_id"] == doc["auction_id"] == event.key.decode()
        assert row["ts_ms"] == doc["ts_ms"]
        assert dataset.bucket(row) == hour_bucket(doc["ts_ms"])
        if dataset is IMPRESSIONS:
            assert (row["impression_id"], row["campaign"]) == (
                doc["impression_id"],
                doc["campaign"],
            )
            assert row["cost"] == float(doc["cost"]) and isinstance(row["cost"], float)
        else:
            assert row["click_id"] == doc["click_id"]
    assert valid > 300
    assert kinds == {"truncated-json", "not-utf8", "missing-field", "mistyped-field", "absurd-ts"}


def test_rows_accept_exactly_what_the_join_accepts() -> None:
    """The archive refuses a record if and only if the join's decoder does."""
    for offset, event in enumerate(EVENTS):
        decode, convert = (
            (decode_click, click_row)
            if event.topic == CLICKS_TOPIC
            else (decode_impression, impression_row)
        )
        try:
            decode(event.key, event.value)
            joinable = True
        except BadRecord:
            joinable = False
        try:
            convert(_record(event, offset))
            archived = True
        except BadRecord:
            archived = False
        assert joinable == archived
    # the key must be the auction id, as for the join
    value = b'{"auction_id":"a-1","click_id":"k-1","ts_ms":1767225600000}'
    with pytest.raises(BadRecord, match="key"):
        click_row(SourceRecord("clicks", 0, 0, b"a-2", value))
    with pytest.raises(BadRecord, match="no record key"):
        click_row(SourceRecord("clicks", 0, 0, None, value))
    assert click_row(SourceRecord("clicks", 0, 0, b"a-1", value))["click_id"] == "k-1"


def test_outcome_rows_from_the_joins_encoded_outcomes() -> None:
    impressions, clicks = [], []
    for event in EVENTS:
        if event.malformed is not None:
            continue
        if event.topic == CLICKS_TOPIC:
            clicks.append(decode_click(event.key, event.value))
        else:
            impressions.append(decode_impression(event.key, event.value))
    outcomes = attribute(impressions, clicks, WINDOW)
    seen = set()
    for offset, outcome in enumerate(sorted(outcomes.values(), key=lambda o: o.click_id)):
        topic = f"p-{outcome.outcome.value}-clicks"
        value = encode_outcome(outcome)
        row = outcome_row(SourceRecord(topic, 1, offset, outcome.click_id.encode(), value))
        assert list(row) == [c.name for c in OUTCOMES.columns]
        assert row["click_id"] == outcome.click_id and row["auction_id"] == outcome.key
        assert row["click_ts_ms"] == outcome.click_ts
        assert row["outcome"] == outcome.outcome.value
        assert (row["impression_id"], row["campaign"]) == (outcome.impression_id, outcome.campaign)
        assert row["cost"] == json.loads(value)["cost"] and isinstance(row["cost"], float)
        assert (row["source_topic"], row["partition"], row["offset"]) == (topic, 1, offset)
        assert OUTCOMES.bucket(row) == hour_bucket(outcome.click_ts)
        seen.add(row["outcome"])
        if row["outcome"] == "unattributed":
            assert row["impression_id"] is None and row["campaign"] is None
    assert seen == {"attributed", "duplicate", "unattributed"}


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (b"k", None, "empty"),
        (b"k", b"\xff", "not JSON"),
        (b"k", b"[1]", "object"),
        (b"k", b'{"click_id":"k","outcome":"billed","click_ts_ms":1767225600000}', "unknown"),
        (b"k", b'{"click_id":"k","outcome":"duplicate","click_ts_ms":"1"}', "type"),
        (b"k", b'{"click_id":"k","outcome":"duplicate","click_ts_ms":5}', "outside"),
        (b"x", b'{"click_id":"k","outcome":"duplicate","click_ts_ms":1767225600000}', "key"),
        (b"k", b'{"click_id":"k","outcome":"duplicate","click_ts_ms":1767225600000}', "missing"),
    ],
)
def test_records_that_are_not_outcomes_are_refused(
    key: bytes, value: bytes | None, reason: str
) -> None:
    with pytest.raises(BadRecord, match=reason):
        outcome_row(SourceRecord("attributed-clicks", 0, 0, key, value))


def test_datasets_declare_the_contract_columns() -> None:
    def shape(name: str) -> list[tuple[str, str, bool]]:
        return [(c.name, c.type, c.nullable) for c in DATASETS[name].columns]

    source = [("partition", "int32", False), ("offset", "int64", False)]
    assert shape("impressions") == [
        ("auction_id", "string", False),
        ("impression_id", "string", False),
        ("campaign", "string", False),
        ("cost", "double", False),
        ("ts_ms", "int64", False),
        *source,
    ]
    assert shape("clicks") == [
        ("auction_id", "string", False),
        ("click_id", "string", False),
        ("ts_ms", "int64", False),
        *source,
    ]
    assert shape("outcomes") == [
        ("click_id", "string", False),
        ("auction_id", "string", False),
        ("click_ts_ms", "int64", False),
        ("outcome", "string", False),
        ("impression_id", "string", True),
        ("campaign", "string", True),
        ("cost", "double", False),
        ("source_topic", "string", False),
        *source,
    ]


def test_a_late_dead_letter_becomes_a_late_row_naming_the_input_record() -> None:
    from streamjoin.ads.archive.rows import LATE, late_row
    from streamjoin.join.policy import REASON_HEADER, SOURCE_HEADER, Late

    click = Click("a-1", "k-1", 1_767_225_600_000)
    reason = Late(click, "click", 1_767_225_700_000).emission(10_000).value
    headers = {REASON_HEADER: reason, SOURCE_HEADER: b"p-clicks:3:17"}
    row = late_row(SourceRecord("p-ads-dead-letters", 1, 5, b"a-1", b"{}", headers))
    assert row == {
        "input": "clicks",
        "ts_ms": 1_767_225_600_000,
        "input_topic": "p-clicks",
        "input_partition": 3,
        "input_offset": 17,
        "reason": reason.decode(),
        "partition": 1,
        "offset": 5,
    }
    assert LATE.bucket(row) == hour_bucket(1_767_225_600_000)
    assert [c.name for c in LATE.columns] == list(row)
    malformed = {REASON_HEADER: b"click: missing field 'ts_ms'", SOURCE_HEADER: b"p-clicks:0:1"}
    with pytest.raises(BadRecord, match="not a late record"):
        late_row(SourceRecord("p-ads-dead-letters", 0, 6, b"a-1", b"{}", malformed))
    with pytest.raises(BadRecord, match="unreadable source"):
        late_row(SourceRecord("t", 0, 7, None, b"", {REASON_HEADER: reason, SOURCE_HEADER: b"x"}))
