"""The connector installs and runs without the broker's server dependencies."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SERVER_ONLY = (
    "fastapi",
    "starlette",
    "uvicorn",
    "sqlalchemy",
    "alembic",
    "psycopg",
    "pydantic_settings",
    "jwt",
)

_BLOCKED_IMPORT = f"""
import sys
BLOCKED = {SERVER_ONLY!r}
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError("server dependency imported: " + name)
        return None
sys.meta_path.insert(0, Block())
import quire_spark.source, quire_spark.sink, quire_spark.reader, quire_spark.limit, quire_spark.seek
from quire_spark import QuireDataSource
assert QuireDataSource.name() == "quire"
print("ok")
"""


def test_the_connector_imports_nothing_of_the_server() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _BLOCKED_IMPORT],
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_the_distribution_declares_no_server_dependency(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path),
         str(REPO / "clients" / "spark")],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = tmp_path.glob("quire_spark-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        metadata = next(zf.read(n).decode() for n in names if n.endswith("METADATA"))
    requires = [
        line.split(":", 1)[1].strip().lower()
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist")
    ]
    assert requires and not [r for r in requires if r.split(">")[0].split("=")[0] in SERVER_ONLY]
    for module in (
        "quire_spark/reader.py",
        "bookie/client.py",
        "managed_ledger/entry_format.py",
        "common/errors.py",
    ):
        assert module in names
    assert not [
        n for n in names if n.startswith(("app/", "topics/", "compactor/", "managed_ledger/metadata/"))
    ]
