"""Run faust-streaming's own tests with faust's classes, then with streamjoin's.

``make test-faust-compat`` runs this file; ``test_faust_suite.py`` runs it as a
(slow) pytest test. Steps:

1. download the faust-streaming sdist (its tests are not in the wheel) with
   ``pip download --no-deps --no-binary :all:`` into a cache outside the
   repository (``$STREAMJOIN_FAUST_SRC``, default ``<venv>/faust-src``) and
   extract only its ``tests/`` there, so the tests import the installed faust;
2. install the few test dependencies .venv lacks (``requirements.txt`` here)
   into .venv, and faust's test harness pins (``pytest<8`` and the
   pytest-asyncio 0.21 its ``tests/conftest.py`` is written for) into
   ``<cache>/harness`` with ``pip install --target``: that directory is first
   on ``PYTHONPATH`` of the two sub-runs only, so .venv keeps the pytest 9 and
   pytest-asyncio 1.x that ``make test`` uses;
3. run the selected faust test files twice in subprocesses: baseline
   (``--streamjoin-swap=faust``) and swapped (``--streamjoin-swap=streamjoin``,
   see ``streamjoin_faust_swap.py``);
4. compare: exit 0 when every test that passes with faust's classes passes with
   streamjoin's, else print each such test with the first line of its error
   and exit 1 (exit 2 when the sdist cannot be had).

Usage: ``python tests/faust_compat/faust_compat_run.py [--keep-going] [pytest file args...]``
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

FAUST_VERSION = "0.15.3"
HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements.txt"

#: faust test files that exercise what streamjoin replaces or plugs into:
#: the assignor (faust's own copartitioned core, the consumer's use of it),
#: the table manager and recovery (and the tables/stores that call them),
#: the app and its router/service, and the sensors the assignor reports to.
TEST_PATHS: tuple[str, ...] = (
    "tests/meticulous/assignor/test_copartitioned_assignor.py",
    "tests/unit/app",
    "tests/unit/tables",
    "tests/unit/sensors",
    "tests/unit/transport/test_consumer.py",
    "tests/unit/stores/test_rocksdb.py",
    "tests/functional/test_app.py",
)

#: module -> pip requirement, checked before asking pip (no network when present)
NEEDED_MODULES = {
    "datadog": "datadog",
    "opentracing": "opentracing",
    "statsd": "statsd",
    "prometheus_client": "prometheus_client",
    "opentelemetry.sdk": "opentelemetry-sdk",
}

#: seconds per test (pytest-timeout, from streamjoin's dev extra): a faust test
#: that waits forever with streamjoin's classes fails instead of hanging the run
TEST_TIMEOUT = 60

#: faust's test harness: requirements/test.txt pins pytest<8, and its
#: tests/conftest.py overrides pytest-asyncio 0.21's ``event_loop`` fixture
#: (pytest-asyncio >= 0.23 runs async tests on another loop than the ``app``
#: fixture's, and 13 of faust's tests then fail or hang with faust's own classes)
HARNESS = ("pytest>=7.4,<8", "pytest-asyncio==0.21.2")

#: differences that no drop-in replacement can avoid: test id -> (text the
#: failure message must contain, why). Reported, not counted as regressions.
EXPECTED: dict[str, tuple[str, str]] = {
    "tests.functional.test_app.Test_settings::test_defaults": (
        "<class 'streamjoin.",
        "asserts the settings' defaults are faust's own classes (conf.TableManager is "
        "faust.tables.TableManager, conf.PartitionAssignor is faust.assignor.PartitionAssignor)",
    ),
    "tests.unit.tables.test_manager.Test_Manager::test_recovery": (
        "assert False",
        "asserts tables.recovery is faust's Recovery; streamjoin's TableManager runs its own "
        "Restorer (reads changelogs to the fetch high watermark, follows global tables), which "
        "implements the protocol the manager uses but deliberately is not a Recovery subclass",
    ),
}

SUMMARY = re.compile(r"^=+ .* in [0-9.]+s")

INI = """\
# written by streamjoin's tests/faust_compat/faust_compat_run.py: faust's own
# pytest options (its pyproject.toml) without coverage (pytest-cov not installed)
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
filterwarnings =
    error::ResourceWarning
