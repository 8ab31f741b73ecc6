"""README.rst is a short front page whose commands, links and paths all work."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from doctext import (
    DOCS,
    README,
    ROOT,
    headings,
    links,
    literal_blocks,
    literal_text,
    pages,
    section,
)

STREAMJOIN = Path(sys.executable).parent / "streamjoin"  # the venv's entry point

#: directories the README names that `make demo` / `make test` create
_GENERATED = ("demo-out/", ".venv/")


def _text() -> str:
    return README.read_text()


def test_readme_is_a_front_page_with_the_two_setup_commands_near_the_top() -> None:
    text = _text()
    assert len(text.splitlines()) <= 400
    setup = literal_blocks(text)[0]  # the first literal block of the page
    first_section = headings(text)[1].line  # [0] is the title
    top = "\n".join(text.splitlines()[:first_section])
    assert "Python 3.11 and Java 17" in top
    commands = [line.split("#")[0].strip() for line in setup.splitlines()]
    assert commands == ["make demo", "make test"]
    assert setup.splitlines()[0] in top
    makefile = (ROOT / "Makefile").read_text()
    for target in ("demo", "test"):
        assert re.search(rf"^{target}:", makefile, re.M), f"the Makefile has no {target} target"


def test_every_link_and_path_the_readme_names_exists() -> None:
    text = _text()
    targets = [t for _, t in links(text) if "://" not in t]
    assert "docs/index.rst" in targets
    for target in targets:
        assert (ROOT / target.split("#")[0]).exists(), f"README links to missing {target}"
    paths = set()
    for chunk in literal_text(text):
        for word in re.split(r"[\s`'\"(),;]+", chunk):
            if "/" in word and "://" not in word and not word.startswith(("/", "-")):
                paths.add(word.rstrip(".:"))
    assert {"docs/examples/group.json", "demo-out/report/index.html"} <= paths
    missing = sorted(
        p
        for p in paths
        if not p.startswith(_GENERATED) and "|" not in p and not (ROOT / p).exists()
    )
    assert not missing, f"README names paths that do not exist: {missing}"


def test_readme_links_every_docs_page() -> None:
    linked = {(ROOT / t.split("#")[0]).resolve() for _, t in links(_text()) if "://" not in t}
    unlinked = sorted(p.name for p in pages() if p.resolve() not in linked)
    assert not unlinked, f"README.rst does not link {unlinked}"
    assert (DOCS / "index.rst").resolve() in linked


def _quick_start_lines() -> list[str]:
    quick = section(_text(), "Quick start")
    return [
        line.split("  #")[0].strip()
        for block in literal_blocks(quick)
        for line in block.splitlines()
        if line.startswith(".venv/bin/")
    ]


def test_quick_start_assign_command_runs_as_written() -> None:
    (line,) = [line for line in _quick_start_lines() if " assign " in line]
    argv = shlex.split(line)
    assert argv[0] == ".venv/bin/streamjoin"
    state_path = next(a for a in argv if a.endswith(".json"))
    done = subprocess.run(
        [str(STREAMJOIN), *argv[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert set(out) == {"assignment", "generation", "stats"}
    state = json.loads((ROOT / state_path).read_text())
    members = {m["id"] for m in state["members"]}
    assert set(out["assignment"]) == members
    # every task assigned: every partition of every topic has exactly one active owner
    for topic, count in state["topics"].items():
        partitions = sorted(
            p for owned in out["assignment"].values() for p in owned["actives"].get(topic, [])
        )
        assert partitions == list(range(count)), topic
    assert out["stats"]["tasks"] == max(state["topics"].values())
    # one standby per stateful task, never with its active
    for member, owned in out["assignment"].items():
        for topic, parts in owned["standbys"].items():
            assert not set(parts) & set(owned["actives"].get(topic, [])), member
    assert out["stats"]["standbys"] == out["stats"]["stateful_tasks"] > 0
    assert done.stderr.startswith("generation ")
    assert "moves (" in done.stderr


def test_the_sample_group_state_is_what_the_readme_says() -> None:
    state = json.loads((ROOT / "docs/examples/group.json").read_text())
    assert len(state["members"]) == 3
    assert len({m["rack"] for m in state["members"]}) == 2
    (group,) = state["copartition"]
    assert {"impressions", "clicks"} <= set(group)
    assert state["changelogs"] and set(state["changelogs"]) <= set(group)
    assert state["standby_replicas"] >= 1


@pytest.mark.parametrize("line", _quick_start_lines(), ids=lambda line: line.split()[1])
def test_every_quick_start_command_parses(line: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each command line of the quick start is accepted by its program (nothing runs)."""
    import click

    from streamjoin.cli import main

    argv = shlex.split(line)
    if argv[0] == ".venv/bin/python":
        assert argv[1:3] == ["-m", "streamjoin.ads.generator"]
        from streamjoin.ads.generator import _parser

        _parser().parse_args(argv[3:])
        return
    assert argv[0] == ".venv/bin/streamjoin"
    command: click.Command = main
    args = argv[1:]
    while isinstance(command, click.Group):
        command, args = command.commands[args[0]], args[1:]
    monkeypatch.chdir(ROOT)  # paths in the quick start are relative to the repository root
    with command.make_context(command.name, list(args)):
        pass


def test_the_readme_join_snippet_builds_a_join() -> None:
    quick = section(_text(), "Quick start")
    (snippet,) = [b for b in literal_blocks(quick) if "app.join(" in b]
    namespace: dict[str, object] = {"__name__": "readme_snippet"}
    exec(compile(snippet, "README.rst", "exec"), namespace)
    app = namespace["app"]
    assert set(app.joins) == {"billing"}  # type: ignore[attr-defined]
    assert set(namespace["billing"].outputs) == {  # type: ignore[attr-defined]
        "attributed",
        "duplicate",
        "unattributed",
    }
