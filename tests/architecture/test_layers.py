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
    "_histogram": 0,
    "_supervise": 0,
    "_progress": 0,
    "_stacks": 0,
    "assignment": 1,
    "join": 1,
    "restore": 1,
    "lifecycle": 1,
    "membership": 2,
    "faust": 3,
    "dev": 3,
    "worker": 4,
    "ads": 5,
    "cli": 6,
    "__main__": 7,
}
PURE = ("assignment", "membership", "join", "restore", "lifecycle")
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
    _assert_no_cycle(edges)


def _assert_no_cycle(edges: dict[str, set[str]]) -> None:
    """Fail naming the first import cycle of *edges* (node -> the nodes it imports)."""
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                raise AssertionError(f"import cycle: {' -> '.join([*trail, node, nxt])}")
            if nxt not in state:
                visit(nxt, [*trail, node])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [])


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


# -- inside the adapters: rooms, module cycles, the one seam -----------------------

#: room of streamjoin/faust -> its level (a room imports its own level's room and below;
#: two rooms on one level do not import each other); modules at faust/ itself are the top
FAUST_ROOMS = {"kafka": 0, "assignment": 1, "restore": 1, "join": 2, "metrics": 3}
FAUST_TOP = 4

#: every private attribute of faust or aiokafka (and of mode) the package relies
#: on -> the one module of faust/kafka/ that may touch it (pinned versions: the
#: seam's __init__); each module's docstring names the ones it owns
SEAM = {
    # faust App
    "_consumer": "session.py",
    "_fetcher": "consumer.py",
    "_span_add_default_tags": "app.py",
    # faust Consumer and its aiokafka thread
    "_thread": "session.py",
    "_getmany": "fetch_chain.py",
    "_get_active_partitions": "consumer.py",
    "_buffered_partitions": "consumer.py",
    "_read_offset": "consumer.py",
    "_committed_offset": "consumer.py",
    "_acked": "consumer.py",
    "_acked_index": "consumer.py",
    "_n_acked": "consumer.py",
    "_waiting_for_ack": "consumer.py",
    "_topic_name_index": "consumer.py",
    "_fetch_max_wait_ms": "consumer.py",
    "_pending_tasks": "consumer.py",
    "_fetch_task": "consumer.py",
    "_streamjoin_mended_close": "consumer.py",
    # aiokafka group coordinator (and streamjoin's mark on it)
    "_coordinator": "session.py",
    "_send_req": "session.py",
    "_group_protocols": "session.py",
    "_streamjoin_lease": "session.py",
    # aiokafka's rebalance steps, replaced for cooperative rebalancing
    "_assignors": "cooperative.py",
    "_subscription": "cooperative.py",
    "_group_subscription": "cooperative.py",
    "_on_join_prepare": "cooperative.py",
    "_on_join_complete": "cooperative.py",
    "_lookup_assignor": "cooperative.py",
    "_stop_commit_offsets_refresh_task": "cooperative.py",
    "_tp_state": "cooperative.py",
    "_assignment": "cooperative.py",
    "_streamjoin_cooperation": "cooperative.py",
    # faust's rebalance steps, taken only for what a cooperative rebalance changes
    "_active_partitions": "incremental.py",
    "_paused_partitions": "incremental.py",
    "_gap": "incremental.py",
    "_unacked_messages": "incremental.py",
    "_set_active_tps": "incremental.py",
    "_update_assignment": "incremental.py",
    "_producer_flush": "incremental.py",
    "_queues": "incremental.py",
    "_queue": "incremental.py",
    # aiokafka cluster metadata: each partition's replicas
    "_partitions": "metadata.py",
    # faust's consumer thread's factory of the aiokafka consumer, and its rack
    "_create_worker_consumer": "transport.py",
    "_client_rack": "transport.py",
    # aiokafka producer and client
    "_ensure_producer": "producer.py",
    "_partition": "producer.py",
    "_wait_on_metadata": "producer.py",
    # faust's app settings as stored (read without counting as a use)
    "_broker": "settings.py",
    "_web_port": "settings.py",
    # faust tables and their RocksDB stores
    "_changelogs": "app.py",
    "_changelog_topic_name": "app.py",
    "_db_for_partition": "stores.py",
    "_dbs": "stores.py",
    "_key_index": "stores.py",
}
#: private names of other libraries, allowed where they are used (not faust's or aiokafka's)
OTHER_PRIVATE = {
    "_exit": ("dev/broker.py", "faust/join/fault_points.py"),  # os._exit: public, documented
    "_gateway": ("ads/spark/session.py",),  # pyspark's py4j gateway: stopping the JVM
    "_jvm": ("ads/spark/session.py", "ads/spark/archive.py"),
    "_jsc": ("ads/spark/archive.py",),
}


