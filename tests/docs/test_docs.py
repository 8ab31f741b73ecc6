"""The docs/ pages stay true to the code: structure, links, names, flags, variables, formats."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from doctext import (
    DOCS,
    EXAMPLE_README,
    README,
    ROOT,
    all_texts,
    headings,
    inline_literals,
    json_blocks,
    links,
    literal_blocks,
    literal_text,
    markdown_links,
    markdown_slug,
    named_references,
    pages,
    section,
    simple_table,
    slug,
    strip_json_blocks,
)

PAGE_NAMES = {
    "index",
    "concepts",
    "assignment",
    "joins",
    "restoration",
    "operations",
    "spark",
    "benchmarks",
}


def _page(name: str) -> str:
    return (DOCS / f"{name}.rst").read_text()


# -- structure and links ----------------------------------------------------------------


def _toctree(text: str) -> list[str]:
    match = re.search(r"^\.\. toctree::\n((?:   .*\n|\n)+)", text, re.M)
    assert match, "docs/index.rst has no toctree"
    return [
        line.strip()
        for line in match.group(1).splitlines()
        if line.strip() and not line.strip().startswith(":")
    ]


def _linked_pages(page: Path) -> set[Path]:
    found = set()
    for _, target in links(page.read_text()):
        path = target.split("#")[0]
        if path.endswith(".rst") and "://" not in path:
            found.add((page.parent / path).resolve())
    return found


def test_the_docs_are_the_pages_the_brief_promises() -> None:
    assert {p.stem for p in pages()} == PAGE_NAMES


def test_every_docs_page_is_reachable_from_the_index() -> None:
    index = DOCS / "index.rst"
    toctree = _toctree(index.read_text())
    assert len(toctree) == len(set(toctree))
    for entry in toctree:
        assert (DOCS / f"{entry}.rst").exists(), f"toctree names {entry} but there is no page"
    # the toctree (Sphinx) and the link list (GitHub) name the same pages
    linked = {p.stem for p in _linked_pages(index) if p.parent == DOCS}
    assert set(toctree) == linked - {"index"}
    reached, todo = {index.resolve()}, [index.resolve()]
    while todo:
        page = todo.pop()
        for target in _linked_pages(page) | {(DOCS / f"{e}.rst").resolve() for e in toctree}:
            if target.parent == DOCS.resolve() and target not in reached:
                reached.add(target)
                todo.append(target)
    unreached = sorted(p.name for p in pages() if p.resolve() not in reached)
    assert not unreached, f"not reachable from docs/index.rst: {unreached}"


@pytest.mark.parametrize("path", [README, *pages()], ids=lambda p: p.name)
def test_every_link_and_reference_resolves(path: Path) -> None:
    text = path.read_text()
    titles = {" ".join(h.title.split()).lower() for h in headings(text)}
    targets = {t.lower() for t in re.findall(r"^\.\. _([^:]+):", text, re.M)}
    for name in named_references(text):
        assert name.lower() in titles | targets, f"{path.name}: `{name}`_ names no section"
    for label, target in links(text):
        if "://" in target:
            continue
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve()
        assert resolved.exists(), f"{path.name}: `{label}` links to missing {target}"
        assert resolved.is_relative_to(ROOT), target
        if anchor:
            ids = {slug(h.title) for h in headings(resolved.read_text())}
            assert anchor in ids, f"{path.name}: {target}: no section with id {anchor!r}"


def test_every_link_in_the_example_readme_resolves() -> None:
    text = EXAMPLE_README.read_text()
    own = {markdown_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}
    targets = markdown_links(text)
    assert targets
    for target in targets:
        file, _, anchor = target.partition("#")
        if not file:
            assert anchor in own, f"README.md links to missing #{anchor}"
            continue
        resolved = (EXAMPLE_README.parent / file).resolve()
        assert resolved.exists(), target
        if anchor and resolved.suffix == ".rst":
            assert anchor in {slug(h.title) for h in headings(resolved.read_text())}, target


_PATH = re.compile(
    r"(?<![\w/.<-])((?:streamjoin|docs|examples|docker|benchmarks|tests)/[\w./+=-]*)"
)


def test_every_repository_path_named_in_the_docs_exists() -> None:
    named: dict[str, Path] = {}
    for path, text in all_texts().items():
        for token in _PATH.findall(text):
            named.setdefault(token.rstrip(".,"), path)
    assert "docs/examples/group.json" in named
    missing = sorted(f"{t} ({p.name})" for t, p in named.items() if not (ROOT / t).exists())
    assert not missing, f"paths named in the docs that do not exist: {missing}"


def test_the_package_layout_lists_every_subpackage() -> None:
    layout = section(_page("concepts"), "Package layout")
    tree = next(b for b in literal_blocks(layout) if b.startswith("streamjoin/"))
    listed_dirs = set(re.findall(r"^  (\w+)/\s", tree, re.M))
    listed_modules = set(re.findall(r"^  (\w+\.py)\s", tree, re.M))
    package = ROOT / "streamjoin"
    on_disk = {p.parent.name for p in package.glob("*/__init__.py")}
    assert listed_dirs == on_disk, (listed_dirs ^ on_disk, "describe every subpackage, once")
    assert listed_modules and all((package / m).exists() for m in listed_modules)
    assert "examples/ad_monetization/" in tree
    rooms = set(re.findall(r"^    (\w+)/\s", tree, re.M))
    on_disk = {p.parent.name for p in (package / "faust").glob("*/__init__.py")}
    assert rooms == on_disk, (rooms ^ on_disk, "describe every room of faust/, once")


# -- names: modules, commands, make targets ---------------------------------------------

_DOTTED = re.compile(r"(?<![\w.-])((?:streamjoin|examples)(?:\.[A-Za-z_]\w*)+)(?![\w-])")
_SPEC = re.compile(r"(?<![\w.-])(streamjoin(?:\.[a-z_]\w*)*):([A-Za-z_]\w*)")


def _resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def test_every_module_and_object_named_in_the_docs_exists(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # the apps named as module:attr are built from the environment on access
    for name in ("ADS_ARCHIVE_DIR", "ARCHIVE_TOPIC_PREFIX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ARCHIVE_DIR", str(tmp_path / "archive"))
    monkeypatch.syspath_prepend(str(ROOT))  # examples.* as the worker imports them
    dotted, specs = set(), set()
    for text in all_texts().values():
        dotted.update(_DOTTED.findall(text))
        specs.update(_SPEC.findall(text))
    assert "streamjoin.ads.app" in dotted
    assert ("streamjoin.ads.app", "policy_from_env") in specs
    for name in sorted(dotted):
        try:
            _resolve(name)
        except (ImportError, AttributeError) as exc:
            pytest.fail(f"the docs name {name}, which does not exist: {exc}")
    for module, attr in sorted(specs):
        assert hasattr(importlib.import_module(module), attr), f"{module}:{attr}"


def _commands() -> dict[str, set[str]]:
    import click

    from streamjoin.cli import main

    found: dict[str, set[str]] = {}
    for name, command in main.commands.items():
        found[name] = set(command.commands) if isinstance(command, click.Group) else set()
    return found


def test_every_streamjoin_command_named_in_the_docs_exists() -> None:
    commands = _commands()
    seen = set()
    for path, text in all_texts().items():
        for literal in literal_text(text) if path.suffix == ".rst" else [text]:
            chunk = " ".join(literal.split())
            for sub, rest in re.findall(
                r"(?<![\w.-])streamjoin ([a-z][a-z-]*)((?: [a-z][a-z|-]*)?)", chunk
            ):
                assert sub in commands, f"{path.name} names `streamjoin {sub}`: no such command"
                seen.add(sub)
                if commands[sub]:
                    names = rest.strip().split("|")
                    assert set(names) <= commands[sub], f"{path.name}: streamjoin {sub}{rest}"
    assert seen == set(commands), f"commands the docs never mention: {set(commands) - seen}"


def test_every_make_target_named_in_the_docs_exists() -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, re.M))
    named = set()
    for path, text in all_texts().items():
        if path.suffix == ".rst":
            for chunk in literal_text(text):
                named.update(re.findall(r"(?<![\w-])make ([a-z][a-z-]*)", chunk))
    assert {"demo", "test", "bench", "bench-restore", "bench-join"} <= named
    assert named <= targets, named - targets


# -- flags and variables --------------------------------------------------------------


def _all_streamjoin_options() -> set[str]:
    """Every flag of every ``streamjoin`` (sub)command, walking click's command tree."""
    import click

    from streamjoin.cli import main

    found: set[str] = set()
    stack: list[click.Command] = [main]
    while stack:
        command = stack.pop()
        for param in command.get_params(click.Context(command)):  # --help included
            found.update(o for o in [*param.opts, *param.secondary_opts] if o.startswith("-"))
        if isinstance(command, click.Group):
            stack.extend(command.commands.values())
    return found


