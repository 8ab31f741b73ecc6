"""Small functions with one job each (issue 39): no function in streamjoin/ is longer
than MAX_LINES lines, its docstring not counted, unless a ``# long because: <reason>``
comment beside it says why.

The comment goes on a line directly above the ``def`` (decorators may come between)
or as the first line of the function's body (before or after its docstring)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import NamedTuple

PACKAGE = Path(__file__).resolve().parents[2] / "streamjoin"

#: a function may be this long (lines from ``def`` to its last line, docstring excluded)
MAX_LINES = 60
MARK = "# long because:"

Function = ast.FunctionDef | ast.AsyncFunctionDef


class Long(NamedTuple):
    """A function over the limit that does not say why."""

    line: int
    name: str
    length: int


def function_length(node: Function) -> int:
    """Lines from the ``def`` to the function's last line, less its docstring's."""
    assert node.end_lineno is not None
    length = node.end_lineno - node.lineno + 1
    doc = _docstring(node)
    if doc is not None:
        assert doc.end_lineno is not None
        length -= doc.end_lineno - doc.lineno + 1
    return length


def _docstring(node: Function) -> ast.Expr | None:
    first = node.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return first
    return None


def _is_reason(line: str) -> bool:
    text = line.strip()
    return text.startswith(MARK) and bool(text[len(MARK) :].strip())


def says_why(lines: list[str], node: Function) -> bool:
    """Is there a ``# long because: <reason>`` beside the function (see the module doc)?

    ``lines`` are the module's lines; line numbers are 1-based as in ``ast``.
    """
    top = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    # the comment block directly above the def or its decorators
    above = top - 1
    while above >= 1 and lines[above - 1].strip().startswith("#"):
        if _is_reason(lines[above - 1]):
            return True
        above -= 1
    # comments between the decorators and the def
    if any(_is_reason(line) for line in lines[top - 1 : node.lineno - 1]):
        return True
    # comment lines opening the body: between the def and its first statement,
    # the docstring aside
    doc = _docstring(node)
    statements = node.body[1:] if doc is not None else node.body
    opening_end = statements[0].lineno if statements else node.end_lineno
    assert opening_end is not None
    skip = range(0) if doc is None else range(doc.lineno, (doc.end_lineno or doc.lineno) + 1)
    return any(
        _is_reason(lines[n - 1]) for n in range(node.lineno + 1, opening_end) if n not in skip
    )


def long_functions(source: str) -> list[Long]:
    """Every function in ``source`` over MAX_LINES that does not say why, by line."""
    lines = source.splitlines()
    found: list[Long] = []

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{scope}{child.name}"
                length = function_length(child)
                if length > MAX_LINES and not says_why(lines, child):
                    found.append(Long(child.lineno, name, length))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{scope}{child.name}.")
            else:
                visit(child, scope)

    visit(ast.parse(source), "")
    return sorted(found)


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_function_over_the_limit_says_why() -> None:
    offenders = []
    for path in _modules():
        rel = path.relative_to(PACKAGE.parent)
        for long in long_functions(path.read_text()):
            offenders.append(f"{rel}:{long.line} {long.name}: {long.length} lines")
    for offender in offenders:
        print(offender)
    assert not offenders, (
        f"{len(offenders)} function(s) longer than {MAX_LINES} lines (docstring not "
        "counted) without a reason:\n  "
        + "\n  ".join(offenders)
        + "\nSplit each by what it decides (one function per decision, named for it). "
        "When one is naturally long (a click command with its options, an argument "
        f"parser, a report that lays out a page), write `{MARK} <reason>` on a line "
        "directly above its def (or its decorators) or as the first line of its body."
    )


def test_the_scan_reads_the_whole_package() -> None:
    """The rule cannot pass by finding nothing: the package has hundreds of functions."""
    counted = sum(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for path in _modules()
        for node in ast.walk(ast.parse(path.read_text()))
    )
    assert len(_modules()) > 50 and counted > 500


def _long(name: str, body_lines: int, *, doc_lines: int = 0) -> str:
    """A function of ``1 + doc_lines + body_lines`` lines (docstring over doc_lines)."""
    lines = [f"def {name}() -> int:"]
    if doc_lines:
        lines += ['    """Doc.'] + ["    more"] * (doc_lines - 2) + ['    """']
    lines += ["    x = 0"] + ["    x += 1"] * (body_lines - 2) + ["    return x"]
    return "\n".join(lines) + "\n"


def test_the_rule_measures_without_the_docstring_and_finds_the_reason_beside_the_def() -> None:
    at_limit = _long("at_limit", MAX_LINES - 1, doc_lines=30)
    over = _long("over", MAX_LINES)
    assert long_functions(at_limit) == []
    assert long_functions(over) == [Long(1, "over", MAX_LINES + 1)]

    reason = "# long because: a parser lists every option in one place\n"
    above = reason + over
    decorated = reason + "@cache\n@other(\n    1,\n)\n" + over
    between = "@cache\n" + reason + over
    opening = over.replace("\n", "\n    " + reason, 1)
    after_doc = _long("over", MAX_LINES, doc_lines=3).replace('    """\n', '    """\n    ' + reason)
    for source in (above, decorated, between, opening, after_doc):
        assert long_functions(source) == [], source

    no_reason = "# long because:\n" + over
    apart = reason + "\n" + over
    deep = over.replace("    x += 1\n", "    " + reason, 1)
    elsewhere = over + reason
    for source in (no_reason, apart, deep, elsewhere):
        assert [f.name for f in long_functions(source)] == ["over"], source


def test_the_rule_names_methods_and_nested_functions_and_judges_each_on_its_own() -> None:
    inner = textwrap.indent(_long("inner", MAX_LINES), "        ")
    source = (
        "class Outer:\n"
        "    def method(self) -> None:\n"
        "        # long because: it holds inner, which says nothing\n"
        "        nothing = None\n" + inner
    )
    assert long_functions(source) == [Long(5, "Outer.method.inner", MAX_LINES + 1)]
    unexplained = source.replace("# long because", "# it is long")
    assert [f.name for f in long_functions(unexplained)] == ["Outer.method", "Outer.method.inner"]
