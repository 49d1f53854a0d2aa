"""One compaction run of one managed ledger, with its state kept in the metadata store.

Sequence (docs/semantics.md, Compaction), each step a compare-and-set on the topic's
`CompactionState` under the run's lease (topics/compaction_lease.py has the lease rules):
1. take the run: RUNNING, this compactor as lease holder, `requested` cleared, started_ms set. A
   run requested but not yet taken is taken; one held under a live lease is a conflict, a lapsed
   one is ERROR first. A ledger a dead run left behind (`run_ledger_id`), and layers a dead fold
   had not deleted yet (`retired_ledger_ids`), are deleted first.
2. the plan: new horizon = the topic's last message id now; ranges to read. The run's rules
   (`CompactionRules`) take the time now, which decides the tombstones kept. Nothing new: the
   view stays as it is, unless tombstones are kept a while (deleteRetentionMs > 0): then it is
   written again, so that those that aged out go.
   A DELTA run reads the new messages only and writes their newest row per key (tombstones
   included: they hide their keys in older layers) as one more layer. It is chosen while the
   view has a base written under the same rules, the rules keep no tombstones, there are fewer
   than `max_deltas` deltas and the deltas, this one included, stay under `delta_max_ratio` of
   the base's bytes (checked before, on the closed ledgers' sizes, and after, on what was
   written: a delta that came out too big is deleted and the run folds). Otherwise the run
   FOLDS: base + deltas + new messages into a new base.
3. a NEW ledger: metadata created, recorded as `run_ledger_id`, then written by the engine
   (Spark job or reference) and closed.
4. ONE CAS: the layers (a delta appended, or the new base with no deltas) + horizon + SUCCESS +
   counts (run_ledger_id and lease cleared); a fold also names the layers it replaced in
   `retired_ledger_ids`.
5. only then a fold deletes the replaced layers and clears `retired_ledger_ids` (a crash in
   between: the next run or compactor poll deletes them; `bookie.ledgers` has the order).
A heartbeat renews the lease throughout. A failure at 2-4 deletes the half-written ledger, leaves
the previous view as it was and records ERROR with the reason; a run that lost its lease deletes
its ledger and records nothing (its CAS fails: the state is no longer its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from dataclasses import replace
from typing import Any, Protocol

from bookie.api import LedgerClient
from bookie.ledgers import EnsemblePlacement, StaticPlacement
from bookie.metadata_calls import call_store
from compactor.config import CompactionRules, CompactorConfig
from compactor.errors import CompactionError, CompactionRunConflictError, LeaseLostError
from compactor.lease import RunLease
from compactor.plan import CompactionPlan, build_plan
from compactor.reference import EntrySink
from compactor.stats import CompactionStats
from compactor.writer import CompactedLedgerWriter, delete_ledger
from managed_ledger.clock import Clock, SystemClock
from managed_ledger.metadata.api import (
    BadVersionError,
    CompactionState,
    CompactionStatus,
    MetadataStore,
    NotFoundError,
)
from managed_ledger.position import MessageId
from topics import compaction_lease

log = logging.getLogger(__name__)
CANCELLED = "compaction cancelled: the compactor stopped"


class CompactionEngine(Protocol):
    name: str

    async def compute(self, plan: CompactionPlan, rules: CompactionRules, sink: EntrySink) -> int:
        """Feed compacted entries (payload, message count) to sink in id order; return messages read."""
        ...


class CompactionRunner:
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
        self.client = client
        self.config = config
        self.engine = engine
        # Compacted ledgers go where the registry says when the process has one (quire compactor
        # does), else to the configured bookies.
        self.placement = placement or StaticPlacement(config.bookies)
        self.clock: Clock = clock or SystemClock()
        self.instance_id = config.instance_id or default_instance_id()
        self.stats = CompactionStats()

    async def _put(self, state: CompactionState) -> CompactionState:
        return await call_store(self.store.put_compaction, state)

    async def _observe(self, ml_name: str) -> CompactionState:
        return await call_store(compaction_lease.observe, self.store, ml_name, self.clock.now_ms())

    async def start(self, ml_name: str) -> RunLease:
        """Step 1: take the run under a lease, or raise CompactionRunConflictError."""
        state = await self._observe(ml_name)
        if state.status == CompactionStatus.RUNNING and not compaction_lease.waiting(
            state, self.clock.now_ms()
        ):
            raise CompactionRunConflictError(
                f"a compaction of {ml_name} is already running ({state.lease_holder})"
            )
        # left by a run that died, or by a fold that died after its CAS: nobody references them;
        # one that cannot be deleted now (the store out of reach) stays named for the next run or sweep
        kept = await self._delete_quietly(state.leftover_ledger_ids)
        now = self.clock.now_ms()
        taken = compaction_lease.taken(state, self.instance_id, now, self.config.lease_ms)
        try:
            state = await self._put(replace(taken, run_ledger_id=None, retired_ledger_ids=kept))
        except (BadVersionError, NotFoundError) as exc:
            raise CompactionRunConflictError(f"compaction state of {ml_name} changed under us") from exc
        return RunLease(self.store, state, self.config.lease_ms, self.clock)

    async def run(self, ml_name: str, rules: CompactionRules | None = None) -> CompactionState:
        """A whole run by `rules` (None: the config's defaults); returns the final state
        (SUCCESS), or raises CompactionError (ERROR kept, unless the run lost its lease: then
        whoever holds the state now has the say)."""
        lease = await self.start(ml_name)
        rules = replace(rules or self.config.rules(), now_ms=self.clock.now_ms())
        heartbeat = asyncio.create_task(lease.heartbeat(), name=f"compaction-lease {ml_name}")
        started, succeeded = time.monotonic(), False
        self.stats.running += 1
        try:
            done = await self._compact(lease, rules)
            succeeded = True
            return done
        except asyncio.CancelledError:
            # the service is stopping: clean up like a failure (shielded, so it completes)
            await asyncio.shield(self._fail(lease, CompactionError(CANCELLED)))
            raise
        except Exception as exc:
            await self._fail(lease, exc)
            if isinstance(exc, CompactionError):
                raise
            raise CompactionError(f"compaction of {ml_name} failed: {exc}") from exc
        finally:
            self.stats.running -= 1
            self.stats.run_ended(succeeded, time.monotonic() - started)
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat

    async def _compact(self, lease: RunLease, rules: CompactionRules) -> CompactionState:
        state = lease.state
        delta = self._delta_allowed(state, rules)
        plan = await build_plan(self.store, self.client, state.topic, state, delta=delta)
        # Nothing new: the view stays, unless it may hold tombstones that have aged out since.
        rewrite = rules.delete_retention_ms > 0 and state.compacted_ledger_id is not None
        if not plan.has_new_messages and not (rewrite and plan.ranges):
            changes = _succeeded(state, state.compacted_ledger_id, plan, 0, None, self.clock.now_ms())
            return await lease.write(**changes)
        if delta and self._delta_fits(state, plan.closed_new_bytes):
            written = await self._write(lease, plan, replace(rules, keep_all_tombstones=True))
            if self._delta_fits(state, written[1].size_bytes):
                return await self._commit(lease, plan, rules, written)
            # the delta came out too big for the layers: drop it and fold instead
            await self._drop_written(lease, written[1].ledger_id)
        if plan.delta:
            plan = await build_plan(self.store, self.client, state.topic, state)
        return await self._commit(lease, plan, rules, await self._write(lease, plan, rules))

    def _delta_allowed(self, state: CompactionState, rules: CompactionRules) -> bool:
        """A delta layer may be written: the view has a base written under the same rules, the
        rules keep no tombstones, and there is room for one more delta."""
        return (
            state.compacted_ledger_id is not None
            and self.config.delta_max_ratio > 0
            and rules.allow_delta
            and state.view_rules == rules.tag
            and len(state.delta_ledger_ids) < self.config.max_deltas
        )

    def _delta_fits(self, state: CompactionState, delta_bytes: int) -> bool:
        """The deltas, with one more of `delta_bytes`, stay under the share of the base's bytes."""
        total = state.delta_size_bytes + delta_bytes
        return total < self.config.delta_max_ratio * state.compacted_size_bytes

    async def _write(
        self, lease: RunLease, plan: CompactionPlan, rules: CompactionRules
    ) -> tuple[int, CompactedLedgerWriter]:
        """A new ledger (recorded as the run's ledger first) written by the engine and closed;
        returns the messages read and the writer."""
        quorums = (self.config.ensemble_size, self.config.write_quorum, self.config.ack_quorum)
        writer = await CompactedLedgerWriter.create(self.store, self.client, self.placement, quorums)
        lease.run_ledger_id = writer.ledger_id  # from here on a failure deletes it
        await lease.write(run_ledger_id=writer.ledger_id)
        try:
            messages_in = await self.engine.compute(plan, rules, writer.add)
            await self._test_delay(lease.topic)
            await writer.close()
        except BaseException:
            await writer.abandon()
            raise
        return messages_in, writer

    async def _drop_written(self, lease: RunLease, ledger_id: int) -> None:
        await delete_ledger(self.store, self.client, ledger_id)
        lease.run_ledger_id = None
        await lease.write(run_ledger_id=None)

    async def _commit(
        self,
        lease: RunLease,
        plan: CompactionPlan,
        rules: CompactionRules,
        written: tuple[int, CompactedLedgerWriter],
    ) -> CompactionState:
        """The one CAS that switches the view (it fails if the lease was lost meanwhile); after a
        fold, the layers it replaced are deleted."""
        state, (messages_in, writer) = lease.state, written
        changes = _succeeded(state, writer.ledger_id, plan, messages_in, writer, self.clock.now_ms())
        if not plan.delta:
            replaced = (*state.retired_ledger_ids, *state.layer_ledger_ids)
            retired = tuple(i for i in replaced if i != writer.ledger_id)
            changes.update(view_rules=rules.tag, retired_ledger_ids=retired)
        done = await lease.write(**changes)
        lease.run_ledger_id = None  # the view's now: nothing that follows may delete it
        self.stats.messages_read += messages_in
        self.stats.messages_kept += writer.messages
        if done.leftover_ledger_ids:  # the layers a fold replaced
            done = await self._delete_leftovers(done)
        return done

    async def _test_delay(self, ml_name: str) -> None:
        """The test-only pause of CompactorConfig.test_run_delay_ms (0, the default: none)."""
        delay_ms, match = self.config.test_run_delay_ms, self.config.test_run_delay_match
        if delay_ms > 0 and match in ml_name:
            log.warning("test hook: compaction of %s pauses %d ms before closing", ml_name, delay_ms)
            await asyncio.sleep(delay_ms / 1000)

    async def _fail(self, lease: RunLease, exc: BaseException) -> None:
        """Delete the half-written ledger and record ERROR while the lease holds; the previous
        view stays as it was. A ledger that could not be deleted stays named in the state, so a
        later poll deletes it."""
        log.warning("compaction of %s failed: %s", lease.topic, exc)
        if lease.state.status != CompactionStatus.RUNNING:
            return  # the run recorded its end (the view switched): only its clean-up failed
        deleted = True
        if lease.run_ledger_id is not None:
            outcome = await self._delete_unreferenced(lease.topic, lease.run_ledger_id)
            if outcome is None:
                return  # the view holds it: the run's commit landed, its answer was lost
            deleted = outcome
        if lease.lost:
            log.warning("compaction of %s records nothing: %s", lease.topic, lease.lost)
            return
        try:
            await lease.write(**_failed(exc, self.clock.now_ms(), None if deleted else lease.run_ledger_id))
        except LeaseLostError as lost:
            log.warning("compaction of %s records nothing: %s", lease.topic, lost)
        except Exception:  # the store is down: the lease lapses and reads as ERROR anyway
            log.exception("could not record the failed compaction of %s", lease.topic)

    async def _delete_unreferenced(self, topic: str, ledger_id: int) -> bool | None:
        """Delete a failed run's ledger unless the stored state references it (a commit that
        landed although its answer never came back: None). False when it could not be deleted
        now (nor the state read): it stays named in the state for a later run or sweep."""
        try:
            stored = await call_store(self.store.get_compaction, topic)
            if ledger_id in stored.layer_ledger_ids:
                log.warning("compaction of %s: ledger %d is in the view after all; kept", topic, ledger_id)
                return None
            await delete_ledger(self.store, self.client, ledger_id)
            return True
        except Exception:
            log.exception("could not delete run ledger %s", ledger_id)
            return False

    async def _delete_quietly(self, ledger_ids: tuple[int, ...]) -> tuple[int, ...]:
        """Delete each ledger; the ones that could not be deleted now."""
        kept = []
        for ledger_id in ledger_ids:
            try:
                await delete_ledger(self.store, self.client, ledger_id)
            except Exception:
                log.exception("could not delete the compaction ledger %s; kept for later", ledger_id)
                kept.append(ledger_id)
        return tuple(kept)

    async def sweep(self) -> list[str]:
        """Record ERROR for every run whose lease lapsed, and delete the ledgers that dead runs left
        behind (of states no longer RUNNING). Returns the managed ledgers found dead."""
        dead = []
        for state in await call_store(self.store.list_compactions):
            if compaction_lease.lapsed(state, self.clock.now_ms()):
                state = await self._observe(state.topic)
                dead.append(state.topic)
            if state.status != CompactionStatus.RUNNING and state.leftover_ledger_ids:
                await self._delete_leftovers(state)
        return dead

    async def _delete_leftovers(self, state: CompactionState) -> CompactionState:
        """Delete the ledgers no view references (a dead run's, the layers a fold replaced), then
        forget those deleted; a crash in between: the next run or sweep deletes them again,
        harmlessly. One that cannot be deleted now (the store out of reach) stays named for later."""
        kept = await self._delete_quietly(state.leftover_ledger_ids)
        try:
            return await self._put(replace(state, run_ledger_id=None, retired_ledger_ids=kept))
        except (BadVersionError, NotFoundError):
            return state  # the state moved on; whoever changed it deals with its ledgers
        except Exception:  # the store is down: the next run or sweep deletes them again
            log.exception("could not record the deleted compaction ledgers of %s", state.topic)
            return state


def default_instance_id() -> str:
    """A lease holder name unique to this process: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _succeeded(
    state: CompactionState,
    ledger_id: int | None,
    plan: CompactionPlan,
    messages_in: int,
    writer: CompactedLedgerWriter | None,
    now: int,
) -> dict[str, Any]:
    """The changes that record a successful run (and end its lease)."""
    changes: dict[str, Any] = {
        "status": CompactionStatus.SUCCESS,
        "ended_ms": now,
        "last_succeeded_ms": now,
        "last_error": "",
        "run_ledger_id": None,
        "lease_holder": "",
        "lease_expires_ms": None,
        "messages_in": messages_in,
        "horizon": _as_tuple(plan.new_horizon),
    }
    if writer is None:  # nothing new: the previous ledger stays the view
        changes["messages_out"] = state.messages_out if ledger_id is not None else 0
        return changes
    if plan.delta:  # one more layer on top of the view
        changes.update(
            delta_ledger_ids=(*state.delta_ledger_ids, writer.ledger_id),
            delta_size_bytes=state.delta_size_bytes + writer.size_bytes,
            messages_out=writer.messages,
        )
        return changes
    changes.update(
        delta_ledger_ids=(),
        delta_size_bytes=0,
        compacted_ledger_id=ledger_id,
        messages_out=writer.messages,
        compacted_entries=writer.entries,
        compacted_size_bytes=writer.size_bytes,
    )
    return changes


def _as_tuple(horizon: MessageId | None) -> tuple[int, int, int] | None:
    if horizon is None:
        return None
    return (horizon.ledger_id, horizon.entry_id, horizon.batch_index)


def _failed(exc: BaseException, now: int, run_ledger_id: int | None) -> dict[str, Any]:
    """The changes that record a failed run (and end its lease)."""
    return {
        "status": CompactionStatus.ERROR,
        "last_error": str(exc) or type(exc).__name__,
        "ended_ms": now,
        "last_failed_ms": now,
        "run_ledger_id": run_ledger_id,
        "lease_holder": "",
        "lease_expires_ms": None,
    }
