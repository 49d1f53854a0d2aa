"""The segment files of the log: which exist, the one being appended to, and reads by offset.

Formats are in `bookie.storage.records`. This module does file work only; the engine decides
what to write and when. Write order for a group: pwrite the whole group, fdatasync, and only
then may the engine index the records and acknowledge the adds.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from bookie.storage.index import fsync_directory
from bookie.storage.records import encode_segment_header, parse_segment_name, segment_name


class SegmentFiles:
    """Open read descriptors of every segment file, and the append descriptor of the current one."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._read_fds: dict[tuple[int, int], int] = {}
        self.current_segment = 0
        self.current_offset = 0
        self._write_fd = -1

    def list(self) -> list[tuple[int, int]]:
        """(segment, generation) of every segment file on disk, in log order."""
        found = []
        for name in os.listdir(self.directory):
            parsed = parse_segment_name(name)
            if parsed is not None:
                found.append(parsed)
        return sorted(found)

    def path(self, segment: int, generation: int) -> Path:
        return self.directory / segment_name(segment, generation)

    def read(self, segment: int, generation: int, offset: int, length: int) -> bytes:
        key = (segment, generation)
        fd = self._read_fds.get(key)
        if fd is None:
            try:
                fd = os.open(self.path(segment, generation), os.O_RDONLY)
            except FileNotFoundError:
                return b""
            self._read_fds[key] = fd
        return os.pread(fd, length, offset)

    def forget(self, segment: int, generation: int) -> None:
        """Close the read descriptor of a segment file (before it is removed)."""
        fd = self._read_fds.pop((segment, generation), None)
        if fd is not None:
            os.close(fd)

    def remove(self, segment: int, generation: int) -> None:
        self.forget(segment, generation)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path(segment, generation))

    def open_current(self, segment: int, valid_end: int | None) -> None:
        """Append to `segment` (generation 0) from `valid_end`, truncating anything after it;
        with valid_end None, create the segment fresh (header written and synced)."""
        path = self.path(segment, 0)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        if valid_end is None:
            header = encode_segment_header(segment, 0)
            os.ftruncate(fd, 0)
            os.pwrite(fd, header, 0)
            valid_end = len(header)
        else:
            os.ftruncate(fd, valid_end)
        os.fsync(fd)
        fsync_directory(self.directory)
        self._close_write()
        self._write_fd = fd
        self.current_segment = segment
        self.current_offset = valid_end

    def append_and_sync(self, data: bytes) -> None:
        """Write `data` at the end of the current segment and fdatasync it (runs in a thread)."""
        view = memoryview(data)
        offset = self.current_offset
        while view:
            written = os.pwrite(self._write_fd, view, offset)
            view = view[written:]
            offset += written
        os.fdatasync(self._write_fd)
        self.current_offset = offset

    def _close_write(self) -> None:
        if self._write_fd >= 0:
            os.close(self._write_fd)
            self._write_fd = -1

    def close(self) -> None:
        self._close_write()
        for fd in self._read_fds.values():
            os.close(fd)
        self._read_fds.clear()
