"""benchmarks/assignor_limits.py: every step is found and timed, and nothing stays wrapped."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import assignor_limits  # noqa: E402


def test_every_step_is_timed_inside_the_call_and_unwrapped_after() -> None:
    originals = [getattr(module, name) for _, module, name in assignor_limits.STEPS]
    document = assignor_limits.build_document("a-join", "rebalance")
    found = assignor_limits.measure(document, runs=2)
    assert [getattr(module, name) for _, module, name in assignor_limits.STEPS] == originals
    assert set(found["steps"]) == {label for label, _, _ in assignor_limits.STEPS}
    top = ("parse and check the document", "place (all of it)", "member tables")
    assert 0 < sum(found["steps"][label] for label in top) <= found["total"]
    assert found["steps"]["    standby quotas"] <= found["steps"]["  standbys (all of it)"]
    # the floor visits exactly what the members report
    reported = sum(
        len(parts)
        for member in document["members"]
        for field in ("actives", "standbys", "warmups")
        for parts in member.get(field, {}).values()
    ) + sum(len(offsets) for member in document["members"]
            for offsets in member.get("offsets", {}).values())
    assert found["entries"] == reported > 0
    table = assignor_limits.report("a-join", "rebalance", 2, found)
    assert "read claims and offsets" in table and "floor:" in table


def test_a_step_the_call_never_reaches_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from streamjoin.assignment import document

    steps = [*assignor_limits.STEPS, ("not called", document, "render_assignment")]
    monkeypatch.setattr(assignor_limits, "STEPS", steps)
    with pytest.raises(RuntimeError, match="never called"):
        assignor_limits.measure(assignor_limits.build_document("a-join", "fresh"), runs=1)
    assert document.render_assignment.__name__ == "render_assignment"
    assert not hasattr(document.render_assignment, "__wrapped__")
