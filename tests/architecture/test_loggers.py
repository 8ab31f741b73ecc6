"""Every logger in the package is named after its own module (``__name__``), so a
log line says where it came from and ``logging.getLogger("streamjoin.faust.join")``
configures exactly that part."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "streamjoin"


def _misnamed(source: str) -> list[str]:
    """``getLogger`` calls with a streamjoin name other than ``__name__``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name != "getLogger":
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Name) and arg.id == "__name__":
            continue
        text = ast.unparse(arg)
        if "streamjoin" in text:
            found.append(f"line {node.lineno}: getLogger({text})")
    return found


def test_every_streamjoin_logger_is_named_after_its_module() -> None:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        wrong += [f"{path.relative_to(PACKAGE)} {w}" for w in _misnamed(path.read_text())]
    assert wrong == [], "use logging.getLogger(__name__):\n" + "\n".join(wrong)


def test_the_check_sees_a_logger_named_after_another_module() -> None:
    source = (
        "import logging\n"
        "a = logging.getLogger(__name__)\n"
        'b = logging.getLogger("streamjoin.faust.join.operator")\n'
        'c = logging.getLogger("aiokafka")\n'
        'd = getLogger(f"streamjoin.{x}")\n'
    )
    assert [w.split(":")[0] for w in _misnamed(source)] == ["line 3", "line 5"]
