"""faust-streaming's own tests pass with streamjoin's assignor and table manager.

Runs ``faust_compat_run.py`` (two pytest subprocesses over faust's test
files: faust's classes, then ``streamjoin:PartitionAssignor`` and
``streamjoin:TableManager``) and fails when a test that passes with faust's
classes does not pass with streamjoin's. Not part of ``make test`` (pyproject
addopts ignore this folder); run it with ``make test-faust-compat`` or
``pytest tests/faust_compat``.
"""

from __future__ import annotations

import faust_compat_run as compat
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def test_faust_suite_passes_with_streamjoin_classes(tmp_path):
    try:
        compat.faust_tests()
    except compat.SdistUnavailable as exc:
        pytest.skip(f"faust-streaming {compat.FAUST_VERSION} sdist not downloadable: {exc}")
    result = compat.compare(out=tmp_path)
    print(result.report())
    assert sum(o.status == "passed" for o in result.baseline.values()) > 0, result.report()
    if result.regressions:
        pytest.fail(result.report(), pytrace=False)
