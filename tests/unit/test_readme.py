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


# -- "Deployment and operations" ---------------------------------------------------------

ROOT = README.parent


def _deployment_section() -> str:
    text = README.read_text()
    start = text.index("Deployment and operations\n=========================\n")
    return text[start : text.index("The JSON formats\n================\n")]


def _all_streamjoin_options() -> set[str]:
    """Every flag of every ``streamjoin`` (sub)command, walking click's command tree."""
    import click

    from streamjoin.cli import main

    found: set[str] = set()
    stack: list[click.Command] = [main]
    while stack:
        command = stack.pop()
        for param in command.params:
            found.update(o for o in [*param.opts, *param.secondary_opts] if o.startswith("-"))
        if isinstance(command, click.Group):
            stack.extend(command.commands.values())
    return found


def _generator_options() -> set[str]:
    import sys

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from streamjoin.ads.generator import _parser

    return {o for action in _parser()._actions for o in action.option_strings}


def test_every_flag_in_the_deployment_section_exists() -> None:
    literals = re.findall(r"``(.+?)``", _deployment_section(), re.S)
    flags = {f for lit in literals for f in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", lit)}
    assert "--security-protocol" in flags
    known = _all_streamjoin_options() | _generator_options()
    unknown = sorted(flags - known)
    assert not unknown, f"README's deployment section names flags no command has: {unknown}"


#: variables of work in progress: name -> the module that will read it
_PENDING = {"ADS_ARCHIVE_DIR": "streamjoin.ads.archive"}


def test_every_variable_in_the_deployment_section_is_read_by_the_code() -> None:
    import importlib.util

    sources = [*(ROOT / "streamjoin").rglob("*.py"), *(ROOT / "examples").rglob("*.py")]
    code = "\n".join(p.read_text() for p in sources)
    names = set(re.findall(r"\b((?:STREAMJOIN|ADS)_[A-Z0-9_]*[A-Z0-9])\b", _deployment_section()))
    assert "STREAMJOIN_SASL_PASSWORD" in names
    for name in sorted(names):
        if name in _PENDING and importlib.util.find_spec(_PENDING[name]) is None:
            continue
        assert f'"{name}"' in code, f"README names {name} but no code reads it"


def _reference_rows() -> list[list[str]]:
    section = _deployment_section()
    start = section.index("Worker configuration\n--------------------\n")
    rules = [m.start() for m in re.finditer(r"^=+ =+ =+ =+$", section[start:], re.M)]
    body = section[start + rules[1] : start + rules[2]].splitlines()[1:]
    widths = [len(w) for w in section[start + rules[0] :].splitlines()[0].split(" ")]
    rows = []
    for line in body:
        cells, pos = [], 0
        for i, width in enumerate(widths):
            end = None if i == len(widths) - 1 else pos + width
            cells.append(line[pos:end].strip())
            pos += width + 1
        rows.append(cells)
    return rows


def test_reference_table_lists_every_worker_option_with_its_variable_and_default() -> None:
    from streamjoin.cli import main
    from streamjoin.worker.options import SASL_PASSWORD_ENV, SSL_KEY_PASSWORD_ENV

    worker = main.commands["worker"]
    rows = _reference_rows()
    by_flag: dict[str, list[str]] = {}
    env_only = set()
    for flag_cell, env_cell, default, meaning in rows:
        assert meaning, flag_cell
        variable = env_cell.strip("`")
        if flag_cell == "no flag":
            env_only.add(variable)
            continue
        flags = re.findall(r"--[a-z][a-z-]*", flag_cell)
        by_flag[flags[0]] = [variable, default, flag_cell]
    assert env_only == {SASL_PASSWORD_ENV, SSL_KEY_PASSWORD_ENV}
    options = [p for p in worker.params if p.name != "help"]
    for param in options:
        long_flags = [o for o in [*param.opts, *param.secondary_opts] if o.startswith("--")]
        row = by_flag.get(long_flags[0])
        assert row is not None, f"the reference table has no row for {long_flags[0]}"
        variable, default, flag_cell = row
        assert variable == param.envvar, f"{long_flags[0]}: {variable} != {param.envvar}"
        for flag in [*param.opts, *param.secondary_opts]:
            assert flag in flag_cell, f"the row of {long_flags[0]} does not name {flag}"
        if param.required:
            assert default == "required", long_flags[0]
        elif isinstance(param.default, (str, int, float)) and not isinstance(param.default, bool):
            shown = default.strip("`")
            if isinstance(param.default, float):
                assert float(shown) == param.default, long_flags[0]
            else:
                assert shown == str(param.default), long_flags[0]
    assert len(by_flag) == len(options)


def test_deployment_section_names_real_files_and_services() -> None:
    import yaml

    section = _deployment_section()
    for path in (
        "docker/compose.yaml",
        "docker/Dockerfile",
        "docker/create-topics.sh",
        ".dockerignore",
    ):
        assert path in section and (ROOT / path).exists(), path
    services = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["services"]
    named = set(re.findall(r"``((?:kafka|worker)-\d|topics|generator|report)``", section))
    assert named >= {"kafka-1", "worker-3", "topics", "generator", "report"}
    assert named <= set(services)
