"""Disk and identity faults of bookies: slow, failing and lying disks through the bookie's
test-only disk shim (`bookie.storage.diskio`, QUIRE_TEST_DISK_FAULTS), bit rot between a kill and
a restart, the same bookie id started twice, and a bookie lost for good and replaced under a new id.

Every bookie of the campaign runs with its own control file (`<root>/<bookie>.disk-faults.json`);
empty, it changes nothing. The kinds:

- `slow-disk`: every fsync of one bookie delayed 0.2 to 4 s for 4 to 7 s (beyond the add
  timeout, writers replace it in their ensembles);
- `fsync-error`: its fsyncs fail with EIO until it stops (it must exit 70, never acknowledge what
  the failed fsync covered); then the control file is cleared and it is started again;
- `lost-write`: its next journal write reports done and writes nothing; it keeps serving 2 to 4 s
  (a read of what was lost must be answered CORRUPT, never served), then it is killed and
  started again. A bookie that finds the hole with intact records after it refuses to start
  (damage that is not a torn tail); the campaign then formats it, as an operator would;
- `power-loss`: its fsyncs slowed so that a group is written and not yet synced, `kill -9`, then
  every journal segment cut back to its last synced length plus a torn part of what followed (the
  rest zeroed, as unwritten blocks read), and started again;
- `bit-rot`: `kill -9`, one bit flipped in 1 to 3 stored entries (records the index checkpoint
  covers, so that they are found by reads, not by replay; when it covers none yet, the bookie is
  started and killed once more first, as its start writes one), started again: readers must get those
  entries from the other copy. The campaign then reads each rotten copy from that bookie (as a
  reader would: the bookie lists a copy it finds rotten, `bookie.scrubber`) until auto-recovery
  has rewritten it and it is served again, or a worker dropped it from the list because its
  segment had moved off that bookie meanwhile (the time is noted). A bit rot is a loss of copies
  until then: the next loss waits for the under-replicated list to empty, as after a wipe; a
  copy not repaired within the recovery timeout blocks every later loss (a second one would be
  beyond Qw=2);
- `twin-bookie`: a second process started under a running bookie's id, on another port, with an
  empty data directory or a copy of the first one's; the first must keep serving. What the
  second did (refused, with its exit status, or still running) is noted; it is then stopped;
- `replace-bookie`: a bookie killed, its disk wiped, and a new bookie under a new id (a new proxy)
  started in its place; the lost one never returns and is decommissioned over the admin API.

A fault that may end in a format (every kind above that kills a bookie, since a refused disk is
formatted) loses that bookie's copies, so it is injected only while no earlier loss waits for
re-replication, as a wipe is: a second loss of a ledger's copies is beyond Qw=2.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any, Protocol

import httpx

from bench.chaos.cluster import Cluster, control_file, shim_env
from bench.chaos.history import Fault, History
from bench.chaos.procs import Proc, quire_args
from bench.common import free_port
from bookie.errors import BookieError, ErrorCode
from bookie.replica_io import ReplicaIO
from bookie.storage.diskio import read_synced
from bookie.storage.index import read_checkpoint
from bookie.storage.records import ADD, RECORD_HEADER_SIZE, parse_segment_name, scan_segment

__all__ = [
    "DISK_KINDS", "MAY_LOSE_COPIES", "DiskFaults", "control_file", "power_loss_cut", "rot", "set_faults",
    "shim_env",
]  # fmt: skip

DISK_KINDS = (
    "slow-disk", "fsync-error", "lost-write", "power-loss", "bit-rot", "twin-bookie", "replace-bookie",
)  # fmt: skip
EXIT_CODE_DISK_FAILURE = 70


class Host(Protocol):
    """What the disk faults use of the fault schedule (`faults.Faults`)."""

    cluster: Cluster
    history: History
    rng: random.Random
    config: Any

    async def loss_allowed(self) -> bool: ...

    def wiped(self) -> None: ...


MAY_LOSE_COPIES = frozenset({"replace-bookie", "fsync-error", "lost-write", "power-loss", "bit-rot"})


def set_faults(control: Path, **settings: object) -> None:
    """Replace the control file at once (a rename: the shim sees a new version)."""
    tmp = control.with_suffix(".tmp")
    tmp.write_text(json.dumps(settings))
    os.replace(tmp, control)


def power_loss_cut(data_dir: Path, control: Path, rng: random.Random) -> tuple[int, int]:
    """Cut every journal segment the shim saw synced back to its last synced length, keeping a
    torn part (a random prefix) of the unsynced bytes after it and zeroing the rest. Returns
    (files cut, bytes lost)."""
    synced = read_synced(control)
    files = bytes_lost = 0
    for path in sorted((data_dir / "journal").glob("*.log")):
        length = synced.get(str(path))
        if length is None:
            continue
        data = path.read_bytes()
        tail = data[length:].rstrip(b"\0")
        if not tail:
            continue
        torn = rng.randrange(len(tail))  # never the whole unsynced tail
        with open(path, "r+b") as f:
            f.seek(length + torn)
            f.write(bytes(len(tail) - torn))
        files += 1
        bytes_lost += len(tail) - torn
    return files, bytes_lost


def rot(data_dir: Path, rng: random.Random, count: int) -> list[tuple[int, int]]:
    """Flip one bit in the payload of `count` stored entries the index checkpoint covers;
    (ledger, entry) of each."""
    checkpoint = read_checkpoint(data_dir / "index")
    if checkpoint is None:
        return []
    found: list[tuple[Path, int, int, int]] = []  # path, byte offset, ledger, entry
    for path in sorted((data_dir / "journal").glob("*.log")):
        parsed = parse_segment_name(path.name)
        if parsed is None or parsed[0] > checkpoint.segment:
            continue
        _, records = scan_segment(path)
        for rec in records:
            if parsed[0] == checkpoint.segment and rec.offset + rec.length > checkpoint.offset:
                break
            if rec.type == ADD and rec.payload:
                where = rec.offset + RECORD_HEADER_SIZE + rng.randrange(len(rec.payload))
                found.append((path, where, rec.ledger_id, rec.entry_id))
    out = []
    for path, where, ledger_id, entry_id in rng.sample(found, min(count, len(found))):
        with open(path, "r+b") as f:
            f.seek(where)
            byte = f.read(1)[0]
            f.seek(where)
            f.write(bytes([byte ^ (1 << rng.randrange(8))]))
        out.append((ledger_id, entry_id))
    return out


class DiskFaults:
    """The kinds above, for `Faults` (whose restart, wipe rule and generator they share)."""

    def __init__(self, faults: Host) -> None:
        self.faults = faults
        self.cluster = faults.cluster
        self.history = faults.history
        self.rng = faults.rng
        # Bookies holding a rotten copy that was not seen repaired: no more losses while any does;
        # a bookie formatted since took its rotten copies with it.
        self.rotten: set[str] = set()

    def _control(self, bookie: Proc) -> Path:
        return control_file(self.cluster.root, bookie.name)

    async def inject(self, kind: str) -> Fault | None:
        # A fault that may end in a format loses a copy: only when an earlier loss is repaired
        # (a second loss of a ledger's copies is beyond Qw=2, and not Quire's to survive).
        if kind in MAY_LOSE_COPIES and not await self.faults.loss_allowed():
            return None
        candidates = list(self.cluster.bookies)
        if kind == "replace-bookie" and self.cluster.tmpfs is not None:
            candidates = candidates[1:]  # the tmpfs bookie stays: fill-disk needs it
        bookie = self.rng.choice(candidates)
        fault = Fault(kind, bookie.name, time.time())
        self.history.faults.append(fault)
        action = {
            "slow-disk": self._slow,
            "fsync-error": self._fsync_error,
            "lost-write": self._lost_write,
            "power-loss": self._power_loss,
            "bit-rot": self._bit_rot,
            "twin-bookie": self._twin,
            "replace-bookie": self._replace,
        }[kind]
        await action(bookie, fault)
        return fault

    async def _slow(self, bookie: Proc, fault: Fault) -> None:
        delay_ms = int(self.rng.uniform(200, 4000))
        hold = self.rng.uniform(4.0, 7.0)
        fault.detail = f"fsync +{delay_ms} ms for {hold:.1f} s"
        set_faults(self._control(bookie), fsync_delay_ms=delay_ms)
        await asyncio.sleep(hold)
        set_faults(self._control(bookie))

    async def _fsync_error(self, bookie: Proc, fault: Fault) -> None:
        set_faults(self._control(bookie), fsync_error=True)
        deadline = time.monotonic() + 15
        while bookie.alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        code = None if bookie.popen is None else bookie.popen.poll()
        fault.detail = f"fsyncs fail (EIO); it exited {code}"
        if code != EXIT_CODE_DISK_FAILURE:
            self.history.note(f"fsync-error: {bookie.name} exited {code}, not {EXIT_CODE_DISK_FAILURE}")
        bookie.kill9()
        set_faults(self._control(bookie))
        await self._start_or_format(bookie, fault)

    async def _lost_write(self, bookie: Proc, fault: Fault) -> None:
        hold = self.rng.uniform(2.0, 4.0)
        set_faults(self._control(bookie), lose_writes=1)
        await asyncio.sleep(hold)
        bookie.kill9()
        set_faults(self._control(bookie))
        fault.detail = f"one journal write lost, served {hold:.1f} s, killed"
        await self._start_or_format(bookie, fault)

    async def _power_loss(self, bookie: Proc, fault: Fault) -> None:
        set_faults(self._control(bookie), fsync_delay_ms=4000)
        await asyncio.sleep(self.rng.uniform(1.5, 3.0))  # a group written, waiting for its sync
        bookie.kill9()
        set_faults(self._control(bookie))
        files, lost = await asyncio.to_thread(
            power_loss_cut, self.cluster.data_dir(bookie), self._control(bookie), self.rng
        )
        fault.detail = f"killed, {lost} unsynced bytes lost in {files} segments (torn)"
        await self._start_or_format(bookie, fault)

    async def _bit_rot(self, bookie: Proc, fault: Fault) -> None:
        bookie.kill9()
        count = self.rng.randint(1, 3)
        rotten = await asyncio.to_thread(rot, self.cluster.data_dir(bookie), self.rng, count)
        if not rotten:  # its checkpoint covers nothing yet: a start writes one over what it holds
            await self.cluster.restart(bookie, self.faults.config.recovery_timeout_s)
            bookie.kill9()
            rotten = await asyncio.to_thread(rot, self.cluster.data_dir(bookie), self.rng, count)
        if rotten:
            self.rotten.add(bookie.name)
        fault.detail = "rotten: " + (", ".join(f"{le[0]}:{le[1]}" for le in rotten) or "nothing to rot")
        await self._start_or_format(bookie, fault)
        if bookie.name not in self.rotten:
            return  # refused its disk and formatted: its rotten copies went with it
        self.faults.wiped()  # the next loss waits for the repair (the list empties)
        took = await self._repaired(bookie, rotten, self.faults.config.recovery_timeout_s)
        if took is None:
            fault.detail += "; NOT repaired within the recovery timeout"
            self.history.note(f"bit-rot: a rotten copy on {bookie.name} was not repaired; no more losses")
        else:
            fault.detail += f"; repaired in place in {took:.1f} s"
            self.rotten.discard(bookie.name)

    async def _repaired(self, bookie: Proc, rotten: list[tuple[int, int]], timeout_s: float) -> float | None:
        """Read each rotten copy from the bookie (a CORRUPT answer lists it for repair) until each
        is served again, gone with its ledger, or was seen listed and then dropped from the list
        by a worker (rewritten, or its segment moved off the bookie meanwhile: then it is no copy
        the ledger counts). The seconds it took; None after the timeout."""
        started = time.monotonic()
        left = set(rotten)
        seen_listed: set[int] = set()
        bookie_id = self.cluster.bookie_id(bookie)
        io = ReplicaIO()
        try:
            while left and time.monotonic() - started < timeout_s:
                for ledger_id, entry_id in sorted(left):
                    try:
                        await io.read_entry(f"{bookie.host}:{bookie.port}", ledger_id, entry_id)
                    except BookieError as exc:
                        if exc.code != ErrorCode.NO_SUCH_LEDGER:
                            continue  # still rotten (or the bookie is busy): read it again
                    left.discard((ledger_id, entry_id))  # served again, or deleted with its ledger
                listed = await self._listed(bookie_id)
                if listed is not None:
                    seen_listed |= {lid for lid, _ in left} & listed
                    left = {(lid, e) for lid, e in left if lid not in seen_listed or lid in listed}
                if left:
                    await asyncio.sleep(0.5)
        finally:
            await io.close()
        return None if left else time.monotonic() - started

    async def _listed(self, bookie_id: str) -> set[int] | None:
        """The ledgers the under-replicated list names `bookie_id` for; None if no broker answers."""
        for url in self.cluster.urls:
            try:
                r = await self.cluster.http.get(f"{url}/admin/v2/bookies/underreplicated")
                if r.status_code == 200:
                    rows = r.json()["ledgers"]
                    return {int(row["ledgerId"]) for row in rows if bookie_id in row["missingReplicas"]}
            except (httpx.HTTPError, ValueError, KeyError):
                continue
        return None

    async def _start_or_format(self, bookie: Proc, fault: Fault) -> None:
        """Start it again; one that refuses its disk (damage that is not a torn tail) is formatted
        as a new instance, as an operator would, and its copies are re-replicated."""
        try:
            await self.cluster.restart(bookie, self.faults.config.recovery_timeout_s)
        except (RuntimeError, TimeoutError) as exc:
            bookie.kill9()
            refused = "not a torn tail" in str(exc)
            self.history.note(
                f"{fault.kind}: {bookie.name} refused to start"
                f"{' (damage that is not a torn tail)' if refused else ''}: formatted as a new instance"
            )
            fault.detail += "; refused to start, formatted"
            await asyncio.to_thread(self.cluster.wipe, bookie)
            await self.cluster.restart(bookie, self.faults.config.recovery_timeout_s, "--format")
            self.rotten.discard(bookie.name)
            self.faults.wiped()
        self.history.restarts["bookie"] += 1

    async def _twin(self, bookie: Proc, fault: Fault) -> None:
        copy = self.rng.random() < 0.5
        name = f"{bookie.name}-twin"
        data = self.cluster.root / name
        shutil.rmtree(data, ignore_errors=True)
        if copy:
            await asyncio.to_thread(shutil.copytree, self.cluster.data_dir(bookie), data)
        else:
            data.mkdir()
        port = free_port()
        args = self.cluster.in_namespace(
            bookie, quire_args("bookie", "--data-dir", str(data), "--port", str(port))
        )
        twin = Proc(name, args, bookie.env, self.cluster.root / f"{name}.log", port, host=bookie.host)
        twin.start()
        watch = 3 * self.cluster.config.setting("QUIRE_BOOKIE_HEARTBEAT_TIMEOUT_MS") / 1000
        deadline = time.monotonic() + watch
        while twin.alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        code = None if twin.popen is None else twin.popen.poll()
        what = "a copy of its data" if copy else "an empty data directory"
        outcome = f"refused (exit {code})" if code is not None else f"still running after {watch:g} s"
        fault.detail = f"twin on {what}: {outcome}; the first {'runs' if bookie.alive() else 'DIED'}"
        if code is None or not bookie.alive():
            self.history.note(f"twin-bookie: a second {bookie.name} on {what} was {outcome}")
        await asyncio.to_thread(twin.terminate)
        shutil.rmtree(data, ignore_errors=True)

    async def _replace(self, bookie: Proc, fault: Fault) -> None:
        lost_id = self.cluster.bookie_id(bookie)
        bookie.kill9()
        await asyncio.to_thread(self.cluster.wipe, bookie)
        await self.cluster.retire(bookie)
        new = await self.cluster.add_bookie()
        await new.wait_port(self.faults.config.recovery_timeout_s)
        status = await self.cluster.decommission(lost_id)
        new_id = self.cluster.bookie_id(new)
        fault.detail = f"{lost_id} lost for good, {new.name} ({new_id}) in its place, decommission {status}"
        self.faults.wiped()
