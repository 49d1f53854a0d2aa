"""The fault schedule: one fault (or one pair of overlapping faults) at a time, each followed by a
wait until the cluster is healthy again and a pause.

Kinds are drawn in rounds (`schedule.py`): every round runs every enabled kind once, in a seeded
shuffle, a compound's parts counting for their kinds; a kind that must wait (a loss of copies
before the last one is re-replicated) is put off and runs as soon as it may, before any other
kind runs again. So a short campaign gets each kind once and a long one each kind as many times
as it has rounds. Each fault is recorded as a `Fault` from
the moment it is injected to the moment the cluster is healthy again (every process running,
every broker ready, every bookie writable).

- `kill-*`: kill -9 of the process group, down for a moment, started again (same port, same
  data directory);
- `pause-*`: SIGSTOP for longer than what the others wait before giving up on it (a broker's
  lease, a bookie's heartbeat timeout and add timeout, a compaction run's lease), then SIGCONT;
- `wipe-bookie`: kill -9, the bookie's data directory emptied, down long enough for the auditor
  to count it lost, then `quire bookie --format` (a new instance on the same address). While
  ledgers still lack copies from an earlier wipe, a wipe is skipped: a second loss before
  re-replication is beyond what a write quorum of 2 promises, not a bug;
- `stop-postgres`: fast or immediate shutdown of the private server, down a few seconds, started;
- `fill-disk`: the tmpfs bookie's disk filled to the last few hundred KiB by a file, held, freed;
- `pause-postgres`: the PostgreSQL server's process group stopped (SIGSTOP) for longer than a
  broker lease, then continued: statements land late instead of failing;
- `kill-autorecovery`, `pause-autorecovery`: the auditor and recovery worker, killed or stopped
  past its claim on a ledger;
- network faults through the links' proxies (`proxy.py`): `partition-bookie` (every client cut
  off from one bookie, which still heartbeats), `one-way-bookie` (requests reach it, replies are
  lost), `partition-store` (one broker cut off from PostgreSQL past its lease), `hold-store` (one
  broker's PostgreSQL replies held past its lease, then delivered: a renewal that lands late),
  `one-way-store` (its statements run, their answers are lost: commits whose outcome is unknown);
- `skew-broker`, `skew-bookie`: the process restarted with its wall clock ahead or behind by
  several leases (`QUIRE_TEST_CLOCK_OFFSET_MS`), kept so for a while, then restarted true;
- disk and identity faults of bookies (`disk_faults.py`): `slow-disk`, `fsync-error`,
  `lost-write`, `power-loss`, `bit-rot`, `twin-bookie`, `replace-bookie`;
- compound faults (`COMPOUND`): two of the above overlapping, the second injected a moment after
  the first on another process (a wipe while another bookie is down, a broker killed while a
  bookie is cut off, a broker killed while PostgreSQL is stalled).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections import Counter
from dataclasses import dataclass
from typing import Protocol

from bench.chaos.cluster import Cluster
from bench.chaos.disk_faults import DISK_KINDS, MAY_LOSE_COPIES, DiskFaults
from bench.chaos.history import Fault, History
from bench.chaos.procs import Proc
from bench.chaos.proxy import Proxy
from bench.chaos.schedule import Schedule

SINGLE = (
    "kill-bookie", "kill-broker", "kill-compactor", "pause-bookie", "pause-broker", "pause-compactor",
    "wipe-bookie", "stop-postgres", "fill-disk", "pause-postgres", "kill-autorecovery",
    "pause-autorecovery", "partition-bookie", "one-way-bookie", "partition-store", "hold-store",
    "one-way-store", "skew-broker", "skew-bookie", *DISK_KINDS,
)  # fmt: skip
COMPOUND = ("wipe-bookie+kill-bookie", "kill-broker+partition-bookie", "kill-broker+pause-postgres")
KINDS = (*SINGLE, *COMPOUND)
CLOCK_OFFSET_ENV = "QUIRE_TEST_CLOCK_OFFSET_MS"
FILL_LEAVE_BYTES = 256 * 1024
LINK_ACTIONS = ("partition", "one-way", "hold")
LOSES_COPIES = frozenset({"wipe-bookie", *MAY_LOSE_COPIES})  # each waits for the last loss's repair


class Database(Protocol):
    can_stop: bool

    async def start(self) -> None: ...

    def stop(self, immediate: bool) -> None: ...


@dataclass(frozen=True)
class FaultConfig:
    # Short enough that a 900 s campaign runs every kind three times (docs/chaos.md, "Runs"), long
    # enough that each still outlasts what it tests: a pause or a cut outlasts the lease or timeout
    # that others wait (`hold_factor` times it), a skewed clock a few leases.
    gap_s: tuple[float, float] = (0.5, 1.5)  # pause after the cluster is healthy again
    down_s: tuple[float, float] = (0.5, 2.0)  # how long a killed process stays dead
    hold_factor: tuple[float, float] = (1.2, 1.6)  # a pause or a cut, in what others wait for it
    skew_kept_s: tuple[float, float] = (4.0, 7.0)  # how long a skewed clock is kept
    recovery_timeout_s: float = 120.0
    first_fault_after_s: float = 5.0
    kinds: tuple[str, ...] = KINDS  # the kinds to draw from (`--kinds`)
    in_order: bool = False  # the first round in the order of `kinds` (`--in-order`)


class Faults:
    def __init__(
        self, cluster: Cluster, database: Database, history: History, seed: int, config: FaultConfig
    ) -> None:
        self.cluster = cluster
        self.database = database
        self.history = history
        self.rng = random.Random(f"{seed}:faults")
        self.config = config
        unknown = set(config.kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; the kinds are {', '.join(KINDS)}")
        self.kinds = list(config.kinds)
        if not database.can_stop:
            for kind in ("stop-postgres", "pause-postgres", "kill-broker+pause-postgres"):
                if kind in self.kinds:
                    self.kinds.remove(kind)
            reason = getattr(database, "reason", "shared server")
            history.skipped.append(f"stop-postgres, pause-postgres: {reason}")
        if cluster.tmpfs is None and "fill-disk" in self.kinds:
            self.kinds.remove("fill-disk")
            history.skipped.append(f"fill-disk: {cluster.tmpfs_refused}")
        self._wiped_unrecovered = False
        self.disk = DiskFaults(self)
        self.schedule = Schedule(self.kinds, random.Random(f"{seed}:schedule"), config.in_order)
        self.rounds = 0

    async def run(self, stop: asyncio.Event) -> None:
        """Faults until `stop` is set; a fault in progress is always seen through to recovery."""
        await _sleep_unless(stop, self.config.first_fault_after_s)
        blocked: set[str] = set()  # kinds that could not run since the last fault that did
        while not stop.is_set():
            counts = Counter(f.kind for f in self.history.faults if f.injected)
            kind = self.schedule.next(counts, blocked)
            if kind is None:  # every kind waits for re-replication: wait a moment, try them again
                blocked.clear()
                await _sleep_unless(stop, 1.0)
                continue
            fault = await self._inject(kind) if await self.allowed(kind) else None
            if fault is None:
                blocked.add(kind)
                continue
            blocked.clear()
            reason = await self.cluster.wait_healthy(self.config.recovery_timeout_s)
            fault.ended = time.time()
            took = fault.ended - fault.started
            at = time.strftime("%H:%M:%S", time.localtime(fault.started))
            print(
                f"chaos: {at} {kind} {fault.target} {fault.detail} — healthy after {took:.1f} s", flush=True
            )
            if reason:
                self.history.note(f"not healthy {self.config.recovery_timeout_s:g} s after {kind}: {reason}")
            self._round_done()
            await _sleep_unless(stop, self.rng.uniform(*self.config.gap_s))

    def _round_done(self) -> None:
        """Say so when every kind has run one more time."""
        counts = Counter(f.kind for f in self.history.faults if f.injected)
        fewest = min(counts[k] for k in self.kinds)
        if fewest > self.rounds:
            self.rounds = fewest
            print(f"chaos: round {fewest} done: every kind ran at least {fewest} times", flush=True)

    async def allowed(self, kind: str) -> bool:
        """Whether `kind` may run now: one that may lose a bookie's copies (a compound with such a
        part too) waits until an earlier loss is re-replicated."""
        if not LOSES_COPIES & set(kind.split("+")):
            return True
        return await self.loss_allowed()

    async def _inject(self, kind: str, exclude: Proc | None = None) -> Fault | None:
        if "+" in kind:
            return await self._compound(kind)
        if kind in DISK_KINDS:
            return await self.disk.inject(kind)
        action, _, role = kind.rpartition("-")
        if kind == "wipe-bookie" and not await self.loss_allowed():
            return None
        target = self._target(role, exclude)
        fault = Fault(kind, target.name if target else "postgres", time.time())
        self.history.faults.append(fault)
        if action in LINK_ACTIONS:
            assert target is not None
            await self._link(target, action, fault)
        elif action == "skew":
            assert target is not None
            await self._skew(target, role, fault)
        elif kind == "pause-postgres":
            await self._pause_postgres(fault)
        elif action == "kill":
            assert target is not None
            await self._kill(target, role, fault)
        elif action == "pause":
            assert target is not None
            await self._pause(target, role, fault)
        elif kind == "wipe-bookie":
            assert target is not None
            await self._wipe(target, fault)
        elif kind == "stop-postgres":
            await self._stop_postgres(fault)
        else:
            await self._fill_disk(fault)
        return fault

    def _target(self, role: str, exclude: Proc | None = None) -> Proc | None:
        if role == "bookie":
            return self.rng.choice([b for b in self.cluster.bookies if b is not exclude])
        if role in ("broker", "store"):
            return self.rng.choice([b for b in self.cluster.brokers if b is not exclude])
        if role == "compactor":
            return self.cluster.compactor
        if role == "autorecovery":
            return self.cluster.autorecovery
        if role == "disk":
            return self.cluster.bookies[0]
        return None

    async def _restart(self, proc: Proc, role: str, *extra: str) -> None:
        """Start it again; a start that fails is noted (with the log's tail) and tried once more,
        and a second failure ends the campaign."""
        try:
            await self.cluster.restart(proc, self.config.recovery_timeout_s, *extra)
        except (RuntimeError, TimeoutError) as exc:
            self.history.note(f"{proc.name} did not come back at {time.time():.0f}: {exc}"[:2000])
            proc.kill9()
            await asyncio.sleep(2.0)
            await self.cluster.restart(proc, self.config.recovery_timeout_s, *extra)
        self.history.restarts[role] += 1

    async def _kill(self, proc: Proc, role: str, fault: Fault) -> None:
        down = self.rng.uniform(*self.config.down_s)
        fault.detail = f"down {down:.1f} s"
        proc.kill9()
        await asyncio.sleep(down)
        await self._restart(proc, role)

    def _pause_s(self, role: str) -> float:
        s = self.cluster.config.setting
        if role in ("broker", "store", "postgres"):
            longer_than = s("QUIRE_BROKER_LEASE_MS")
        elif role == "bookie":
            longer_than = max(s("QUIRE_BOOKIE_HEARTBEAT_TIMEOUT_MS"), s("QUIRE_ADD_ENTRY_TIMEOUT_MS"))
        elif role == "autorecovery":
            longer_than = s("QUIRE_AUTORECOVERY_CLAIM_MS")
        else:
            longer_than = s("QUIRE_COMPACTION_LEASE_MS")
        return longer_than / 1000 * self.rng.uniform(*self.config.hold_factor)

    async def _pause(self, proc: Proc, role: str, fault: Fault) -> None:
        hold = self._pause_s(role)
        fault.detail = f"stopped {hold:.1f} s"
        proc.pause()
        await asyncio.sleep(hold)
        proc.resume()

    async def loss_allowed(self) -> bool:
        """Whether a bookie's copies may be lost now (a wipe, a replacement, a disk fault that may end
        in a format): not while an earlier loss is not re-replicated yet, nor after a bit rot whose
        rotten copy was not seen repaired."""
        if self.disk.rotten:
            self.history.note("a loss of copies was put off: a copy rotten by bit-rot was not seen repaired")
            return False
        if not self._wiped_unrecovered:
            return True
        missing = await self.cluster.underreplicated()
        if missing == 0:
            self._wiped_unrecovered = False
            return True
        self.history.note(
            "a loss of copies was put off: ledgers still lack the copies an earlier loss took (with "
            "as many bookies as the ensemble size there is no bookie to copy them to; a second loss is "
            "beyond Qw=2)"
        )
        return False

    async def _wipe(self, bookie: Proc, fault: Fault) -> None:
        s = self.cluster.config.setting
        # Down long enough for the auditor to count it lost: its ledgers get listed.
        down = (
            s("QUIRE_AUTORECOVERY_LOST_BOOKIE_GRACE_MS") + 3 * s("QUIRE_AUTORECOVERY_AUDIT_INTERVAL_MS")
        ) / 1000
        down += s("QUIRE_BOOKIE_HEARTBEAT_TIMEOUT_MS") / 1000
        fault.detail = f"wiped, down {down:.1f} s, formatted"
        bookie.kill9()
        await asyncio.to_thread(self.cluster.wipe, bookie)
        await asyncio.sleep(down)
        await self._restart(bookie, "bookie", "--format")
        self.wiped()

    def wiped(self) -> None:
        """A bookie's copies were lost: the next loss waits for their re-replication."""
        self._wiped_unrecovered = True

    async def _stop_postgres(self, fault: Fault) -> None:
        immediate = self.rng.random() < 0.5
        down = self.rng.uniform(1.0, 3.0)
        fault.detail = f"{'immediate' if immediate else 'fast'} shutdown, down {down:.1f} s"
        await asyncio.to_thread(self.database.stop, immediate)
        await asyncio.sleep(down)
        await self.database.start()
        self.history.restarts["postgres"] += 1

    async def _compound(self, kind: str) -> Fault | None:
        """Two faults overlapping: the second a moment after the first, on another process. The
        pair is recorded as a fault of its own (the checker's windows take its whole span) besides
        its two parts."""
        first, second = kind.split("+")
        pair = Fault(kind, "", time.time())
        self.history.faults.append(pair)
        one = asyncio.create_task(self._inject(first))
        await asyncio.sleep(self.rng.uniform(0.2, 1.5))
        parts = [f for f in self.history.faults if f.kind == first and f.started >= pair.started]
        exclude = self._proc_named(parts[-1].target) if parts else None
        other = await self._inject(second, exclude)
        done = await one
        for part in (done, other):
            if part is not None:
                part.part_of = kind
        pair.target = " + ".join(f.target for f in (done, other) if f is not None)
        pair.detail = "; ".join(f"{f.kind} {f.detail}" for f in (done, other) if f is not None)
        return pair

    def _proc_named(self, name: str) -> Proc | None:
        return next((p for p in self.cluster.procs() if p.name == name), None)

    async def _link(self, proc: Proc, action: str, fault: Fault) -> None:
        """Cut a bookie's or a broker's store link, one way or both, or hold its replies: at its
        proxy (on this event loop), or in the bookie's network namespace (`ip`, in a thread)."""
        link = self.cluster.proxy_of(proc)
        hold = self._pause_s("bookie" if proc in self.cluster.bookies else "store")
        fault.target = link.name
        fault.detail = f"{action} {hold:.1f} s{'' if isinstance(link, Proxy) else ' (namespace)'}"
        act = {"partition": link.cut, "one-way": link.one_way, "hold": link.hold}[action]
        if isinstance(link, Proxy):
            act()
            await asyncio.sleep(hold)
            link.heal()
            return
        await asyncio.to_thread(act)
        await asyncio.sleep(hold)
        await asyncio.to_thread(link.heal)

    async def _skew(self, proc: Proc, role: str, fault: Fault) -> None:
        """Restart it with its clock off by several leases, keep it so, restart it true."""
        s = self.cluster.config.setting
        unit = s("QUIRE_BROKER_LEASE_MS") if role == "broker" else s("QUIRE_BOOKIE_HEARTBEAT_TIMEOUT_MS")
        offset_ms = int(unit * self.rng.uniform(2.0, 6.0)) * self.rng.choice((-1, 1))
        kept = self.rng.uniform(*self.config.skew_kept_s)
        fault.detail = f"clock {offset_ms:+d} ms for {kept:.1f} s"
        proc.kill9()
        skewed = {CLOCK_OFFSET_ENV: str(offset_ms)}
        await self.cluster.restart(proc, self.config.recovery_timeout_s, env=skewed)
        await asyncio.sleep(kept)
        proc.kill9()
        await self._restart(proc, role)

    async def _pause_postgres(self, fault: Fault) -> None:
        proc = getattr(self.database, "proc", None)
        assert proc is not None
        hold = self._pause_s("postgres")
        fault.detail = f"stopped {hold:.1f} s"
        proc.pause()
        await asyncio.sleep(hold)
        proc.resume()

    async def _fill_disk(self, fault: Fault) -> None:
        assert self.cluster.tmpfs is not None
        bookie = self.cluster.bookies[0]
        filler = self.cluster.tmpfs / "chaos-filler"
        hold = self.rng.uniform(1.0, 3.0)
        written = await asyncio.to_thread(_fill, filler)
        deadline = time.monotonic() + 15
        while await self.cluster.bookie_state(bookie) != "read_only" and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        state = await self.cluster.bookie_state(bookie)
        fault.detail = f"{written // 2**20} MiB filler, bookie {state}, held {hold:.1f} s"
        if state != "read_only":
            self.history.note(
                f"fill-disk at {fault.started:.0f}: {bookie.name} did not turn read-only ({state})"
            )
        await asyncio.sleep(hold)
        filler.unlink()


def _fill(path: os.PathLike[str]) -> int:
    """Write a file that leaves FILL_LEAVE_BYTES free on its filesystem; its size."""
    st = os.statvfs(path.__fspath__().rsplit("/", 1)[0])
    size = max(0, st.f_bavail * st.f_frsize - FILL_LEAVE_BYTES)
    chunk = b"\xaa" * 2**20
    written = 0
    with open(path, "wb", buffering=0) as f:
        while written < size:
            n = min(len(chunk), size - written)
            try:
                written += f.write(chunk[:n]) or 0
            except OSError:
                break
    return written


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
