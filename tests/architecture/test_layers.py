"""The package's layering, checked on the source: arrows point down, no cycles,
faust/aiokafka/rocksdict only in the adapters, modules small enough to read."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "streamjoin"

#: top-level part of the package -> layer (a part may import its own layer and below)
LAYERS = {
    "__init__": 0,
    "errors": 0,
    "_lazy": 0,
    "_gc": 0,
    "assignment": 1,
    "join": 1,
    "restore": 1,
    "membership": 2,
    "faust": 3,
    "dev": 3,
    "worker": 4,
    "ads": 5,
    "cli": 6,
    "__main__": 7,
}
PURE = ("assignment", "membership", "join", "restore")
#: third-party clients only the adapters (and the ad vertical's Kafka entry points) import
ADAPTER_ONLY = ("faust", "aiokafka", "rocksdict", "mode")
ADAPTER_ALLOWED = (
    "faust/",
    "ads/generator/producer.py",
    "ads/generator/cli.py",
    "ads/demo/",
)
#: modules may exceed this only when their docstring says why ("long because")
MAX_LINES = 420


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _part(module: str) -> str:
    """``streamjoin.faust.app`` -> ``faust``; ``streamjoin`` -> ``__init__``."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "__init__"


def _source_part(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py") if rel.parts else "__init__"


def _imports(path: Path) -> list[str]:
    """Every absolute module name *path* imports, at any depth (lazy imports too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
    return found


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def test_every_part_of_the_package_has_a_layer() -> None:
    parts = {_source_part(p) for p in _modules()}
    assert parts <= set(LAYERS), sorted(parts - set(LAYERS))


def test_no_import_points_up_a_layer() -> None:
    wrong = []
    for path in _modules():
        source = _source_part(path)
        for name in _imports(path):
            if name == "streamjoin" or name.startswith("streamjoin."):
                target = _part(name)
                if LAYERS[target] > LAYERS[source]:
                    wrong.append(f"{_rel(path)} imports {name}")
    assert wrong == []


def test_the_parts_import_each_other_without_cycles() -> None:
    edges: dict[str, set[str]] = {part: set() for part in LAYERS}
    for path in _modules():
        source = _source_part(path)
        for name in _imports(path):
            if name.startswith("streamjoin."):
                target = _part(name)
                if target != source:
                    edges[source].add(target)
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                raise AssertionError(f"import cycle: {' -> '.join([*trail, node, nxt])}")
            if nxt not in state:
                visit(nxt, [*trail, node])
        state[node] = 2

    for part in sorted(edges):
        if part not in state:
            visit(part, [])


@pytest.mark.parametrize("client", ADAPTER_ONLY)
def test_kafka_and_state_clients_are_imported_only_by_the_adapters(client: str) -> None:
    wrong = [
        f"{_rel(path)} imports {name}"
        for path in _modules()
        if not _rel(path).startswith(ADAPTER_ALLOWED)
        for name in _imports(path)
        if name == client or name.startswith(client + ".")
    ]
    assert wrong == []


def test_the_pure_layers_import_no_event_loop_and_no_io_client() -> None:
    wrong = [
        f"{_rel(path)} imports {name}"
        for path in _modules()
        if _source_part(path) in PURE
        for name in _imports(path)
        if name.split(".")[0] in ("asyncio", "socket", "subprocess", *ADAPTER_ONLY)
    ]
    assert wrong == []


def test_modules_stay_readable_or_say_why_not() -> None:
    long = []
    for path in _modules():
        lines = path.read_text().count("\n")
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if lines > MAX_LINES and "long because" not in doc:
            long.append(f"{_rel(path)}: {lines} lines")
    assert long == []


def test_the_package_names_nothing_under_examples() -> None:
    wrong = [
        _rel(path)
        for path in _modules()
        if "examples.ad_monetization" in path.read_text()
        or any(n.startswith("examples") for n in _imports(path))
    ]
    assert wrong == []