"""


class SdistUnavailable(RuntimeError):
    """The faust-streaming sdist could not be downloaded or unpacked."""


def cache_dir() -> Path:
    configured = os.environ.get("STREAMJOIN_FAUST_SRC")
    return Path(configured) if configured else Path(sys.prefix) / "faust-src"


def faust_tests(cache: Path | None = None) -> Path:
    """Directory holding faust's ``tests/`` package (downloaded on first use)."""
    root = (cache or cache_dir()) / f"faust-streaming-{FAUST_VERSION}"
    if (root / "tests" / "conftest.py").is_file():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root.parent) as tmp:
        cmd = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
            "--disable-pip-version-check", "-q", f"faust-streaming=={FAUST_VERSION}", "-d", tmp,
        ]  # fmt: skip
        print("faust-compat: downloading the sdist:", " ".join(cmd[2:]), flush=True)
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        archives = sorted(Path(tmp).glob("*.tar.gz"))
        if proc.returncode != 0 or not archives:
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
            raise SdistUnavailable(
                f"pip download faust-streaming=={FAUST_VERSION} failed "
                f"(exit {proc.returncode}): {tail}"
            )
        staged = Path(tmp) / "staged"
        with tarfile.open(archives[0]) as tar:
            prefix = tar.getnames()[0].split("/")[0] + "/"
            members = [m for m in tar.getmembers() if m.name.startswith(prefix + "tests/")]
            for member in members:
                member.name = member.name[len(prefix) :]
            tar.extractall(staged, members=members, filter="data")
        if not (staged / "tests" / "conftest.py").is_file():
            raise SdistUnavailable(f"{archives[0].name} has no tests/conftest.py")
        (staged / "pytest.ini").write_text(INI)
        if root.exists():
            shutil.rmtree(root)
        staged.rename(root)
    return root


def ensure_requirements() -> None:
    """pip-install requirements.txt into this interpreter when a module is missing."""
    missing = [m for m in NEEDED_MODULES if not _importable(m)]
    if not missing:
        return
    print(f"faust-compat: installing test dependencies ({', '.join(missing)} missing)", flush=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "-r", str(REQUIREMENTS)],
        check=True,
    )  # fmt: skip


def ensure_harness(cache: Path | None = None) -> Path:
    """``pip install --target`` faust's pytest pins into ``<cache>/harness`` (once)."""
    target = (cache or cache_dir()) / "harness"
    if any(target.glob("pytest-7.*.dist-info")) and any(target.glob("pytest_asyncio-0.21.*")):
        return target
    print(f"faust-compat: installing faust's test harness ({', '.join(HARNESS)}) into {target}")
    if target.exists():
        shutil.rmtree(target)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "--target", str(target), *HARNESS],
        check=True,
    )  # fmt: skip
    return target


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


@dataclass(frozen=True)
class Outcome:
    status: str  # passed | failed | skipped
    message: str = ""


def run_suite(
    root: Path, harness: Path, mode: str, paths: Sequence[str], out: Path
) -> dict[str, Outcome]:
    """One pytest subprocess over *paths*; returns test id -> outcome."""
    junit = out / f"{mode}.xml"
    cmd = [
        sys.executable, "-m", "pytest", *paths,
        "-c", str(root / "pytest.ini"), "--rootdir", str(root),
        "-p", "streamjoin_faust_swap", f"--streamjoin-swap={mode}",
        "-p", "no:cacheprovider", "-v", "-o", "console_output_style=classic",
        "-o", f"timeout={TEST_TIMEOUT}",
        f"--junitxml={junit}", "-o", "junit_family=xunit1",
    ]  # fmt: skip
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(harness), str(HERE), env.get("PYTHONPATH")) if p
    )
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_CURRENT_TEST", None)
    started = time.monotonic()
    print(f"faust-compat: running faust's tests with {mode}'s classes ...", flush=True)
    log = out / f"{mode}.log"
    with log.open("w") as sink:
        subprocess.run(cmd, cwd=root, env=env, stdout=sink, stderr=subprocess.STDOUT, check=False)
    output = log.read_text()
    summary = next(
        (line.strip("= ") for line in reversed(output.splitlines()) if SUMMARY.match(line)),
        "(no summary line)",
    )
    print(f"faust-compat:   {summary}  [{time.monotonic() - started:.0f}s]", flush=True)
    if not junit.is_file():
        raise RuntimeError(f"pytest ({mode}) wrote no report:\n{output[-3000:]}")
    return parse_junit(junit)


def parse_junit(path: Path) -> dict[str, Outcome]:
    results: dict[str, Outcome] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        test_id = f"{case.get('classname', '')}::{case.get('name', '')}"
        status, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                status = "failed"
                message = message or _first_line(child)
            elif child.tag == "skipped" and status == "passed":
                status, message = "skipped", _first_line(child)
        results[test_id] = Outcome(status, message)
    return results


