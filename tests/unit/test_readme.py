"""README.rst documents the JSON formats: its examples must stay true to the code."""

from __future__ import annotations

import json
import re
from pathlib import Path

from streamjoin.assignment import assign_document

README = Path(__file__).resolve().parents[2] / "README.rst"


def _json_blocks() -> list[dict[str, object]]:
    text = README.read_text()
    blocks = re.findall(r"\.\. code-block:: json\n\n((?:    .*\n|\n)+)", text)
    return [json.loads(block) for block in blocks]


def test_readme_group_state_example_assigns_and_output_keys_match() -> None:
    state, output = _json_blocks()[:2]
    result = assign_document(state)
    assert set(result) == set(output)
    assert set(result["stats"]) == set(output["stats"])  # type: ignore[arg-type]
    owned = result["assignment"]["worker-1"]
    assert set(owned) == {"actives", "standbys"}
    # worker-1 claims 0 and 1 with a generation and is the only member: it keeps them
    assert {0, 1} <= set(owned["actives"]["impressions"])
    assert result["generation"] == 8


def test_readme_documents_every_stats_field() -> None:
    text = README.read_text()
    state = _json_blocks()[0]
    for key in assign_document(state)["stats"]:
        assert key in text, f"stats field {key!r} is not documented in README.rst"
