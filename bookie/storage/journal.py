"""The segment files of the log: which exist, the one being appended to, and reads by offset.

Formats are in `bookie.storage.records`. This module does file work only; the engine decides
what to write and when. Write order for a group: reserve its space, pwrite the whole group,
fdatasync, and only then may the engine index the records and acknowledge the adds.

Space is reserved before it is written, so that a full disk is a refusal and never a failed write:
the current segment is preallocated (`posix_fallocate`, which reads back as zeros) ahead of its
data, a chunk at a time (`PREALLOCATE_CHUNK_BYTES`, BookKeeper's journal preallocation size), never
past `reserve_bytes`; a group that would pass the reserved end extends the reservation first, always
keeping `margin_bytes` reserved beyond its own end so that the small fence and delete records still
fit once the disk is full. Preallocating a whole segment at once would cost every bookie its full
segment size on disk from its first add. A reservation that fails for want of space raises
`DiskFullError` and nothing of the group is written. The zeroed tail after the last record is the
end of the log (a zeroed region never decodes as a record). When a segment is sealed, its file is
cut back to its data, so a sealed segment's size is the size of its records.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
from pathlib import Path

from bookie.storage import diskio
from bookie.storage.index import fsync_directory
from bookie.storage.records import encode_segment_header, parse_segment_name, segment_name
from common.errors import ErrorKind, QuireError

log = logging.getLogger(__name__)

PREALLOCATE_CHUNK_BYTES = 16 * 1024**2

_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


class DiskFullError(QuireError):
    """The filesystem has no room for a reservation or a write: nothing was written (the engine
    turns the bookie read-only; a client sees READ_ONLY)."""

    kind = ErrorKind.unavailable
    title = "Bookie disk full"


def is_no_space(exc: OSError) -> bool:
    return exc.errno in _NO_SPACE


class SegmentFiles:
    """Open read descriptors of every segment file, and the append descriptor of the current one."""

    def __init__(self, directory: Path, reserve_bytes: int = 0, margin_bytes: int = 0) -> None:
        self.directory = directory
        self.reserve_bytes = reserve_bytes  # a segment is never preallocated past this size
        self.margin_bytes = margin_bytes  # kept reserved beyond the data: room for markers
        self._preallocate = reserve_bytes > 0
        self._read_fds: dict[tuple[int, int], int] = {}
        self.current_segment = 0
        self.current_offset = 0
        self.reserved_end = 0  # the current segment may be written up to here without ENOSPC
        self._write_fd = -1
        self.last_sync_s = 0.0  # how long the last append_and_sync's fdatasync took

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

    def open_current(self, segment: int, valid_end: int | None) -> bool:
        """At start: append to `segment` (generation 0) from `valid_end`, cutting anything after
        it; with valid_end None, create the segment fresh (header written and synced).

        Returns whether its space could be reserved: a full disk must not stop the start (the
        bookie then starts read-only and serves reads)."""
        path = self.path(segment, 0)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            if valid_end is None:
                header = encode_segment_header(segment, 0)
                diskio.ftruncate(fd, 0)
                diskio.pwrite(fd, header, 0)
                valid_end = len(header)
            else:
                diskio.ftruncate(fd, valid_end)  # what follows is torn or garbled: never acknowledged
            reserved = True
            try:
                reserved_end = self._reserve(fd, valid_end, self._ahead_of(valid_end))
            except DiskFullError:
                reserved, reserved_end = False, valid_end
            diskio.fsync(fd)
            fsync_directory(self.directory)
        except BaseException:
            os.close(fd)
            raise
        self._switch_to(fd, segment, valid_end, reserved_end)
        return reserved

    def roll(self, segment: int) -> None:
        """Seal the current segment and create `segment` as the new current one.

        The new file is fully reserved before anything switches: on DiskFullError it is
        removed again and the current segment stays current."""
        path = self.path(segment, 0)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            header = encode_segment_header(segment, 0)
            diskio.pwrite(fd, header, 0)
            reserved_end = self._reserve(fd, len(header), self._ahead_of(len(header)))
            diskio.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            raise
        if self._write_fd >= 0:
            # Sealed: give back the unused reservation, so its file holds only its records.
            diskio.ftruncate(self._write_fd, self.current_offset)
            diskio.fsync(self._write_fd)
        fsync_directory(self.directory)
        self._switch_to(fd, segment, len(header), reserved_end)

    def _switch_to(self, fd: int, segment: int, offset: int, reserved_end: int) -> None:
        assert segment >= 1 and offset >= len(encode_segment_header(segment, 0)) and reserved_end >= offset
        self._close_write()
        self._write_fd = fd
        self.current_segment = segment
        self.current_offset = offset
        self.reserved_end = reserved_end

    def _ahead_of(self, end: int) -> int:
        """Where to reserve to when the data reaches `end`: a chunk ahead (capped at the segment's
        reserve size), and never less than the margin past `end`."""
        return max(min(end + PREALLOCATE_CHUNK_BYTES, self.reserve_bytes), end + self.margin_bytes)

    def _reserve(self, fd: int, start: int, end: int) -> int:
        """Allocate [start, end) of the file; returns the new reserved end (runs in a thread)."""
        if not self._preallocate or end <= start:
            return max(start, end) if self._preallocate else 2**63
        try:
            os.posix_fallocate(fd, start, end - start)
        except OSError as exc:
            if is_no_space(exc):
                raise DiskFullError(f"no space to reserve {end - start} bytes of the journal") from exc
            # A filesystem without preallocation: writes are still safe, only not reserved ahead.
            log.warning("journal preallocation unsupported here (%s): writing without it", exc)
            self._preallocate = False
            return 2**63
        return end

    def append_and_sync(self, data: bytes) -> None:
        """Write `data` at the end of the current segment and fdatasync it (runs in a thread).

        Raises DiskFullError, with nothing acknowledged, when its space cannot be reserved."""
        view = memoryview(data)
        offset = self.current_offset
        end = offset + len(data)
        if end > self.reserved_end:
            self.reserved_end = self._reserve(self._write_fd, self.reserved_end, self._ahead_of(end))
        try:
            while view:
                written = diskio.pwrite(self._write_fd, view, offset)
                assert written > 0, "pwrite makes progress or raises"
                view = view[written:]
                offset += written
        except OSError as exc:
            if is_no_space(exc):  # nothing was synced: the next group writes over these bytes
                raise DiskFullError(f"no space to write {len(data)} bytes of the journal") from exc
            raise
        started = time.perf_counter()
        diskio.fdatasync(self._write_fd)
        self.last_sync_s = time.perf_counter() - started
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
