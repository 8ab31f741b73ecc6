"""The wheel holds the whole product: every module imports from outside the checkout,
and the ad app, its generator and the Spark side's default policy load from it."""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

PROBE = r"""
import importlib, json, pkgutil, sys
import streamjoin
walked = pkgutil.walk_packages(streamjoin.__path__, "streamjoin.")
# entry points (__main__) run a command when imported: they are checked by running them
modules = sorted(m.name for m in walked if not m.name.endswith("__main__"))
failed = {}
for name in modules:
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed[name] = f"{type(exc).__name__}: {exc}"
from streamjoin.ads.app import AdsSettings, create_app
from streamjoin.ads.spark.policy import load_policy
from streamjoin.worker.run import load_app
app = load_app("streamjoin.ads.app:app")
print(json.dumps({
    "file": streamjoin.__file__,
    "modules": modules,
    "failed": failed,
    "app": app.conf.id,
    "joins": sorted(app.joins),
    "policy_grace": load_policy().window.grace,
    "archive_app": type(importlib.import_module("streamjoin.ads.archive.app").create_app).__name__,
}))
"""


def test_every_module_of_the_wheel_imports_outside_the_checkout(
    installed: Any, tmp_path: Path
) -> None:
    done = subprocess.run(
        [str(installed.python), "-c", PROBE],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**installed.env(), "ADS_GRACE_MS": "4321"},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert not Path(found["file"]).is_relative_to(REPO), found["file"]
    assert Path(found["file"]).is_relative_to(installed.root)
    assert found["failed"] == {}
    source = sorted(
        ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        for p in (REPO / "streamjoin").rglob("*.py")
        if "__pycache__" not in p.parts and p.name != "__main__.py"
    )
    assert sorted(set(source) - {"streamjoin"}) == found["modules"]
    assert found["app"] == "ad-monetization" and found["joins"] == ["billing"]
    assert found["policy_grace"] == 4321  # the Spark default follows the workers' settings
    with zipfile.ZipFile(installed.wheel) as wheel:
        assert not [n for n in wheel.namelist() if n.startswith(("examples/", "tests/"))]


def test_the_installed_commands_start_outside_the_checkout(
    installed: Any, tmp_path: Path
) -> None:
    for argv in (
        [str(installed.streamjoin), "--help"],
        [str(installed.python), "-m", "streamjoin", "--help"],
        [str(installed.streamjoin), "demo", "--help"],
        [str(installed.python), "-m", "streamjoin.ads.generator", "--help"],
        [str(installed.streamjoin), "spark", "run", "--help"],
    ):
        done = subprocess.run(
            argv, capture_output=True, text=True, cwd=tmp_path, env=installed.env(), timeout=120
        )
        assert done.returncode == 0, (argv, done.stderr[-2000:])
