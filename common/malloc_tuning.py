"""Fixed glibc malloc thresholds for the server processes (bookie, broker, standalone).

Quire's data path allocates buffers of 100 kB to tens of MB per request (a produced batch, the
entry built from it, a bookie frame, a Fetch response). glibc serves an allocation above its
mmap threshold with a fresh mmap, and gives the top of its heap back to the system once more
than its trim threshold is free there. Both thresholds start at 128 kB and only creep up as
large blocks are freed (to the size freed, and twice that), so such buffers kept coming from
memory just handed back: page faults and zeroing by the kernel for every byte, several times
per request.

`tune()` fixes the mmap threshold at 32 MiB (glibc's own ceiling for the dynamic one) and the
trim threshold at 128 MiB: buffers below 32 MiB are reused from the heap, and a process keeps
at most about 128 MiB of freed heap before returning it. An operator's own MALLOC_MMAP_THRESHOLD_
or MALLOC_TRIM_THRESHOLD_ environment variable wins (nothing is changed then), and so does a
C library other than glibc (nothing to change).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
TRIM_THRESHOLD_BYTES = 128 * 1024 * 1024
_M_TRIM_THRESHOLD = -1  # mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
_ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")


def tune() -> bool:
    """Set the thresholds; True when they were set."""
    if any(name in os.environ for name in _ENV):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    trim = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    mmap = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    return bool(trim and mmap)  # mallopt returns 1 on success
