"""The package's layering, checked on the source: arrows point down, no cycles,
faust/aiokafka/rocksdict only in the adapters, modules small enough to read."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

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
    "partitioner": 0,
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
    "_max_partition_fetch_bytes": "consumer.py",
    "_fetch_max_bytes": "consumer.py",
    "_pending_tasks": "consumer.py",
    "_fetch_task": "consumer.py",
    "_streamjoin_mended_close": "consumer.py",
    "_proc_fetch_request": "consumer.py",
    "_streamjoin_fetch_order": "consumer.py",
    # aiokafka group coordinator (and streamjoin's mark on it)
    "_coordinator": "session.py",
    "_send_req": "session.py",
    "_group_protocols": "session.py",
    "_streamjoin_lease": "session.py",
    "_streamjoin_fetch_holds": "session.py",
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
    "_partitioner": "producer.py",
    "_metadata": "producer.py",
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


class _Use(NamedTuple):
    """One reach for a private attribute: its *name* (``_x``; ``_{n}`` when built at
    run time), the source that reaches it, whose attribute it is (``self``, ``cls``
    or ``""``: anything else), and whether it sets it."""

    name: str
    how: str
    owner: str
    sets: bool


#: functions that take an object and an attribute's name: getattr(x, "_n"), ...
_BY_NAME = ("getattr", "setattr", "hasattr", "delattr", "getattr_static")
_SETTERS = ("setattr", "__setattr__", "setdefault", "__setitem__")
#: methods that reach an attribute by name past the class's own hooks:
#: object.__getattribute__(x, "_n"), x.__getattribute__("_n"), ...
_DUNDER_BY_NAME = ("__getattribute__", "__getattr__", "__setattr__", "__delattr__")
#: methods of an object's namespace (vars(x), x.__dict__) whose first argument is a name
_NAMESPACE_METHODS = (
    "get",
    "setdefault",
    "pop",
    "__getitem__",
    "__setitem__",
    "__delitem__",
    "__contains__",
)


def _private_name(node: ast.expr | None) -> str | None:
    """The private name a string literal spells (``"_x"``; an f-string ``f"_{n}"``
    gives ``_{n}``); ``None`` for anything else, dunder names included."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        name = node.value
    elif isinstance(node, ast.JoinedStr):
        name = "".join(
            f"{{{ast.unparse(part.value)}}}"
            if isinstance(part, ast.FormattedValue)
            else str(getattr(part, "value", ""))
            for part in node.values
        )
    else:
        return None
    return name if name.startswith("_") and not name.startswith("__") else None


def _owner(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) and node.id in ("self", "cls") else ""


def _namespace_of(node: ast.expr) -> ast.expr | None:
    """``x`` of ``vars(x)`` or ``x.__dict__``, else ``None``."""
    if isinstance(node, ast.Attribute) and node.attr == "__dict__":
        return node.value
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "vars"
        and len(node.args) == 1
    ):
        return node.args[0]
    return None


def _call_use(node: ast.Call) -> tuple[ast.expr, ast.expr | None, bool] | None:
    """(the object, the name's expression, sets) of a call that reaches an
    attribute by its name, else ``None``."""
    func, args = node.func, node.args
    called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
    if called in _BY_NAME and len(args) >= 2:
        return args[0], args[1], called in _SETTERS
    if called in _DUNDER_BY_NAME and isinstance(func, ast.Attribute):
        bound = bool(args) and _private_name(args[0]) is not None
        if bound:  # x.__getattribute__("_n")
            return func.value, args[0], called in _SETTERS
        if len(args) >= 2:  # object.__getattribute__(x, "_n")
            return args[0], args[1], called in _SETTERS
    if called in _NAMESPACE_METHODS and isinstance(func, ast.Attribute) and args:
        subject = _namespace_of(func.value)
        if subject is not None:  # x.__dict__.get("_n"), vars(x).setdefault("_n", v)
            return subject, args[0], called in _SETTERS
    return None


