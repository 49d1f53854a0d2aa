"""The compaction service: polls the metadata store for requested runs and runs them one at a time.

Requests come from the admin trigger (`PUT .../compaction` marks the managed ledger's
CompactionState RUNNING and requested, under a request lease) and from the topics service's
threshold check, which does the same. Each poll first sweeps: runs whose lease lapsed (their
compactor died) are recorded as ERROR and the ledgers dead runs left behind are deleted. Runs are
serial: Spark already uses every core for one. While the service lives, requests waiting for a
compactor have their request leases pushed out, so they wait for it instead of expiring.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable

from bookie.api import LedgerClient
from bookie.ledgers import EnsemblePlacement
from bookie.metadata_calls import call_store
from compactor.config import CompactionRules, CompactorConfig
from compactor.errors import CompactionError
from compactor.runner import CompactionEngine, CompactionRunner
from managed_ledger.clock import Clock
from managed_ledger.metadata.api import CompactionState, MetadataStore
from topics import compaction_lease, policies
from topics.api import CompactionPolicy
from topics.names import namespace_of, partition_index

log = logging.getLogger("quire.compactor")


def rules_for(store: MetadataStore, ml_name: str, config: CompactorConfig) -> CompactionRules:
    """The run's rules from the topic's compactionPolicy, resolved as the broker resolves it
    (topic over namespace over the settings' defaults in `config`; topics.policies)."""
    partition = partition_index(ml_name)
    topic = partition[0] if partition is not None else ml_name
    base = CompactionPolicy(
        keyless_policy=config.keyless_policy, delete_retention_ms=config.delete_retention_ms
    )
    policy = policies.resolve_compaction(
        base, store.get_policies(namespace_of(topic)), store.get_policies(topic)
    )
    return CompactionRules(policy.keyless_policy, policy.delete_retention_ms)


class CompactionService:
    def __init__(
        self,
        store: MetadataStore,
        client: LedgerClient,
        config: CompactorConfig,
        engine: CompactionEngine,
        clock: Clock | None = None,
        placement: EnsemblePlacement | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.engine = engine
        self.runner = CompactionRunner(store, client, config, engine, clock, placement)

    async def start(self) -> None:
        """Clean up after compactors that died, then warm the engine (the Spark session)."""
        for ml_name in await self.runner.sweep():
            log.warning("compaction of %s was RUNNING when its compactor died: marked ERROR", ml_name)
        warm_up = getattr(self.engine, "warm_up", None)
        if warm_up is not None:
            await _in_daemon_thread(warm_up)

    async def requested(self) -> list[str]:
        states = await call_store(self.store.list_compactions)
        now = self.runner.clock.now_ms()
        return sorted(s.topic for s in states if compaction_lease.waiting(s, now))

    async def run_one(self, ml_name: str) -> CompactionState | None:
        """One run; a failure is recorded in the store (ERROR + reason) and logged, not raised."""
        rules = await call_store(rules_for, self.store, ml_name, self.config)
        log.info(
            "compacting %s (key-less messages: %s, tombstones kept %d ms)",
            ml_name,
            rules.keyless_policy,
            rules.delete_retention_ms,
        )
        try:
            state = await self.runner.run(ml_name, rules)
        except CompactionError as exc:
            log.warning("compaction of %s failed: %s", ml_name, exc)
            return None
        log.info(
            "compacted %s: %d messages in, %d out, horizon %s",
            ml_name,
            state.messages_in,
            state.messages_out,
            state.horizon,
        )
        return state

    async def poll_once(self) -> list[str]:
        """Sweep dead runs, then run every requested compaction now; returns the managed ledgers
        it ran."""
        for ml_name in await self.runner.sweep():
            log.warning("compaction of %s lost its lease: marked ERROR", ml_name)
        ran = []
        for ml_name in await self.requested():
            await self.run_one(ml_name)
            ran.append(ml_name)
        return ran

    async def keep_requests_alive(self) -> None:
        """While this compactor lives (warming up, or busy with a long run), push out the request
        lease of every request still waiting for a compactor, each quarter lease: a request then
        expires only when no compactor is alive to take it."""
        lease_ms = self.config.lease_ms
        while True:
            await asyncio.sleep(lease_ms / 4 / 1000)
            try:
                for state in await call_store(self.store.list_compactions):
                    now = self.runner.clock.now_ms()
                    await call_store(compaction_lease.extend_request, self.store, state, now, lease_ms)
            except Exception:  # the store is down: the next beat retries
                log.exception("could not extend the waiting compaction requests")

    async def serve(self, stop: asyncio.Event) -> None:
        """Poll until `stop` is set. A run in progress is cancelled: it records ERROR
        ("compaction cancelled") and deletes its ledger; the previous view stays."""
        keeping = asyncio.create_task(self.keep_requests_alive(), name="compaction-requests")
        polling = asyncio.create_task(self._poll_until(stop))
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({polling, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not polling.done():
            polling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await polling
        keeping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeping

    async def _poll_until(self, stop: asyncio.Event) -> None:
        interval_s = self.config.poll_interval_ms / 1000
        while not stop.is_set():  # the store may be down now: the compactor waits, not dies
            try:
                await self.start()
                break
            except Exception:
                log.exception("compactor start failed (sweep or warm-up); trying again")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval_s)
        while not stop.is_set():
            try:
                await self.poll_once()
            except Exception:  # the store or a bookie is down: keep polling
                log.exception("compaction poll failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval_s)


async def _in_daemon_thread(fn: Callable[[], object]) -> None:
    """Run `fn` in a daemon thread of its own and wait for it. A stop meanwhile (the awaiting
    task cancelled) does not wait for it, and neither does the process's exit: the warm-up
    starts Spark's JVM, several seconds a stop would otherwise sit through (asyncio's default
    executor joins its threads at exit). The JVM ends with the process (its gateway exits when
    its stdin, this process's pipe, closes)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def settle(error: BaseException | None) -> None:
        if done.cancelled():
            return
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)

    def work() -> None:
        error: BaseException | None = None
        try:
            fn()
        except BaseException as exc:  # handed to the awaiting task, which logs it
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, error)

    threading.Thread(target=work, name="spark-warm-up", daemon=True).start()
    await done
