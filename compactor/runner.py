"""One compaction run of one managed ledger, with its state kept in the metadata store.

Sequence (DESIGN.md §7), each step a compare-and-set on the topic's `CompactionState`:
1. RUNNING (requested cleared, started_ms set); a run already RUNNING is a conflict. A ledger a
   dead run left behind (`run_ledger_id`) is deleted first.
2. the plan: new horizon = the topic's last message id now; ranges to read.
3. a NEW ledger: metadata created, recorded as `run_ledger_id`, then written by the engine
   (Spark job or reference) and closed.
4. ONE CAS: compacted ledger id + horizon + SUCCESS + counts (run_ledger_id cleared).
5. only then the previous compacted ledger is deleted (`bookie.ledgers` has the order).
A failure at 2-4 deletes the half-written ledger, leaves the previous view as it was and records
ERROR with the reason.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Protocol

from bookie.api import LedgerClient
from compactor.config import CompactorConfig, KeylessPolicy
from compactor.errors import CompactionConflictError, CompactionError
from compactor.plan import CompactionPlan, build_plan
from compactor.reference import EntrySink
from compactor.writer import CompactedLedgerWriter, delete_ledger, now_ms
from managed_ledger.metadata.api import (
    BadVersionError,
    CompactionState,
    CompactionStatus,
    MetadataStore,
)
from managed_ledger.position import MessageId

log = logging.getLogger(__name__)
DIED = "compactor died"
CANCELLED = "compaction cancelled: the compactor stopped"


class CompactionEngine(Protocol):
    name: str

    async def compute(self, plan: CompactionPlan, keyless_policy: KeylessPolicy, sink: EntrySink) -> int:
        """Feed compacted entries (payload, message count) to sink in id order; return messages read."""
        ...


class CompactionRunner:
    def __init__(
        self, store: MetadataStore, client: LedgerClient, config: CompactorConfig, engine: CompactionEngine
    ) -> None:
        self.store = store
        self.client = client
        self.config = config
        self.engine = engine

    async def _put(self, state: CompactionState) -> CompactionState:
        return await asyncio.to_thread(self.store.put_compaction, state)

    async def _get(self, ml_name: str) -> CompactionState:
        return await asyncio.to_thread(self.store.get_compaction, ml_name)

    async def start(self, ml_name: str) -> CompactionState:
        """Step 1: mark the run RUNNING, or raise CompactionConflictError."""
        state = await self._get(ml_name)
        if state.status == CompactionStatus.RUNNING:
            raise CompactionConflictError(f"a compaction of {ml_name} is already running")
        if state.run_ledger_id is not None:  # left by a run that died; nobody references it
            await delete_ledger(self.store, self.client, state.run_ledger_id)
        running = replace(
            state,
            status=CompactionStatus.RUNNING,
            requested=False,
            started_ms=now_ms(),
            ended_ms=None,
            last_error="",
            run_ledger_id=None,
        )
        try:
            return await self._put(running)
        except BadVersionError as exc:
            raise CompactionConflictError(f"compaction state of {ml_name} changed under us") from exc

    async def run(self, ml_name: str, keyless_policy: KeylessPolicy | None = None) -> CompactionState:
        """A whole run; returns the final state (SUCCESS), or raises CompactionError (ERROR kept)."""
        state = await self.start(ml_name)
        policy = keyless_policy or self.config.keyless_policy
        try:
            state = await self._compact(state, policy)
        except asyncio.CancelledError:
            # the service is stopping: clean up like a failure (shielded, so it completes)
            await asyncio.shield(self._fail(ml_name, CompactionError(CANCELLED)))
            raise
        except Exception as exc:
            await self._fail(ml_name, exc)
            if isinstance(exc, CompactionError):
                raise
            raise CompactionError(f"compaction of {ml_name} failed: {exc}") from exc
        return state

    async def _compact(self, state: CompactionState, policy: KeylessPolicy) -> CompactionState:
        plan = await build_plan(self.store, self.client, state.topic, state)
        if not plan.has_new_messages:
            return await self._put(_succeeded(state, state.compacted_ledger_id, plan, 0, None))
        writer = await CompactedLedgerWriter.create(
            self.store, self.client, self.config.bookies, self.config.write_quorum, self.config.ack_quorum
        )
        state = await self._put(replace(state, run_ledger_id=writer.ledger_id))
        try:
            messages_in = await self.engine.compute(plan, policy, writer.add)
            await self._test_delay(state.topic)
            closed = await writer.close()
        except BaseException:
            await writer.abandon()
            raise
        done = _succeeded(state, closed.ledger_id, plan, messages_in, writer)
        state = await self._put(done)  # the one CAS that switches the view
        if plan.previous_ledger_id is not None and plan.previous_ledger_id != closed.ledger_id:
            try:
                await delete_ledger(self.store, self.client, plan.previous_ledger_id)
            except Exception:  # the new view is in place; a leftover ledger is only space
                log.exception("could not delete the previous compacted ledger %s", plan.previous_ledger_id)
        return state

    async def _test_delay(self, ml_name: str) -> None:
        """The test-only pause of CompactorConfig.test_run_delay_ms (0, the default: none)."""
        delay_ms, match = self.config.test_run_delay_ms, self.config.test_run_delay_match
        if delay_ms > 0 and match in ml_name:
            log.warning("test hook: compaction of %s pauses %d ms before closing", ml_name, delay_ms)
            await asyncio.sleep(delay_ms / 1000)

    async def _fail(self, ml_name: str, exc: BaseException) -> None:
        """Delete the half-written ledger and record ERROR; the previous view stays as it was."""
        log.warning("compaction of %s failed: %s", ml_name, exc)
        for _ in range(5):  # a concurrent writer of the state is unlikely; retry the CAS a little
            state = await self._get(ml_name)
            if state.run_ledger_id is not None:
                try:
                    await delete_ledger(self.store, self.client, state.run_ledger_id)
                except Exception:  # keep run_ledger_id so the next run deletes it
                    log.exception("could not delete run ledger %s", state.run_ledger_id)
                    await self._try_put(_failed(state, exc, keep_run_ledger=True))
                    return
            if await self._try_put(_failed(state, exc, keep_run_ledger=False)):
                return

    async def _try_put(self, state: CompactionState) -> bool:
        try:
            await self._put(state)
        except BadVersionError:
            return False
        return True

    async def recover_dead_runs(self) -> list[str]:
        """At service start: a RUNNING state means its compactor died; ERROR it, delete its ledger."""
        states = await asyncio.to_thread(self.store.list_compactions)
        fixed = []
        for state in states:
            if state.status != CompactionStatus.RUNNING:
                continue
            if state.run_ledger_id is not None:
                await delete_ledger(self.store, self.client, state.run_ledger_id)
            if await self._try_put(_failed(state, CompactionError(DIED), keep_run_ledger=False)):
                fixed.append(state.topic)
        return fixed


def _succeeded(
    state: CompactionState,
    ledger_id: int | None,
    plan: CompactionPlan,
    messages_in: int,
    writer: CompactedLedgerWriter | None,
) -> CompactionState:
    now = now_ms()
    base = replace(
        state,
        status=CompactionStatus.SUCCESS,
        ended_ms=now,
        last_succeeded_ms=now,
        last_error="",
        run_ledger_id=None,
        messages_in=messages_in,
        horizon=_as_tuple(plan.new_horizon),
    )
    if writer is None:  # nothing new: the previous ledger stays the view
        return replace(base, messages_out=state.messages_out if ledger_id is not None else 0)
    return replace(
        base,
        compacted_ledger_id=ledger_id,
        messages_out=writer.messages,
        compacted_entries=writer.entries,
        compacted_size_bytes=writer.size_bytes,
    )


def _as_tuple(horizon: MessageId | None) -> tuple[int, int, int] | None:
    if horizon is None:
        return None
    return (horizon.ledger_id, horizon.entry_id, horizon.batch_index)


def _failed(state: CompactionState, exc: BaseException, keep_run_ledger: bool) -> CompactionState:
    now = now_ms()
    return replace(
        state,
        status=CompactionStatus.ERROR,
        last_error=str(exc) or type(exc).__name__,
        ended_ms=now,
        last_failed_ms=now,
        run_ledger_id=state.run_ledger_id if keep_run_ledger else None,
    )
