"""The zip the driver ships to executors holds every package a Spark task imports: on a real
cluster a missing one fails every task (local[*] never notices, since it shares the driver's path).
The spark cluster test proves it end to end; this one names the missing package in a second."""

from __future__ import annotations

import zipfile
from pathlib import Path

import grimp

from compactor.spark import SHIPPED_PACKAGES, zip_packages

FIRST_PARTY = ("app", "compactor", "quire_spark", "topics", "managed_ledger", "bookie", "common")
TASK_MODULES = ("compactor.tasks", "compactor.job")


def test_every_package_a_task_imports_is_shipped() -> None:
    graph = grimp.build_graph(*FIRST_PARTY, cache_dir=None)
    reached: set[str] = set()
    for module in TASK_MODULES:
        reached |= {module, *graph.find_upstream_modules(module)}
    packages = {name.split(".")[0] for name in reached}
    assert packages <= set(SHIPPED_PACKAGES), sorted(packages - set(SHIPPED_PACKAGES))
    assert "app" not in SHIPPED_PACKAGES


def test_the_zip_holds_each_shipped_package(tmp_path: Path) -> None:
    with zipfile.ZipFile(zip_packages(tmp_path)) as zf:
        names = zf.namelist()
    assert set(SHIPPED_PACKAGES) <= {name.split("/")[0] for name in names}
    assert not any(name.endswith(".pyc") for name in names)
