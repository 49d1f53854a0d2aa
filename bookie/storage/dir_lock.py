"""The data directory's lock (`DATA_DIR/LOCK`, an exclusive flock): one bookie process on a
directory at a time. The storage engine holds it while open; the cookie check holds it while it
reads or formats the directory."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType


class DirectoryInUseError(Exception):
    """Another process holds the directory's lock."""


class DirectoryLock:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._fd = -1

    def acquire(self) -> None:
        """Take the lock now, or DirectoryInUseError naming the directory."""
        fd = os.open(self.data_dir / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise DirectoryInUseError(f"{self.data_dir} is used by another bookie") from exc
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> DirectoryLock:
        self.acquire()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