def _first_line(element: ET.Element) -> str:
    text = (element.get("message") or element.text or "").strip()
    return text.splitlines()[0] if text else element.tag


def align(baseline: dict[str, Outcome], swapped: dict[str, Outcome]) -> dict[str, Outcome]:
    """*swapped* keyed by *baseline*'s ids.

    Some faust tests are parametrized with ``datetime.now()``, so their ids
    differ between runs: ids missing from one side are paired, in collection
    order, with the other side's ids of the same test function.
    """
    aligned = {t: o for t, o in swapped.items() if t in baseline}
    unmatched_b = [t for t in baseline if t not in swapped]
    unmatched_s = [t for t in swapped if t not in baseline]
    for test in unmatched_b:
        base = test.split("[", 1)[0]
        for other in unmatched_s:
            if other.split("[", 1)[0] == base:
                aligned[test] = swapped[other]
                unmatched_s.remove(other)
                break
    for other in unmatched_s:
        aligned[other] = swapped[other]
    return aligned


@dataclass(frozen=True)
class Comparison:
    baseline: dict[str, Outcome]
    swapped: dict[str, Outcome]

    def __post_init__(self) -> None:
        object.__setattr__(self, "swapped", align(self.baseline, self.swapped))

    @property
    def differences(self) -> list[tuple[str, Outcome]]:
        """Tests that pass with faust's classes and do not pass with streamjoin's."""
        return [
            (test, self.swapped.get(test, Outcome("missing", "not run with streamjoin's classes")))
            for test, outcome in sorted(self.baseline.items())
            if outcome.status == "passed"
            and self.swapped.get(test, Outcome("missing")).status != "passed"
        ]

    @property
    def expected(self) -> list[tuple[str, Outcome]]:
        return [(t, o) for t, o in self.differences if _is_expected(t, o)]

    @property
    def regressions(self) -> list[tuple[str, Outcome]]:
        return [(t, o) for t, o in self.differences if not _is_expected(t, o)]

    @property
    def fixed(self) -> list[str]:
        return sorted(
            t for t, o in self.swapped.items()
            if o.status == "passed" and self.baseline.get(t, Outcome("missing")).status != "passed"
        )  # fmt: skip

    def report(self) -> str:
        def count(results: dict[str, Outcome], status: str) -> int:
            return sum(1 for o in results.values() if o.status == status)

        lines = [
            f"faust-compat: faust-streaming {FAUST_VERSION} tests: "
            f"baseline {count(self.baseline, 'passed')} passed, "
            f"{count(self.baseline, 'failed')} failed, {count(self.baseline, 'skipped')} skipped; "
            f"with streamjoin {count(self.swapped, 'passed')} passed, "
            f"{count(self.swapped, 'failed')} failed, {count(self.swapped, 'skipped')} skipped",
        ]
        regressions = self.regressions
        if regressions:
            lines.append(
                f"faust-compat: {len(regressions)} test(s) pass with faust's classes "
                "and fail with streamjoin's:"
            )
            lines += [f"  {test}\n      {o.status}: {o.message}" for test, o in regressions]
        else:
            lines.append("faust-compat: OK: every test that passes with faust's classes passes")
        for test, outcome in self.expected:
            lines.append(
                f"faust-compat: expected difference: {test} ({EXPECTED[test][1]})"
                f"\n      {outcome.status}: {outcome.message}"
            )
        if self.fixed:
            lines.append("faust-compat: pass only with streamjoin's: " + ", ".join(self.fixed))
        return "\n".join(lines)


def _is_expected(test: str, outcome: Outcome) -> bool:
    needle = EXPECTED.get(test, (None, ""))[0]
    return needle is not None and needle in outcome.message


def compare(paths: Sequence[str] = TEST_PATHS, out: Path | None = None) -> Comparison:
    root = faust_tests()
    ensure_requirements()
    harness = ensure_harness()
    if out is None:
        out = cache_dir() / "runs"
    out.mkdir(parents=True, exist_ok=True)
    baseline = run_suite(root, harness, "faust", paths, out)
    swapped = run_suite(root, harness, "streamjoin", paths, out)
    print(f"faust-compat: logs and junit reports in {out}", flush=True)
    return Comparison(baseline, swapped)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help=f"faust test paths (default: {TEST_PATHS})")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        result = compare(args.paths or TEST_PATHS)
    except SdistUnavailable as exc:
        print(f"faust-compat: cannot get faust's tests: {exc}", file=sys.stderr)
        return 2
    print(result.report())
    print(f"faust-compat: took {time.monotonic() - started:.0f}s")
    return 1 if result.regressions else 0


if __name__ == "__main__":
    sys.exit(main())
