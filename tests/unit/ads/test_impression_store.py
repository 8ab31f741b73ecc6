"""The impressions a task holds: one row per key kept bare, several in (ts, id) order."""

from __future__ import annotations

from streamjoin.ads.impressions import ImpressionStore, held
from streamjoin.join.state import MemoryState

SEGMENT = 100


def test_a_key_with_one_impression_holds_the_bare_row() -> None:
    store = ImpressionStore(SEGMENT)
    store.add("a1", 150, "i1", "c1", 0.5)
    assert store.by_key["a1"] == (150, "i1", "c1", 0.5, None)
    assert held(store.by_key["a1"]) == ((150, "i1", "c1", 0.5, None),)
    assert store.holds("a1", 150, "i1") and not store.holds("a1", 150, "i2")
    assert store.first_match("a1", 100, 200) == ((150, "i1", "c1", 0.5, None), 0)
    assert store.first_match("a1", 151, 200) == (None, 0)
    assert store.first_match("a2", 0, 1_000) == (None, 0)


def test_several_impressions_of_a_key_stay_in_time_order_through_bills_and_expiry() -> None:
    store = ImpressionStore(SEGMENT)
    store.add("a1", 250, "i2", "c1", 1.0)
    store.add("a1", 150, "i1", "c2", 2.0)
    assert [row[1] for row in held(store.by_key["a1"])] == ["i1", "i2"]
    assert store.first_match("a1", 200, 300) == ((250, "i2", "c1", 1.0, None), 1)
    store.bill("a1", 1, "k9")
    assert held(store.by_key["a1"])[1][4] == "k9"
    assert store.bill_by_id("a1", "i1", "k1") == 150
    assert held(store.by_key["a1"])[0][4] == "k1"
    assert store.bill_by_id("a1", "nope", "k2") is None
    state = MemoryState()
    store.flush(state)
    assert store.expires_before(200)
    gone = store.expire(200)
    assert gone  # the segment's chunk goes from the state
    # the key's one row left is held bare again, its bill kept
    assert store.by_key["a1"] == (250, "i2", "c1", 1.0, "k9")
    assert store.count == 1
    store.expire(300)
    assert "a1" not in store.by_key and store.count == 0


def test_a_store_loaded_from_state_holds_what_was_flushed() -> None:
    store = ImpressionStore(SEGMENT)
    for n, ts in enumerate((120, 180, 130)):
        store.add(f"a{n % 2}", ts, f"i{n}", "c1", 0.25)
    state = MemoryState()
    store.flush(state)
    again = ImpressionStore(SEGMENT)
    seen: list[tuple[str, int]] = []
    again.load(state, lambda campaign, ts: seen.append((campaign, ts)))
    assert again.by_key == store.by_key
    assert again.count == 3 and sorted(seen) == [("c1", 120), ("c1", 130), ("c1", 180)]