def _room(rel: str) -> str | None:
    """``faust/join/operator.py`` -> ``join``; ``faust/app.py`` -> ``""`` (the top)."""
    parts = rel.split("/")
    if parts[0] != "faust":
        return None
    return parts[1] if len(parts) > 2 else ""


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _module_edges() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (type-checking and lazy imports too;
    ``from package import module`` counts as importing the module)."""
    modules = {_module_name(p): p for p in _modules()}
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module]
                targets += [f"{node.module}.{alias.name}" for alias in node.names]
            found.update(t for t in targets if t in modules and t != name)
        edges[name] = found
    return edges


def test_no_module_imports_itself_through_others_type_checking_imports_included() -> None:
    _assert_no_cycle(_module_edges())


def test_the_adapters_rooms_import_downwards_only() -> None:
    wrong = []
    for path in _modules():
        rel = _rel(path)
        room = _room(rel)
        if room is None:
            continue
        level = FAUST_ROOMS.get(room, FAUST_TOP)
        for name in _imports(path):
            if not name.startswith("streamjoin.faust."):
                continue
            target_rel = name.removeprefix("streamjoin.").replace(".", "/")
            target = _room(target_rel + ("/x" if (PACKAGE / target_rel).is_dir() else ".py"))
            if target in (None, room):
                continue
            target_level = FAUST_ROOMS.get(target, FAUST_TOP)
            if target_level >= level:
                wrong.append(f"{rel} ({room or 'top'}) imports {name} ({target or 'top'})")
    assert wrong == []


def _private_uses(path: Path) -> list[tuple[str, str]]:
    """(name, how) of every private attribute *path* reads or sets on something
    other than ``self``/``cls``, or by name through getattr/setattr/hasattr."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            if node.attr.startswith("__"):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            found.append((node.attr, ast.unparse(node)))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and node.args[1].value.startswith("_")
            and not node.args[1].value.startswith("__")
        ):
            found.append((node.args[1].value, ast.unparse(node)))
    return found


def _own_private_names() -> set[str]:
    """Private names the package defines itself: functions, methods, and
    attributes it sets on ``self`` or declares in a class body."""
    own = set()
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                own.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id == "self":
                    own.add(node.attr)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                own.add(node.target.id)
    return {name for name in own if name.startswith("_")}


def test_private_attributes_of_faust_and_aiokafka_are_touched_only_in_the_seam() -> None:
    own = _own_private_names() - set(SEAM)
    wrong = []
    for path in _modules():
        rel = _rel(path)
        for name, how in _private_uses(path):
            if name in own:
                continue
            if name in SEAM:
                if rel != f"faust/kafka/{SEAM[name]}":
                    wrong.append(f"{rel}: {how} (only faust/kafka/{SEAM[name]} may)")
            elif rel not in OTHER_PRIVATE.get(name, ()):
                wrong.append(f"{rel}: {how} (a private name no seam module owns)")
    assert wrong == []


def test_self_reads_no_private_attribute_the_package_does_not_define() -> None:
    """A subclass of a faust class reading faust's private attributes through ``self``."""
    own = _own_private_names()
    wrong = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and node.attr not in own
            ):
                wrong.append(f"{_rel(path)}: self.{node.attr}")
    assert wrong == []


@pytest.mark.parametrize("module", sorted(set(SEAM.values())))
def test_each_seam_module_names_the_private_attributes_it_owns(module: str) -> None:
    doc = ast.get_docstring(ast.parse((PACKAGE / "faust" / "kafka" / module).read_text())) or ""
    missing = sorted(name for name, owner in SEAM.items() if owner == module and name not in doc)
    assert missing == []


def test_the_seams_index_names_every_seam_module() -> None:
    """``faust/kafka/__init__.py`` is where an upgrade of faust or aiokafka starts:
    every module of the seam is on its list, and every module the check above
    assigns a private attribute to is in the seam."""
    seam = PACKAGE / "faust" / "kafka"
    index = ast.get_docstring(ast.parse((seam / "__init__.py").read_text())) or ""
    modules = sorted(p.stem for p in seam.glob("*.py") if p.stem != "__init__")
    missing = [m for m in modules if f":mod:`~streamjoin.faust.kafka.{m}`" not in index]
    assert missing == []
    assert sorted({owner.removesuffix(".py") for owner in SEAM.values()} - set(modules)) == []
