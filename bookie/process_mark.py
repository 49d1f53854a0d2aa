"""The process mark: which process last registered from a data directory, kept in the directory.

A bookie's registration names the process that made it (`BookieRecord.process_id`, new at every
start). A process starting on a data directory must know whether the registration it finds is
its dead predecessor's on this very directory (then it takes the id over at once) or another
process's that may be alive: a second process on a *copy* of the disk carries the same cookie
instance, so the cookie cannot tell them apart.

`DATA_DIR/PROCESS`, layout version 1, one JSON object: `{"layoutVersion": 1, "processId": "<hex>",
"host": "<hostname>", "dev": <st_dev of the data directory>, "ino": <its st_ino>}`, written to
`PROCESS.tmp`, fsynced, renamed over `PROCESS`, the directory fsynced (a crash leaves the old mark
or the new one).

The predecessor is provably gone when the mark names the registered process *and* this very
directory (same host, same device and inode: a copy of the directory, even with the mark in it,
is another inode), because the starting process holds the directory's lock (the storage engine's
`LOCK`), which no live process on it could have let go. Anything else (no mark, another process,
a copied or restored directory) is not proof, and the caller watches the registration for a
heartbeat timeout instead (`bookie.registration`).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

PROCESS_FILE = "PROCESS"
LAYOUT_VERSION = 1


@dataclass(frozen=True, slots=True)
class ProcessMark:
    process_id: str
    host: str
    dev: int
    ino: int

    def same_directory(self, data_dir: Path) -> bool:
        st = os.stat(data_dir)
        return (self.host, self.dev, self.ino) == (socket.gethostname(), st.st_dev, st.st_ino)


def read_mark(data_dir: Path) -> ProcessMark | None:
    """The mark in the directory; None if there is none or it cannot be read (no proof)."""
    try:
        raw = json.loads((data_dir / PROCESS_FILE).read_text())
        if int(raw.get("layoutVersion", 0)) != LAYOUT_VERSION:
            return None
        return ProcessMark(str(raw["processId"]), str(raw["host"]), int(raw["dev"]), int(raw["ino"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_mark(data_dir: Path, process_id: str) -> None:
    st = os.stat(data_dir)
    body = {"layoutVersion": LAYOUT_VERSION, "processId": process_id, "host": socket.gethostname(),
            "dev": st.st_dev, "ino": st.st_ino}  # fmt: skip
    tmp = data_dir / f"{PROCESS_FILE}.tmp"
    with open(tmp, "w") as f:
        f.write(json.dumps(body))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, data_dir / PROCESS_FILE)
    fd = os.open(data_dir, os.O_RDONLY)
    try:
        with contextlib.suppress(OSError):  # some file systems refuse a directory fsync
            os.fsync(fd)
    finally:
        os.close(fd)
