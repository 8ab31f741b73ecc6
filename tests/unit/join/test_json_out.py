"""dumps_sorted writes exactly what json.dumps(sort_keys=True, compact) writes."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.join.json_out import dumps_sorted

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.floats(min_value=1e-5, max_value=1e17)
    | st.text()
    | st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127))
)
_DOCS = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def _reference(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


@settings(max_examples=800)
@given(st.dictionaries(st.text(), _DOCS, max_size=6))
def test_the_same_bytes_as_json_dumps_for_any_document(doc: dict[str, Any]) -> None:
    assert dumps_sorted(doc) == _reference(doc)


def test_the_same_bytes_at_the_edges_of_the_fast_path() -> None:
    for value in [0.0, -0.0, 1e-4, 9.99e-5, 1e-5, 1e16, 9.999e15, 1e22, 2**63 - 1, 2**63, -(2**63)]:
        doc = {"v": value, "q": 'a"b\\c', "ctl": "\x01\x7f", "u": "é", "n": None}
        assert dumps_sorted(doc) == _reference(doc)
