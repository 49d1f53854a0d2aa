"""The Spark session's work directory does not outlive its compactor: removed when the process
exits, and swept by the next compactor when the process was killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from compactor import spark

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[2]
MAKE_WORK_DIR = "from compactor import spark; print(spark._work(), flush=True)"


def _child(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True, start_new_session=True
    )


def test_the_work_directory_goes_when_the_process_exits() -> None:
    child = _child(MAKE_WORK_DIR)
    out, _ = child.communicate(timeout=60)
    work = Path(out.strip())
    assert child.returncode == 0 and work.name.startswith(f"quire-spark-{child.pid}-")
    assert not work.exists()


def test_a_killed_compactors_directory_is_swept_and_a_live_ones_kept() -> None:
    killed = _child(MAKE_WORK_DIR + "; import time; time.sleep(60)")
    live = _child(MAKE_WORK_DIR + "; import time; time.sleep(60)")
    try:
        assert killed.stdout is not None and live.stdout is not None
        killed_dir, live_dir = Path(killed.stdout.readline().strip()), Path(live.stdout.readline().strip())
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait(10)
        assert killed_dir.is_dir() and live_dir.is_dir()  # -9: no exit handler ran
        spark._sweep_work_dirs()
        assert not killed_dir.exists()
        assert live_dir.is_dir()
        assert live_dir.parent == Path(tempfile.gettempdir())
    finally:
        for child in (killed, live):
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait(10)
