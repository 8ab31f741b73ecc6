"""benchmarks/instructions.py: the child it runs under valgrind, its errors, one real count."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import instructions  # noqa: E402


@pytest.mark.parametrize("phase", ["fresh", "rebalance"])
def test_the_child_builds_the_document_and_assigns_it(phase: str) -> None:
    # the same script valgrind runs, run plainly: it must succeed with and without the call
    child = [sys.executable, "-c", instructions._CHILD, str(ROOT), str(ROOT), "a-join", phase]
    for call in ("stop", "call"):
        done = subprocess.run(
            [*child, call],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr


def test_a_source_without_streamjoin_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert instructions.main(["--scenario", "a-join", "--source", str(tmp_path)]) == 2
    assert "holds no streamjoin/assignment package" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_counts_the_call_alone() -> None:
    with_call = instructions._instructions(ROOT, "a-join", "rebalance", call=True)
    without = instructions._instructions(ROOT, "a-join", "rebalance", call=False)
    # the call adds instructions; both runs share everything else
    assert 0 < with_call - without < without