def _generator_options() -> set[str]:
    from streamjoin.ads.generator import _parser

    return {o for action in _parser()._actions for o in action.option_strings}


#: flags of other programs the pages name, and whose they are
_FOREIGN_FLAGS = {"--master": "spark-submit"}


def _flags(text: str) -> set[str]:
    return {
        f for lit in inline_literals(text) for f in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", lit)
    }


@pytest.mark.parametrize("path", [README, *pages()], ids=lambda p: p.name)
def test_every_flag_in_the_docs_exists(path: Path) -> None:
    flags = _flags(path.read_text())
    if path.name == "benchmarks.rst":
        code = "\n".join(p.read_text() for p in (ROOT / "benchmarks").rglob("*.py"))
        known = _all_streamjoin_options()  # the page also runs the demo
        unknown = sorted(f for f in flags if f'"{f}"' not in code and f not in known)
    else:
        known = _all_streamjoin_options() | _generator_options() | set(_FOREIGN_FLAGS)
        unknown = sorted(flags - known)
    assert not unknown, f"{path.name} names flags no command has: {unknown}"


def test_every_flag_in_the_worker_section_is_a_worker_option() -> None:
    from click.testing import CliRunner

    from streamjoin.cli import main

    help_text = CliRunner().invoke(main, ["worker", "--help"]).output
    text = section(_page("operations"), "The worker command")
    flags = set(re.findall(r"``(--?[a-z][a-z-]*)", text)) | set(re.findall(r"/(--[a-z-]+)", text))
    assert {"-b", "--web-bind", "--broker-timeout", "--security-protocol"} <= flags
    for flag in sorted(flags):
        assert flag in help_text, f"docs name {flag} but `streamjoin worker` has no such option"


