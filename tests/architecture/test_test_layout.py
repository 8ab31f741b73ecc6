"""The test tree itself: pytest imports test modules by basename here (no
packages, rootdir-relative), so two test files of one name stop the whole run at
collection (it happened: tests/unit/faust/test_client_rack.py and
tests/integration/test_client_rack.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_module_has_a_basename_of_its_own() -> None:
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))
    twice = sorted(name for name, count in names.items() if count > 1)
    assert not twice, f"rename one of each: {twice}"
