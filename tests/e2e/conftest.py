"""The wheel, built from this checkout and installed into a fresh virtualenv outside it.

The end-to-end tests run streamjoin from there, so they prove that the main
job needs nothing from the checkout (no ``examples/``, no ``PYTHONPATH``).
The virtualenv gets the built wheel itself (``--no-deps``); its third-party
dependencies come from the project's environment through a ``.pth`` entry
(installing PySpark and faust again would take minutes, and is not what is
being tested). A ``.pth`` entry does not run the project's editable-install
hook, so the checkout's ``streamjoin`` is not importable there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Installed:
    """A virtualenv with the built wheel in it."""

    root: Path
    wheel: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def streamjoin(self) -> Path:
        return self.root / "bin" / "streamjoin"

    def env(self) -> dict[str, str]:
        """The environment to run it in: nothing points at the checkout."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env["PATH"] = f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return env


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed:\n{(done.stdout + done.stderr)[-3000:]}")


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    base = tmp_path_factory.mktemp("wheel")
    # build from a copy of what the wheel is made of, so the checkout gets no build/ residue
    source = base / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.rst"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(
        REPO / "streamjoin", source / "streamjoin", ignore=shutil.ignore_patterns("__pycache__")
    )
    dist = base / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)])
    wheels = sorted(dist.glob("streamjoin-*.whl"))
    if len(wheels) != 1:
        raise AssertionError(f"expected one streamjoin wheel in {dist}, found {wheels}")
    root = base / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(root)])
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    python = str(root / "bin" / "python")
    site = Path(subprocess.check_output([python, "-c", where], text=True).strip())
    (site / "project-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = [sys.executable, "-m", "pip", "--python", python]
    _run([*pip, "install", "-q", "--no-deps", str(wheels[0])])
    yield Installed(root, wheels[0])
