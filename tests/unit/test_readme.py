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


def test_every_worker_flag_in_the_readme_exists() -> None:
    from click.testing import CliRunner

    from streamjoin.cli import main

    help_text = CliRunner().invoke(main, ["worker", "--help"]).output
    text = README.read_text()
    section = text[
        text.index("``streamjoin worker -A MODULE:APP [options]``") : text.index(
            "``streamjoin topics check"
        )
    ]
    flags = set(re.findall(r"``(--?[a-z][a-z-]*)", section)) | set(
        re.findall(r"/(--[a-z-]+)", section)
    )
    assert flags, "no flags found in README's worker section"
    for flag in sorted(flags):
        assert flag in help_text, f"README names {flag} but `streamjoin worker` has no such option"


def test_every_environment_variable_in_the_readme_is_read_by_the_code() -> None:
    package = Path(__file__).resolve().parents[2] / "streamjoin"
    code = "\n".join(p.read_text() for p in package.rglob("*.py"))
    for name in sorted(set(re.findall(r"STREAMJOIN_[A-Z_]+", README.read_text()))):
        assert f'"{name}"' in code, f"README names {name} but no code reads it"
