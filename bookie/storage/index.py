"""The entry index: (ledger, entry) -> where the record sits in the log, kept on disk.

Derived data: it can always be rebuilt by replaying every segment in order, and it is rebuilt
when the checkpoint is missing or damaged or an index file fails its checks at start. Memory
does not grow with the data stored: slots live in one file per ledger and are read with
`os.pread`; only a bounded cache of open file descriptors is kept.

Index file `index/{ledger:016x}.idx`, format version 1, little endian:

    header (16 bytes)
    offset 0   4 bytes  magic b"QIDX"
    offset 4   u16      format version (1)
    offset 6   u16      reserved, 0
    offset 8   u64      ledger id

    slot of entry e at offset 16 + 16 * e (16 bytes); all zero = no such entry
    offset 0   u32      segment number (>= 1)
    offset 4   u16      segment generation
    offset 6   u16      marker 0x5153 ("QS"): a slot that is neither zero nor marked is damage
    offset 8   u32      offset of the record in the segment file
    offset 12  u32      length of the whole record (header + payload)

Index files are written (not synced) after the journal fsync that covers their records, and
synced by a checkpoint. The checkpoint file `index/CHECKPOINT` says up to where the index
files are synced, so a restart replays only the log after it; it also carries every ledger's
state (fence flag, LAC, last entry id). Format version 1:

    offset 0   4 bytes  magic b"QCKP"
    offset 4   u16      format version (1)
    offset 6   u16      reserved, 0
    offset 8   u32      body length in bytes
    offset 12  u32      CRC32C of the body
    body:
    offset 0   u32      segment number replay starts in
    offset 4   u32      offset in that segment replay starts at
    offset 8   u32      number of ledgers N
    then N times 25 bytes: u64 ledger id, i64 last-add-confirmed, i64 last entry id,
                           u8 flags (bit 0 = fenced)

Written to `CHECKPOINT.tmp`, fsynced, renamed over `CHECKPOINT`, directory fsynced.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import google_crc32c

from bookie.storage import diskio
from common.errors import ErrorKind, QuireError

FORMAT_VERSION = 1
INDEX_MAGIC = b"QIDX"
INDEX_HEADER_FORMAT = "<4sHHQ"
INDEX_HEADER_SIZE = 16
INDEX_HEADER = struct.Struct(INDEX_HEADER_FORMAT)
SLOT_FORMAT = "<IHHII"
SLOT_SIZE = 16
# The highest entry id a ledger may hold: its slot lies 32 GiB into the (sparse) index file,
# which every common filesystem can address. A larger id (valid on the wire, an i64) is refused
# before it reaches the journal; it used to fail the index write and stop the bookie.
MAX_ENTRY_ID = 2**31 - 1
SLOT = struct.Struct(SLOT_FORMAT)
SLOT_MARKER = 0x5153
_ZERO_SLOT = bytes(SLOT_SIZE)

CHECKPOINT_MAGIC = b"QCKP"
CHECKPOINT_HEADER_FORMAT = "<4sHHII"
CHECKPOINT_HEADER_SIZE = 16
CHECKPOINT_HEADER = struct.Struct(CHECKPOINT_HEADER_FORMAT)
CHECKPOINT_BODY_FORMAT = "<III"
CHECKPOINT_BODY_SIZE = 12
CHECKPOINT_BODY = struct.Struct(CHECKPOINT_BODY_FORMAT)
CHECKPOINT_LEDGER_FORMAT = "<QqqB"
CHECKPOINT_LEDGER_SIZE = 25
CHECKPOINT_LEDGER = struct.Struct(CHECKPOINT_LEDGER_FORMAT)
CHECKPOINT_NAME = "CHECKPOINT"

# The sizes above are the ones the layout in this docstring promises: pin them to the formats.
assert struct.calcsize(INDEX_HEADER_FORMAT) == INDEX_HEADER_SIZE
assert struct.calcsize(SLOT_FORMAT) == SLOT_SIZE
assert struct.calcsize(CHECKPOINT_HEADER_FORMAT) == CHECKPOINT_HEADER_SIZE
assert struct.calcsize(CHECKPOINT_BODY_FORMAT) == CHECKPOINT_BODY_SIZE
assert struct.calcsize(CHECKPOINT_LEDGER_FORMAT) == CHECKPOINT_LEDGER_SIZE


class IndexDamagedError(QuireError):
    """An index file or slot failed its checks: the index must be rebuilt from the log."""

    kind = ErrorKind.internal


@dataclass(frozen=True, slots=True)
class Slot:
    segment: int
    generation: int
    offset: int
    length: int


@dataclass(slots=True)
class LedgerState:
    """What the bookie remembers of one ledger besides its entries."""

    last_add_confirmed: int = -1
    last_entry_id: int = -1
    fenced: bool = False


@dataclass(frozen=True, slots=True)
class Checkpoint:
    segment: int
    offset: int
    ledgers: dict[int, LedgerState]


def encode_slot(segment: int, generation: int, offset: int, length: int) -> bytes:
    assert segment >= 1 and length > 0, "a slot points at a real record"
    return SLOT.pack(segment, generation, SLOT_MARKER, offset, length)


class EntryIndex:
    """Per-ledger slot files under `directory`, with a bounded cache of open descriptors."""

    def __init__(self, directory: Path, max_open_files: int = 256) -> None:
        self.directory = directory
        self._max_open = max_open_files
        self._fds: OrderedDict[int, int] = OrderedDict()
        self.dirty: set[int] = set()  # ledgers written since the last checkpoint

    def path(self, ledger_id: int) -> Path:
        return self.directory / f"{ledger_id:016x}.idx"

    def _fd(self, ledger_id: int, create: bool) -> int | None:
        fd = self._fds.get(ledger_id)
        if fd is not None:
            self._fds.move_to_end(ledger_id)
            return fd
        path = self.path(ledger_id)
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            if not create:
                return None
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            diskio.pwrite(fd, INDEX_HEADER.pack(INDEX_MAGIC, FORMAT_VERSION, 0, ledger_id), 0)
        self._fds[ledger_id] = fd
        while len(self._fds) > self._max_open:
            # A dirty file stays in `dirty`: the checkpoint syncs it by path, through a new descriptor.
            _old_ledger, old_fd = self._fds.popitem(last=False)
            os.close(old_fd)
        return fd

    def write_slots(self, ledger_id: int, first_entry_id: int, slots: bytes) -> None:
        """Write consecutive slots starting at `first_entry_id` (one pwrite)."""
        assert first_entry_id >= 0 and len(slots) % SLOT_SIZE == 0, "whole slots of real entries"
        fd = self._fd(ledger_id, create=True)
        assert fd is not None
        diskio.pwrite(fd, slots, INDEX_HEADER_SIZE + first_entry_id * SLOT_SIZE)
        self.dirty.add(ledger_id)

    def lookup(self, ledger_id: int, entry_id: int) -> Slot | None:
        """The slot of an entry, None if absent. Raises IndexDamagedError on a damaged slot."""
        if entry_id < 0:
            return None
        fd = self._fd(ledger_id, create=False)
        if fd is None:
            return None
        raw = os.pread(fd, SLOT_SIZE, INDEX_HEADER_SIZE + entry_id * SLOT_SIZE)
        if len(raw) < SLOT_SIZE or raw == _ZERO_SLOT:
            return None
        segment, generation, marker, offset, length = SLOT.unpack(raw)
        if marker != SLOT_MARKER or segment == 0:
            raise IndexDamagedError(f"ledger {ledger_id} entry {entry_id}: damaged slot")
        return Slot(segment, generation, offset, length)

    def remove(self, ledger_id: int) -> None:
        fd = self._fds.pop(ledger_id, None)
        if fd is not None:
            os.close(fd)
        self.dirty.discard(ledger_id)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path(ledger_id))

    def check_file(self, ledger_id: int, last_entry_id: int) -> bool:
        """Whether the ledger's index file has a valid header and holds slots up to last_entry_id."""
        try:
            with open(self.path(ledger_id), "rb") as f:
                head = f.read(INDEX_HEADER_SIZE)
                size = os.fstat(f.fileno()).st_size
        except FileNotFoundError:
            return last_entry_id < 0
        if len(head) < INDEX_HEADER_SIZE:
            return False
        magic, version, _, stored_id = INDEX_HEADER.unpack(head)
        if magic != INDEX_MAGIC or version != FORMAT_VERSION or stored_id != ledger_id:
            return False
        return size >= INDEX_HEADER_SIZE + (last_entry_id + 1) * SLOT_SIZE

    def files(self) -> Iterable[int]:
        """Ledger ids that have an index file."""
        for name in os.listdir(self.directory):
            if name.endswith(".idx") and len(name) == 20:
                with contextlib.suppress(ValueError):
                    yield int(name[:16], 16)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def wipe(self) -> None:
        """Forget every index file and the checkpoint (before a full rebuild)."""
        self.close()
        self.dirty.clear()
        for name in os.listdir(self.directory):
            os.unlink(self.directory / name)


