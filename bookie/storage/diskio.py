"""The one place through which the storage engine's writes and fsyncs go (journal segments, index
files, the checkpoint, garbage-collection copies), so that tests can make the disk slow, failing
or lying.

QUIRE_TEST_DISK_FAULTS is test-only. Production leaves it unset, and then `pwrite`, `write`,
`fsync`, `fdatasync` and `ftruncate` here are the `os` functions themselves. When it names a
control file (read by `fault_control_path` alone), every call first looks at that file (JSON,
absent or empty: no fault), which tests and the chaos campaign rewrite while the bookie runs:

- `"fsync_delay_ms": N`: every fsync and fdatasync waits N ms before it runs (a slow disk);
- `"fsync_error": true`: every fsync and fdatasync fails with EIO (a failing disk);
- `"lose_writes": N`: the next N writes to journal segment files report every byte written and
  write nothing (a lying disk); counted again from N each time the file is rewritten.

For power-loss tests it also appends `<path>\\t<length>` to `<control file>.synced` after every
successful fsync or fdatasync of a journal segment file: the length of that file's data (what
was written to it, or what it was cut to) the sync covered. A test that kills the bookie can cut
each segment back to its last synced length (plus a torn part of what follows), as a power loss
would. The journal only appends, so a file's data end is its highest written offset.

What the bookie does with a failed fsync is the engine's business (`engine.py`): it never
acknowledges, and stops.
"""

from __future__ import annotations

import errno
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CONTROL_VARIABLE = "QUIRE_TEST_DISK_FAULTS"
SYNCED_SUFFIX = ".synced"

Buffer = bytes | bytearray | memoryview


def fault_control_path() -> Path | None:
    """The test-only disk fault control file (None unless QUIRE_TEST_DISK_FAULTS is set)."""
    raw = os.environ.get(CONTROL_VARIABLE, "").strip()
    return Path(raw) if raw else None


def is_segment_file(path: str) -> bool:
    return path.endswith(".log") and os.path.basename(os.path.dirname(path)) == "journal"


class DiskShim:
    """The faults a control file asks for, applied to the calls of this process (any thread)."""

    def __init__(self, control: Path) -> None:
        self.control = control
        self._lock = threading.Lock()
        self._version: tuple[int, int, int] | None = None
        self._settings: dict[str, Any] = {}
        self._lose_left = 0
        self._data_end: dict[str, int] = {}  # per segment file: its highest written offset
        self._synced_fd = -1

    def _current(self) -> dict[str, Any]:
        """The control file's settings, re-read whenever the file changed (a test rewrites it by
        rename: a new inode)."""
        try:
            st = os.stat(self.control)
        except FileNotFoundError:
            self._version, self._settings, self._lose_left = None, {}, 0
            return self._settings
        version = (st.st_ino, st.st_mtime_ns, st.st_size)
        if version != self._version:
            self._version = version
            try:
                text = self.control.read_text()
                self._settings = json.loads(text) if text.strip() else {}
            except (OSError, ValueError):
                self._settings = {}  # caught mid-write: no fault until the next version
            self._lose_left = int(self._settings.get("lose_writes", 0))
        return self._settings

    @staticmethod
    def _path(fd: int) -> str:
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return ""

    def _written(self, fd: int, size: int, offset: int | None, apply: Callable[[], int]) -> int:
        path = self._path(fd)
        segment = is_segment_file(path)
        with self._lock:
            self._current()
            lose = segment and self._lose_left > 0
            if lose:
                self._lose_left -= 1
        if lose:
            if offset is None:
                os.lseek(fd, size, os.SEEK_CUR)
            written = size
        else:
            written = apply()
        if segment:
            end = os.lseek(fd, 0, os.SEEK_CUR) if offset is None else offset + written
            with self._lock:
                self._data_end[path] = max(self._data_end.get(path, 0), end)
        return written

    def pwrite(self, fd: int, data: Buffer, offset: int) -> int:
        size = memoryview(data).nbytes
        return self._written(fd, size, offset, lambda: os.pwrite(fd, data, offset))

    def write(self, fd: int, data: Buffer) -> int:
        return self._written(fd, memoryview(data).nbytes, None, lambda: os.write(fd, data))

    def ftruncate(self, fd: int, length: int) -> None:
        os.ftruncate(fd, length)
        path = self._path(fd)
        if is_segment_file(path):
            with self._lock:
                self._data_end[path] = length

    def _sync(self, fd: int, sync: Callable[[int], None]) -> None:
        path = self._path(fd)
        with self._lock:
            settings = dict(self._current())
            covered = self._data_end.get(path)
        delay_ms = float(settings.get("fsync_delay_ms", 0))
        if delay_ms > 0:
            time.sleep(delay_ms / 1000)
        if settings.get("fsync_error"):
            raise OSError(errno.EIO, f"{os.strerror(errno.EIO)} (test disk fault)", path)
        sync(fd)
        if covered is not None and is_segment_file(path):
            self._record_synced(path, covered)

    def _record_synced(self, path: str, length: int) -> None:
        with self._lock:
            if self._synced_fd < 0:
                synced = f"{self.control}{SYNCED_SUFFIX}"
                self._synced_fd = os.open(synced, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.write(self._synced_fd, f"{path}\t{length}\n".encode())

    def fsync(self, fd: int) -> None:
        self._sync(fd, os.fsync)

    def fdatasync(self, fd: int) -> None:
        self._sync(fd, os.fdatasync)


def read_synced(control: Path) -> dict[str, int]:
    """The last synced data length of every journal segment file the shim saw synced."""
    out: dict[str, int] = {}
    try:
        text = Path(f"{control}{SYNCED_SUFFIX}").read_text()
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        path, _, length = line.rpartition("\t")
        if path and length.isdigit():
            out[path] = int(length)
    return out


_control = fault_control_path()
_shim = DiskShim(_control) if _control is not None else None

pwrite: Callable[[int, Buffer, int], int] = _shim.pwrite if _shim else os.pwrite
write: Callable[[int, Buffer], int] = _shim.write if _shim else os.write
fsync: Callable[[int], None] = _shim.fsync if _shim else os.fsync
fdatasync: Callable[[int], None] = _shim.fdatasync if _shim else os.fdatasync
ftruncate: Callable[[int, int], None] = _shim.ftruncate if _shim else os.ftruncate