_VARIABLE = re.compile(r"\b((?:STREAMJOIN|ADS|ARCHIVE)_[A-Z0-9_]*[A-Z0-9])\b")


def test_every_environment_variable_in_the_docs_is_read_by_the_code() -> None:
    sources = [*(ROOT / "streamjoin").rglob("*.py"), *(ROOT / "examples").rglob("*.py")]
    code = "\n".join(p.read_text() for p in sources)
    names = set()
    for text in all_texts().values():
        names.update(_VARIABLE.findall(text))
    assert {"STREAMJOIN_SASL_PASSWORD", "ADS_ARCHIVE_DIR", "ARCHIVE_DIR"} <= names
    for name in sorted(names):
        assert f'"{name}"' in code, f"the docs name {name} but no code reads it"


def test_reference_table_lists_every_worker_option_with_its_variable_and_default() -> None:
    from streamjoin.cli import main
    from streamjoin.membership.settings import ENV_NAMES
    from streamjoin.worker.options import SASL_PASSWORD_ENV, SSL_KEY_PASSWORD_ENV

    worker = main.commands["worker"]
    rows = simple_table(
        section(_page("operations"), "Worker configuration"),
        "flag environment variable default meaning",
    )
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
    # the secrets, and the rejoin pace (for brokers with late SyncGroup answers)
    assert env_only == {SASL_PASSWORD_ENV, SSL_KEY_PASSWORD_ENV, ENV_NAMES["rejoin_pace_ms"]}
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


def test_the_ad_app_settings_table_matches_ads_settings() -> None:
    from streamjoin.ads.app import AdsSettings

    text = section(_page("operations"), "The ad-monetization app")
    rows = {
        r[0].strip("`"): r[1].strip("`") for r in simple_table(text, "variable default meaning")
    }
    every = AdsSettings(archive_dir="/a").to_env()
    assert set(rows) == set(every), set(rows) ^ set(every)
    defaults = AdsSettings().to_env()
    for name, shown in rows.items():
        wanted = defaults.get(name, "")
        if shown in ("empty", "none"):
            assert wanted == "", name
        else:
            assert shown == wanted, f"{name}: the docs say {shown}, AdsSettings {wanted!r}"
        # and the default is what from_env gives when the variable is unset
    assert AdsSettings.from_env({}) == AdsSettings()