def write_checkpoint(directory: Path, checkpoint: Checkpoint) -> None:
    """Atomically replace the checkpoint file (write, fsync, rename, fsync the directory)."""
    parts = [CHECKPOINT_BODY.pack(checkpoint.segment, checkpoint.offset, len(checkpoint.ledgers))]
    for ledger_id, st in checkpoint.ledgers.items():
        parts.append(
            CHECKPOINT_LEDGER.pack(ledger_id, st.last_add_confirmed, st.last_entry_id, int(st.fenced))
        )
    body = b"".join(parts)
    head = CHECKPOINT_HEADER.pack(CHECKPOINT_MAGIC, FORMAT_VERSION, 0, len(body), google_crc32c.value(body))
    tmp = directory / (CHECKPOINT_NAME + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        diskio.write(fd, head + body)
        diskio.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, directory / CHECKPOINT_NAME)
    fsync_directory(directory)


def read_checkpoint(directory: Path) -> Checkpoint | None:
    """The checkpoint, or None if it is missing, torn or damaged."""
    try:
        data = (directory / CHECKPOINT_NAME).read_bytes()
    except FileNotFoundError:
        return None
    if len(data) < CHECKPOINT_HEADER_SIZE:
        return None
    magic, version, _, body_len, crc = CHECKPOINT_HEADER.unpack_from(data)
    body = data[CHECKPOINT_HEADER_SIZE:]
    if magic != CHECKPOINT_MAGIC or version != FORMAT_VERSION or len(body) != body_len:
        return None
    if google_crc32c.value(body) != crc or body_len < CHECKPOINT_BODY_SIZE:
        return None
    segment, offset, count = CHECKPOINT_BODY.unpack_from(body)
    if body_len != CHECKPOINT_BODY_SIZE + count * CHECKPOINT_LEDGER_SIZE:
        return None
    ledgers: dict[int, LedgerState] = {}
    for ledger_id, lac, last, flags in CHECKPOINT_LEDGER.iter_unpack(body[CHECKPOINT_BODY_SIZE:]):
        ledgers[ledger_id] = LedgerState(lac, last, bool(flags & 1))
    return Checkpoint(segment, offset, ledgers)