def _private_uses_in(tree: ast.AST) -> list[_Use]:
    """Every private attribute *tree* reaches, by every means the source shows:
    ``x._n``; ``getattr(x, "_n")`` and setattr/hasattr/delattr; ``object.__getattribute__
    (x, "_n")`` and the other dunders; ``vars(x)["_n"]``, ``x.__dict__["_n"]`` and
    ``.get``/``.setdefault``/``.pop``/``in`` on them; ``attrgetter("_n")``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            name = _private_name(ast.Constant(node.attr))
            if name is not None:
                sets = isinstance(node.ctx, ast.Store)
                found.append(_Use(name, ast.unparse(node), _owner(node.value), sets))
        elif isinstance(node, ast.Subscript) and (subject := _namespace_of(node.value)):
            name = _private_name(node.slice)
            if name is not None:
                sets = isinstance(node.ctx, ast.Store)
                found.append(_Use(name, ast.unparse(node), _owner(subject), sets))
        elif isinstance(node, ast.Compare) and len(node.comparators) == 1:
            subject = _namespace_of(node.comparators[0])
            name = _private_name(node.left)
            if subject is not None and name is not None:  # "_n" in x.__dict__
                found.append(_Use(name, ast.unparse(node), _owner(subject), False))
        elif isinstance(node, ast.Call):
            found.extend(_call_uses(node))
    return found


def _call_uses(node: ast.Call) -> list[_Use]:
    if getattr(node.func, "id", getattr(node.func, "attr", "")) == "attrgetter":
        dotted = [arg.value for arg in node.args if isinstance(arg, ast.Constant)]
        return [
            _Use(part, ast.unparse(node), "", False)
            for path in dotted
            if isinstance(path, str)
            for part in path.split(".")
            if _private_name(ast.Constant(part)) is not None
        ]
    use = _call_use(node)
    if use is None:
        return []
    subject, name_node, sets = use
    name = _private_name(name_node)
    return [] if name is None else [_Use(name, ast.unparse(node), _owner(subject), sets)]


def _private_uses(path: Path) -> list[_Use]:
    return _private_uses_in(ast.parse(path.read_text(), str(path)))


def _own_private_names() -> set[str]:
    """Private names the package defines itself: functions, methods, attributes
    it declares in a class body or sets on ``self`` (by any means: ``self._x = v``,
    ``setattr(self, "_x", v)``, ``self.__dict__["_x"] = v``, ...). A ``_streamjoin_``
    prefix alone does not make a name the package's: its marks on faust's and
    aiokafka's objects (``_streamjoin_lease``, ...) are in :data:`SEAM`, each set
    by its seam module only."""
    own = set()
    for path in _modules():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                own.add(node.name)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                own.add(node.target.id)
        own.update(use.name for use in _private_uses_in(tree) if use.owner == "self" and use.sets)
    return {name for name in own if name.startswith("_")}


def _seam_offenders(rel: str, uses: list[_Use], own: set[str]) -> list[str]:
    """The uses in module *rel* (``faust/join/x.py``) of private attributes of
    something other than ``self``/``cls`` that no rule allows there."""
    wrong = []
    for name, how, owner, _ in uses:
        if owner or name in own:
            continue
        if name in SEAM:
            if rel != f"faust/kafka/{SEAM[name]}":
                wrong.append(f"{rel}: {how} (only faust/kafka/{SEAM[name]} may)")
        elif "{" in name:
            if not rel.startswith("faust/kafka/"):
                wrong.append(f"{rel}: {how} (a private name built at run time: only the seam)")
        elif rel not in OTHER_PRIVATE.get(name, ()):
            wrong.append(f"{rel}: {how} (a private name no seam module owns)")
    return wrong


def test_private_attributes_of_faust_and_aiokafka_are_touched_only_in_the_seam() -> None:
    own = _own_private_names() - set(SEAM)
    wrong = []
    for path in _modules():
        wrong += _seam_offenders(_rel(path), _private_uses(path), own)
    assert wrong == []


#: each way of reaching a private attribute of something else, as the seam check must see it
REACHES = [
    "conf._broker",
    "conf._broker = 1",
    'getattr(conf, "_broker")',
    'getattr(conf, "_broker", None)',
    'setattr(conf, "_broker", 1)',
    'hasattr(conf, "_broker")',
    'delattr(conf, "_broker")',
    'inspect.getattr_static(conf, "_broker")',
    'object.__getattribute__(conf, "_broker")',
    'object.__setattr__(conf, "_broker", 1)',
    'object.__delattr__(conf, "_broker")',
    'conf.__getattribute__("_broker")',
    'vars(conf)["_broker"]',
    'vars(conf)["_broker"] = 1',
    'conf.__dict__["_broker"]',
    'conf.__dict__["_broker"] = 1',
    'del conf.__dict__["_broker"]',
    'conf.__dict__.get("_broker")',
    'vars(conf).get("_broker")',
    'conf.__dict__.setdefault("_broker", 1)',
    'conf.__dict__.pop("_broker")',
    '"_broker" in conf.__dict__',
    'operator.attrgetter("_broker")(conf)',
    'attrgetter("app._broker")(conf)',
]


@pytest.mark.parametrize("source", REACHES)
def test_the_seam_check_sees_every_way_of_reaching_a_private_attribute(source: str) -> None:
    uses = _private_uses_in(ast.parse(source))
    assert [use.name for use in uses] == ["_broker"]
    assert _seam_offenders("worker/run.py", uses, own=set()) != []
    assert _seam_offenders("faust/kafka/nowhere.py", uses, own=set()) != []  # SEAM names no such


@pytest.mark.parametrize(
    "source",
    ['object.__getattribute__(conf, f"_{name}")', 'getattr(conf, f"_{name}")'],
)
def test_the_seam_check_sees_private_names_built_at_run_time(source: str) -> None:
    uses = _private_uses_in(ast.parse(source))
    assert [use.name for use in uses] == ["_{name}"]
    assert _seam_offenders("worker/run.py", uses, own=set()) != []
    assert _seam_offenders("faust/kafka/settings.py", uses, own=set()) == []


@pytest.mark.parametrize(
    "source",
    [
        "self._mine",
        'getattr(self, "_mine")',
        'self.__dict__.get("_mine")',
        'conf.__dict__["__module__"]',
        'getattr(conf, "public")',
        "conf.__class__",
        'settings["_key"]',  # a mapping's key, not an attribute
    ],
)
def test_the_seam_check_leaves_self_public_and_dunder_names(source: str) -> None:
    uses = _private_uses_in(ast.parse(source))
    assert _seam_offenders("worker/run.py", uses, own=set()) == []


def test_own_names_are_what_the_package_sets_on_self_by_any_means() -> None:
    tree = ast.parse('self.__dict__["_streamjoin_ownership"] = x\nsetattr(self, "_other", 1)')
    sets = {use.name for use in _private_uses_in(tree) if use.owner == "self" and use.sets}
    assert sets == {"_streamjoin_ownership", "_other"}


def test_self_reads_no_private_attribute_the_package_does_not_define() -> None:
    """A subclass of a faust class reading faust's private attributes through ``self``
    (by any means: ``self._x``, ``getattr(self, "_x")``, ``self.__dict__["_x"]``, ...)."""
    own = _own_private_names()
    wrong = [
        f"{_rel(path)}: {use.how}"
        for path in _modules()
        for use in _private_uses(path)
        if use.owner == "self" and use.name not in own
    ]
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
