"""Idle topic unload (Pulsar's inactive-topic handling, but an unload, never a delete): a topic
that nobody asked for during `idle_topic_unload_ms` is closed and dropped from memory, keeping
this broker's ownership; its next request opens it again (`TopicRegistry.topic`), with nothing
lost: closing flushes its cursors (with their delivery state), snapshots its dedup state and
closes its ledger first (`ManagedLedger.close`).

Every request stamps `Topic.last_active_ms` (in `TopicRegistry.topic`, one clock read). Each open
topic has one entry in a `common.scheduler.Scheduler`, at its last stamp plus the idle time,
checked lazily: when it comes due, a topic stamped since is put back at its new deadline (one
heap operation per idle period, not one per request). A topic with work left is not idle
whatever its stamp: delivered messages not acked yet, Kafka idempotent producers' state, a
subscription being created; it is looked at again one idle time later. A request stamps the
topic when it starts: a long poll (at most `max_wait_ms`) or a held produce that outlasts the
idle time can find its topic unloaded under it, and answers as for a topic that moved (empty,
or 503 for the client to retry).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from common.scheduler import Scheduler

if TYPE_CHECKING:
    from topics.registry import TopicRegistry
    from topics.topic import Topic

log = logging.getLogger("quire.topics")


class IdleUnloader:
    """Unloads the registry's idle topics after `config.idle_topic_unload_ms` (0: never)."""

    def __init__(self, registry: TopicRegistry) -> None:
        self._r = registry
        self.idle_ms = registry.config.idle_topic_unload_ms
        self.scheduler = Scheduler(registry.clock.now_ms)
        self._unloading: set[asyncio.Task[None]] = set()
        self.unloaded = 0  # topics unloaded so far (stats, tests)

    def opened(self, t: Topic) -> None:
        """A topic was opened here: watch it."""
        if self.idle_ms > 0:
            self.scheduler.schedule(t.name, t.last_active_ms + self.idle_ms, lambda: self._due(t))

    def _due(self, t: Topic) -> None:
        if self._r.topics.get(t.name) is not t:
            return  # dropped or reopened meanwhile (the new one has its own entry)
        now = self._r.clock.now_ms()
        if now - t.last_active_ms < self.idle_ms:
            self.scheduler.schedule(t.name, t.last_active_ms + self.idle_ms, lambda: self._due(t))
        elif busy(t):
            self.scheduler.schedule(t.name, now + self.idle_ms, lambda: self._due(t))
        else:
            task = asyncio.get_running_loop().create_task(self._unload(t))
            self._unloading.add(task)
            task.add_done_callback(self._unloading.discard)

    async def _unload(self, t: Topic) -> None:
        try:
            if await self._r.unload(t, still_idle=lambda: not busy(t)):
                self.unloaded += 1
                log.debug("idle topic %s unloaded", t.name)
        except Exception:  # it stays dropped; its next request opens it (and recovers it)
            log.exception("unloading idle topic %s", t.name)

    async def close(self) -> None:
        await self.scheduler.close()
        for task in list(self._unloading):
            await task


def busy(t: Topic) -> bool:
    """Work the topic still has in memory: then it is not idle, however long unasked."""
    return t.lock.locked() or bool(t.kafka_producers) or any(sub.unacked for sub in t.subscriptions.values())
