"""The bookie's cookie: proof that the disk it starts on is the disk it registered with.

On its first start a bookie writes a cookie (a fresh instance id, its bookie id, its data
directory) into the data directory, fsynced, and into the metadata store. On every later start
the two must agree. A store cookie with no disk cookie means the disk was wiped; a different
instance id means the disk was swapped or belongs to another bookie. Either way the bookie
would answer reads for entries it no longer holds and acknowledge a ledger's history it never
saw, so it refuses to start until an operator formats it as a new instance (BookKeeper's cookie
check). A disk cookie with no store cookie is adopted: the bookie ran before registration existed,
or the store was rebuilt.

The cookie file, `DATA_DIR/COOKIE`, layout version 1, is one JSON object:
`{"layoutVersion": 1, "bookieId": "host:port", "instanceId": "<uuid4>", "dataDir": "<absolute
path when written>", "createdMs": <ms since the epoch>}`. It is written to `COOKIE.tmp`, fsynced,
renamed over `COOKIE`, and the directory is fsynced, so a crash leaves the old cookie or the new
one, never half of one. A file without `layoutVersion` is read as version 1.

Formatting erases the journal and index (the entries of the old instance are not this
instance's) and writes a new cookie; ledgers that had copies there are short of one copy until
re-replicated. It runs with the data directory's lock held, so it never erases under a running
bookie.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from bookie.registry import BookieCookie, BookieDirectory, wall_clock_ms
from bookie.storage.dir_lock import DirectoryInUseError, DirectoryLock
from common.errors import ErrorKind, QuireError

log = logging.getLogger(__name__)

COOKIE_FILE = "COOKIE"
LAYOUT_VERSION = 1
DATA_SUBDIRS = ("journal", "index")  # what formatting erases: the storage engine's files
FORMAT_HINT = "start it once with `quire bookie --format` to register it as a new, empty bookie"


class CookieMismatchError(QuireError):
    """The disk is not the one this bookie registered with; an operator must decide."""

    kind = ErrorKind.conflict
    title = "Bookie cookie mismatch"


def read_disk_cookie(data_dir: Path) -> BookieCookie | None:
    path = data_dir / COOKIE_FILE
    try:
        raw = json.loads(path.read_text())
        layout = int(raw.get("layoutVersion", LAYOUT_VERSION))
        if layout != LAYOUT_VERSION:
            raise CookieMismatchError(
                f"the cookie file {path} has layout version {layout}; this Quire reads {LAYOUT_VERSION}"
            )
        return BookieCookie(
            bookie_id=str(raw["bookieId"]),
            instance_id=str(raw["instanceId"]),
            data_dir=str(raw["dataDir"]),
            created_ms=int(raw.get("createdMs", 0)),
        )
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise CookieMismatchError(f"the cookie file {path} is unreadable ({exc}); {FORMAT_HINT}") from exc


def write_disk_cookie(data_dir: Path, cookie: BookieCookie) -> None:
    """Write the cookie file durably: a temporary file, fsync, rename, fsync of the directory."""
    body = {
        "layoutVersion": LAYOUT_VERSION,
        "bookieId": cookie.bookie_id,
        "instanceId": cookie.instance_id,
        "dataDir": cookie.data_dir,
        "createdMs": cookie.created_ms,
    }
    tmp = data_dir / (COOKIE_FILE + ".tmp")
    with open(tmp, "w") as f:
        f.write(json.dumps(body, indent=1) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, data_dir / COOKIE_FILE)
    _sync_dir(data_dir)


def _sync_dir(data_dir: Path) -> None:
    dir_fd = os.open(data_dir, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def mismatch(bookie_id: str, disk: BookieCookie | None, stored: BookieCookie | None) -> str | None:
    """Why this disk may not serve as `bookie_id`, or None when it may."""
    if disk is not None and disk.bookie_id != bookie_id:
        return (
            f"the data directory belongs to bookie {disk.bookie_id}, not {bookie_id} "
            f"(instance {disk.instance_id}); {FORMAT_HINT}"
        )
    if stored is None:
        return None
    if disk is None:
        return (
            f"bookie {bookie_id} is registered as instance {stored.instance_id} (data directory "
            f"{stored.data_dir}) but its data directory has no cookie: the disk was wiped or "
            f"replaced, and the entries it held are gone; {FORMAT_HINT}"
        )
    if disk.instance_id != stored.instance_id:
        return (
            f"bookie {bookie_id} is registered as instance {stored.instance_id} but its data "
            f"directory holds instance {disk.instance_id}: the disk was swapped; {FORMAT_HINT}"
        )
    return None


@contextlib.contextmanager
def _locked(data_dir: Path) -> Iterator[None]:
    """The storage engine's directory lock, held while the cookie is checked or formatted."""
    lock = DirectoryLock(data_dir)
    try:
        lock.acquire()
    except DirectoryInUseError as exc:
        raise CookieMismatchError(str(exc)) from exc
    try:
        yield
    finally:
        lock.release()


def establish_cookie(
    directory: BookieDirectory,
    bookie_id: str,
    data_dir: Path,
    *,
    format_disk: bool = False,
    clock_ms: Callable[[], int] = wall_clock_ms,
) -> BookieCookie:
    """Check (or create, adopt, or with `format_disk` replace) the cookie; return the one in force.

    Raises CookieMismatchError, with what happened and what to do, when the disk does not match.
    """
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    with _locked(data_dir):
        disk = read_disk_cookie(data_dir) if not format_disk else None
        stored = directory.get_bookie_cookie(bookie_id)
        if format_disk:
            return _format(directory, bookie_id, data_dir, stored, clock_ms())
        problem = mismatch(bookie_id, disk, stored)
        if problem is not None:
            raise CookieMismatchError(problem)
        if disk is None:
            cookie = BookieCookie(bookie_id, str(uuid.uuid4()), str(data_dir), clock_ms())
            write_disk_cookie(data_dir, cookie)
            log.info("bookie %s: new instance %s, cookie written", bookie_id, cookie.instance_id)
            return directory.put_bookie_cookie(cookie)
        if disk.data_dir != str(data_dir):
            # A disk may be mounted elsewhere; its cookie still proves which instance it is.
            log.warning("bookie %s: cookie written in %s, now in %s", bookie_id, disk.data_dir, data_dir)
        if stored is None:
            log.info("bookie %s: adopting the cookie on disk (instance %s)", bookie_id, disk.instance_id)
            return directory.put_bookie_cookie(disk)
        return stored


def _format(
    directory: BookieDirectory, bookie_id: str, data_dir: Path, stored: BookieCookie | None, now_ms: int
) -> BookieCookie:
    """Erase the old instance's entries and register the disk as a new instance. The old cookie
    goes first (durably): a format that dies part way leaves a disk without a cookie, which the
    store's cookie refuses at the next start (until formatted again), never the old cookie over
    erased data, which would be served as the old instance."""
    if (data_dir / COOKIE_FILE).exists():
        (data_dir / COOKIE_FILE).unlink()
        _sync_dir(data_dir)
    for name in DATA_SUBDIRS:
        if (data_dir / name).exists():
            shutil.rmtree(data_dir / name)
            log.warning("bookie %s: formatting: erased %s", bookie_id, data_dir / name)
    cookie = BookieCookie(bookie_id, str(uuid.uuid4()), str(data_dir), now_ms)
    write_disk_cookie(data_dir, cookie)
    version = 0 if stored is None else stored.version
    saved = directory.put_bookie_cookie(replace(cookie, version=version))
    log.warning("bookie %s: formatted as new instance %s", bookie_id, cookie.instance_id)
    return saved