def test_deployment_section_names_real_files_and_services() -> None:
    import yaml

    text = section(_page("operations"), "The production-like stack: ``docker compose``")
    for path in (
        "docker/compose.yaml",
        "docker/Dockerfile",
        "docker/create-topics.sh",
        ".dockerignore",
    ):
        assert path in text and (ROOT / path).exists(), path
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    services = compose["services"]
    named = set(re.findall(r"``((?:kafka|worker)-\d|topics|generator|report)``", text))
    assert named >= {"kafka-1", "worker-3", "topics", "generator", "report"}
    assert named <= set(services)
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    for default in re.findall(r"``(STREAMJOIN_[A-Z_]+=[^`]+)``", text):
        assert default in dockerfile, f"the Dockerfile does not set {default}"
    assert services["worker-1"]["environment"]["STREAMJOIN_APP"] in text


# -- formats and examples ---------------------------------------------------------------


def _assignment_json() -> list[dict[str, object]]:
    return [json.loads(block) for block in json_blocks(_page("assignment"))]


def test_group_state_example_assigns_and_output_keys_match() -> None:
    from streamjoin.assignment import assign_document

    state, output = _assignment_json()[:2]
    result = assign_document(state)
    assert set(result) == set(output)
    assert set(result["stats"]) == set(output["stats"])  # type: ignore[arg-type]
    owned = result["assignment"]["worker-1"]
    assert set(owned) == {"actives", "standbys", "warmups"}
    # worker-1 claims 0 and 1 with a generation and is the only member: it keeps them
    assert {0, 1} <= set(owned["actives"]["impressions"])
    assert result["generation"] == 8


def test_every_stats_field_is_documented() -> None:
    from streamjoin.assignment import assign_document

    prose = strip_json_blocks(_page("assignment"))
    rows = simple_table(section(prose, "The JSON formats"), "field meaning")
    documented = {r[0].strip("`") for r in rows if r[1]}
    stats = set(assign_document(_assignment_json()[0])["stats"])
    assert documented == stats, documented ^ stats


def test_group_state_fields_table_matches_the_parser() -> None:
    from streamjoin.assignment import document, document_members

    rows = simple_table(_page("assignment"), "field default meaning")
    fields = {r[0].strip("`") for r in rows}
    top = {f for f in fields if not f.startswith("members[]")}
    member = {f.removeprefix("members[].") for f in fields if f.startswith("members[]")}
    assert top | {"members"} == set(document._TOP_KEYS)
    assert member == set(document_members._MEMBER_KEYS)


def test_the_documented_explanation_is_what_assign_prints() -> None:
    text = section(_page("assignment"), "``streamjoin assign``")
    command = next(line for line in literal_text(text) if "assign --explain" in line)
    documented = next(b for b in literal_blocks(text) if b.startswith("generation"))
    done = subprocess.run(
        [str(Path(sys.executable).parent / "streamjoin"), *command.split()[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    printed = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    assert printed == [line.strip() for line in documented.splitlines()]


@pytest.mark.parametrize(
    ("path", "pattern"),
    [
        (
            DOCS / "joins.rst",
            r"Example \(``examples/ad_monetization/app.py``\)::\n\n((?:    .*\n|\n)+)",
        ),
        (EXAMPLE_README, r"(?s)`app.py` joins the two topics:\n\n```python\n(.*?)\n```"),
    ],
    ids=["joins.rst", "example README.md"],
)
def test_example_code_shown_in_the_docs_is_the_example_app(path: Path, pattern: str) -> None:
    app = {
        line.strip() for line in (ROOT / "examples/ad_monetization/app.py").read_text().splitlines()
    }
    match = re.search(pattern, path.read_text())
    assert match, f"{path.name}: the example code is gone"
    shown = [line.strip() for line in match.group(1).splitlines() if line.strip()]
    assert len(shown) >= 8
    missing = [line for line in shown if line not in app]
    assert not missing, (
        f"{path.name} shows lines examples/ad_monetization/app.py does not have: {missing}"
    )
