"""One auto-recovery process's loops: an auditor candidate and a recovery worker side by side.

The audit loop runs a pass (`bookie.auditor.Auditor.audit_once`, in a thread: it is metadata
store calls) every `audit_interval_ms`; only the candidate holding the auditor lease does
anything in it. The worker loops (the worker's `ledgers_in_flight` of them, side by side)
each re-replicate one claimed ledger after another and sleep `poll_interval_ms` when none is
claimable. The check loop runs a ledger check (`bookie.ledger_checker.LedgerChecker`) every
`check_interval_ms` while this process's auditor held the lease at its last pass (the checker
lists what it finds for the auditor, so it runs where the auditor runs). A failure in any
(the store or a bookie out of reach) is logged and the loop carries on at its next tick: what
was not finished stays in the metadata store for the next try, here or in another process.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from bookie.auditor import Auditor
from bookie.ledger_checker import LedgerChecker
from bookie.metadata_calls import call_store
from bookie.rereplication import ReplicationWorker
from common.tasks import cancel_all

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AutoRecoveryConfig:
    audit_interval_ms: int = 5_000
    poll_interval_ms: int = 1_000
    check_interval_ms: int = 60_000


class AutoRecoveryService:
    def __init__(
        self,
        auditor: Auditor,
        worker: ReplicationWorker,
        config: AutoRecoveryConfig,
        checker: LedgerChecker | None = None,
    ) -> None:
        self.auditor = auditor
        self.worker = worker
        self.config = config
        self.checker = checker
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        lanes = max(1, self.worker.config.ledgers_in_flight)
        self._tasks = [loop.create_task(self._audit_loop())]
        self._tasks += [loop.create_task(self._work_loop()) for _ in range(lanes)]
        if self.checker is not None:
            self._tasks.append(loop.create_task(self._check_loop(self.checker)))

    async def _audit_loop(self) -> None:
        while True:
            try:
                result = await call_store(self.auditor.audit_once)
                if result.marked:
                    log.info("auditor: %d ledger(s) newly under-replicated (lost: %s, draining: %s)",
                             result.marked, sorted(result.lost), sorted(result.decommissioning))  # fmt: skip
            except Exception:
                log.exception("audit pass failed; trying again at the next tick")
            await asyncio.sleep(self.config.audit_interval_ms / 1000)

    async def _check_loop(self, checker: LedgerChecker) -> None:
        while True:
            await asyncio.sleep(self.config.check_interval_ms / 1000)
            if not self.auditor.leading:
                continue
            try:
                result = await checker.check_once()
                if result.missing:
                    log.warning("ledger check: copies missing in %d ledger(s): %s", len(result.missing),
                                {k: sorted(v) for k, v in result.missing.items()})  # fmt: skip
            except Exception:
                log.exception("ledger check failed; trying again at the next tick")

    async def _work_loop(self) -> None:
        while True:
            try:
                if await self.worker.run_once():
                    continue
            except Exception:
                log.exception("re-replication failed; trying again at the next tick")
            await asyncio.sleep(self.config.poll_interval_ms / 1000)

    async def close(self) -> None:
        tasks, self._tasks = self._tasks, []
        await cancel_all(tasks)
