"""The storage engine's settings, and the space it keeps in reserve against a full disk."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bookie.storage.records import MAX_PAYLOAD_BYTES

_MAX_SEGMENT_BYTES = 2**32 - 1  # record offsets are u32 in index slots

# Reserved past `journal_max_size_bytes` in every segment: room for the fences and deletes a
# read-only bookie still takes (deleting is how a full disk is freed) and for the last group.
MARKER_RESERVE_BYTES = 256 * 1024
# Free space a group of adds needs beside the journal: their index slots and the checkpoints.
INDEX_RESERVE_BYTES = 1024 * 1024
# How often a bookie made read-only by a full disk measures again whether it has room.
DISK_FULL_RECHECK_S = 1.0


@dataclass(frozen=True)
class StorageConfig:
    data_dir: Path
    journal_max_size_bytes: int = 256 * 1024**2
    disk_usage_high_water: float = 0.95
    disk_usage_low_water: float = 0.90
    disk_check_interval_s: float = 10.0
    gc_interval_s: float = 60.0
    gc_max_live_fraction: float = 0.5  # rewrite a sealed segment when less than this is live
    index_max_open_files: int = 256

    def __post_init__(self) -> None:
        if not 4096 <= self.journal_max_size_bytes <= _MAX_SEGMENT_BYTES - MAX_PAYLOAD_BYTES:
            raise ValueError("journal_max_size_bytes must be between 4 KiB and 4 GiB - 64 MiB")