def sync_index_files(index: EntryIndex, ledgers: set[int]) -> None:
    """fsync the index files of `ledgers` through descriptors of our own (safe in a thread)."""
    for ledger_id in ledgers:
        try:
            fd = os.open(index.path(ledger_id), os.O_RDONLY)
        except FileNotFoundError:
            continue  # deleted meanwhile: nothing to keep
        try:
            diskio.fsync(fd)
        finally:
            os.close(fd)


class SlotRuns:
    """Collects index slots per ledger so consecutive entries cost one pwrite per run.

    The run extended last is remembered apart, so the common case of a group (the next entry
    of the same ledger) costs one comparison and one append."""

    def __init__(self, index: EntryIndex) -> None:
        self._index = index
        self._runs: dict[int, tuple[int, list[bytes]]] = {}  # ledger -> (first entry, slots)
        self._last_ledger = -1
        self._last_next = -1  # the entry id that would extend the last run
        self._last_slots: list[bytes] = []

    def add(self, ledger_id: int, entry_id: int, slot: bytes) -> None:
        if ledger_id == self._last_ledger and entry_id == self._last_next:
            self._last_slots.append(slot)
            self._last_next += 1
            return
        run = self._runs.get(ledger_id)
        if run is not None and run[0] + len(run[1]) == entry_id:
            slots = run[1]
            slots.append(slot)
        else:
            if run is not None:
                self.flush(ledger_id)
            slots = [slot]
            self._runs[ledger_id] = (entry_id, slots)
        self._last_ledger, self._last_next, self._last_slots = ledger_id, entry_id + 1, slots

    def flush(self, ledger_id: int) -> None:
        run = self._runs.pop(ledger_id, None)
        if ledger_id == self._last_ledger:
            self._last_ledger = -1
        if run is not None:
            first, slots = run
            self._index.write_slots(ledger_id, first, b"".join(slots))

    def flush_all(self) -> None:
        for ledger_id in list(self._runs):
            self.flush(ledger_id)

    def remove_ledger(self, ledger_id: int) -> None:
        """Drop the ledger's pending slots and its index file (the ledger was deleted)."""
        self._runs.pop(ledger_id, None)
        if ledger_id == self._last_ledger:
            self._last_ledger = -1
        self._index.remove(ledger_id)


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        diskio.fsync(fd)
    finally:
        os.close(fd)
