"""Backlog quotas at work (the rules are in `topics.backlog_quota`) and the namespace-level
policy admin. The periodic check runs in `topics.maintenance`.

On produce (`Topic.publish`, the one path every door reaches) a topic with quotas passes
`before_publish` before its append and `after_publish` after it.
The backlog figures are cached on the open topic (`Topic.quota`): measured again only after a
produce, an ack, a seek, an expiry or an eviction changed them, or after `REFRESH_S`; a topic with
no quota pays one attribute test.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from bookie.metadata_calls import call_store
from managed_ledger.entry_format import batch_publish_time
from managed_ledger.errors import EntryNotFoundError
from topics import backlog_quota, names, policies
from topics.api import BacklogQuota, QuotaPolicy, QuotaType, TopicPolicies
from topics.backlog import BacklogAdmin
from topics.backlog_quota import EVICTION, PRODUCER_POLICIES
from topics.errors import BacklogQuotaExceededError, InvalidPolicyError
from topics.registry import TopicRegistry
from topics.topic import Notifier, Topic

log = logging.getLogger("quire.topics")
REFRESH_S = 0.5  # cached backlog figures are measured again at least this often when asked


class QuotaAdmin:
    """Backlog quotas at work, and the namespace policies' admin; the registry's quota gate."""

    def __init__(self, registry: TopicRegistry, backlog: BacklogAdmin) -> None:
        self._r = registry
        self._backlog = backlog

    # --- measuring ---------------------------------------------------------------------------------
    async def _measure(self, t: Topic) -> None:
        """The slowest subscription's backlog (bytes, and its oldest message's publish time) of
        each partition, kept on `t.quota`. The publish time is read from the bookies only when
        the slowest cursor moved since the last read."""
        state = t.quota
        state.dirty = False
        state.fresh_until = asyncio.get_running_loop().time() + REFRESH_S
        sizes: list[int] = []
        oldest: int | None = None
        by_age = "message_age" in t.policies.backlog_quotas
        for partition, ml in enumerate(t.mls):
            mark = backlog_quota.slowest(ml.cursors)
            if mark is None:
                continue
            sizes.append(ml.size_after(mark))
            last = ml.last_confirmed_position
            first = ml.next_position(mark)
            if not by_age or last is None or first > last:
                continue
            known = state.first_unacked.get(partition)
            if known is None or known[0] != first:
                try:
                    known = (first, batch_publish_time(await ml.read_entry(first)))
                except EntryNotFoundError:  # trimmed meanwhile: the next measure finds the new one
                    continue
                state.first_unacked[partition] = known
            oldest = known[1] if oldest is None else min(oldest, known[1])
        state.size_bytes = max(sizes, default=0)
        state.oldest_ms = oldest

    async def _is_over(self, t: Topic, kind: QuotaType, quota: BacklogQuota) -> bool:
        """Whether the topic is over this quota, measured afresh if the cached figures are stale."""
        state = t.quota
        if state.dirty or asyncio.get_running_loop().time() >= state.fresh_until:
            await self._measure(t)
        now = self._r.clock.now_ms()
        return backlog_quota.exceeded(kind, quota, state.size_bytes, state.oldest_ms, now)

    async def _over_quota(
        self, t: Topic, wanted: tuple[QuotaPolicy, ...]
    ) -> tuple[QuotaType, BacklogQuota] | None:
        """The first quota of a `wanted` policy the topic is over."""
        for kind, quota in list(t.policies.backlog_quotas.items()):
            if quota.policy in wanted and await self._is_over(t, kind, quota):
                return kind, quota
        return None

    # --- on produce --------------------------------------------------------------------------------
    async def before_publish(self, t: Topic) -> None:
        """Before a produce's append: refuse it (producer_exception) or hold it until the
        backlog is back under the limit (producer_request_hold), or let it pass."""
        over = await self._over_quota(t, PRODUCER_POLICIES)
        if over is None:
            return
        state = t.quota
        if over[1].policy == "producer_exception":
            state.refused += 1
            raise _refusal(t, *over)
        state.held += 1
        self._r.activity.keep("quota", t.name)  # the periodic check wakes it to look again
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._r.config.backlog_quota_hold_timeout_ms / 1000
        recheck_s = self._r.config.backlog_quota_check_interval_ms / 1000
        while True:
            woken = state.wake.arm()
            remaining = deadline - loop.time()
            if remaining <= 0:
                state.refused += 1
                raise _refusal(t, *over)
            await Notifier.wait(woken, min(remaining, recheck_s))
            if t.moved or self._r.topics.get(t.name) is not t:
                return  # closed or deleted meanwhile: the append says so
            state.dirty = True
            found = await self._over_quota(t, PRODUCER_POLICIES)
            if found is None:
                return
            over = found

    async def after_publish(self, t: Topic) -> None:
        t.quota.dirty = True
        if any(q.policy == EVICTION for q in t.policies.backlog_quotas.values()):
            await self.evict_backlog(t)

    # --- eviction ----------------------------------------------------------------------------------
    async def evict_backlog(self, t: Topic) -> int:
        """Apply the topic's consumer_backlog_eviction quotas it is over; the number of cursors
        moved (per subscription and partition). By size: every cursor behind the earliest
        position with at most limitSize bytes after it moves to it, so the slowest ones move
        just far enough. By age: messages older than limitTime are acked on every subscription."""
        moved = 0
        for kind, quota in list(t.policies.backlog_quotas.items()):
            if quota.policy != EVICTION or not await self._is_over(t, kind, quota):
                continue
            if kind == "destination_storage":
                moved += await self._evict_by_size(t, quota.limit_size or 0)
            else:
                before = _marks(t)
                await self._backlog.expire_messages(t.name, None, quota.limit_time or 0)
                moved += sum(1 for k, v in _marks(t).items() if before.get(k) != v)
            t.quota.dirty = True
        if moved:
            t.quota.evicted += moved
            t.quota.changed()
        return moved

    async def _evict_by_size(self, t: Topic, limit: int) -> int:
        moved = 0
        for partition, ml in enumerate(t.mls):
            target = ml.position_keeping(limit)
            if target is None:
                continue
            for name, cursor in sorted(ml.cursors.items()):
                if cursor.mark_delete_position >= target:
                    continue
                sub = await self._r.subscription(t, name)
                async with sub.lock:
                    sub.ack_before(partition, ml.next_position(target))
                moved += 1
        return moved

    async def check_backlog_quotas(self) -> list[str]:
        """The periodic check, over the topics marked since the last one (`topics.activity`):
        evict where a consumer_backlog_eviction quota is exceeded, and wake held produces to look
        again. Returns the topics something was evicted from."""
        evicted = []
        activity = self._r.activity
        for name in activity.take("quota"):
            t = self._r.topics.get(name)
            if t is None or not t.policies.backlog_quotas:
                continue
            t.quota.dirty = True  # measure again, and wake held produces to look again
            t.quota.wake.notify()
            moved = await self.evict_backlog(t)
            if moved:
                evicted.append(t.name)
            # A message-age quota has a deadline (the backlog ages unchanged); a size quota
            # waits for a produce or an ack to mark the topic again.
            if moved or "message_age" in t.policies.backlog_quotas:
                activity.keep("quota", name)
        return evicted

    # --- admin: backlog quotas -----------------------------------------------------------------------
    async def get_backlog_quotas(self, topic: str) -> dict[QuotaType, BacklogQuota]:
        t = await self._r.topic(topic)
        return dict(t.policies.backlog_quotas)

    async def set_backlog_quota(self, topic: str, quota_type: QuotaType, value: Any) -> None:
        t = await self._r.topic(topic)
        in_effect = t.policies.backlog_quotas.get(backlog_quota.check_type(quota_type))
        stored = backlog_quota.validate_quota(quota_type, value, in_effect)
        await self._update_quota_map(t.name, quota_type, stored)
        await self._r.apply_policies(t)

    async def delete_backlog_quota(self, topic: str, quota_type: QuotaType) -> None:
        backlog_quota.check_type(quota_type)
        t = await self._r.topic(topic)
        await self._update_quota_map(t.name, quota_type, None)
        await self._r.apply_policies(t)

    async def set_namespace_backlog_quota(self, namespace: str, quota_type: QuotaType, value: Any) -> None:
        await self._r.check_namespace(namespace)
        own = (await call_store(self._r.store.get_policies, namespace)).get(backlog_quota.POLICY)
        in_effect = backlog_quota.parse(own).get(backlog_quota.check_type(quota_type))
        stored = backlog_quota.validate_quota(quota_type, value, in_effect)
        await self._update_quota_map(namespace, quota_type, stored)
        await self._reapply_namespace(namespace)

    async def delete_namespace_backlog_quota(self, namespace: str, quota_type: QuotaType) -> None:
        backlog_quota.check_type(quota_type)
        await self._r.check_namespace(namespace)
        await self._update_quota_map(namespace, quota_type, None)
        await self._reapply_namespace(namespace)

    async def _update_quota_map(self, scope: str, quota_type: str, stored: dict[str, Any] | None) -> None:
        current = (await call_store(self._r.store.get_policies, scope)).get(backlog_quota.POLICY)
        quotas = dict(current) if isinstance(current, Mapping) else {}
        if stored is None:
            quotas.pop(quota_type, None)
        else:
            quotas[quota_type] = stored
        await call_store(self._r.store.update_policies, scope, {backlog_quota.POLICY: quotas or None})

    # --- admin: namespace policies -------------------------------------------------------------------
    async def get_namespace_policies(self, namespace: str) -> TopicPolicies:
        await self._r.check_namespace(namespace)
        stored = await call_store(self._r.store.get_policies, namespace)
        return policies.resolve(self._r.defaults, stored, {})

    async def set_namespace_policy(self, namespace: str, name: str, value: Any) -> None:
        """A namespace-level policy: the fallback of every topic of the namespace. An object
        policy given in part keeps the namespace's other fields."""
        stored_value = policies.validate(name, value)
        await self._r.check_namespace(namespace)
        stored = await call_store(self._r.store.get_policies, namespace)
        effective = policies.resolve(self._r.defaults, stored, {})
        changes = policies.scope_changes(name, stored_value, stored, effective)
        await call_store(self._r.store.update_policies, namespace, changes)
        await self._reapply_namespace(namespace)

    async def delete_namespace_policy(self, namespace: str, name: str) -> None:
        if name not in policies.POLICY_NAMES:
            raise InvalidPolicyError(name, f"unknown policy; known: {list(policies.POLICY_NAMES)}")
        await self._r.check_namespace(namespace)
        await call_store(self._r.store.update_policies, namespace, policies.removal(name))
        await self._reapply_namespace(namespace)

    async def _reapply_namespace(self, namespace: str) -> None:
        """Apply a namespace's change at once to its topics open here (those without their own
        value see it)."""
        for t in list(self._r.topics.values()):
            if names.namespace_of(t.name) == namespace:
                await self._r.apply_policies(t)


def _refusal(t: Topic, kind: QuotaType, quota: BacklogQuota) -> BacklogQuotaExceededError:
    if kind == "destination_storage":
        return BacklogQuotaExceededError(t.name, kind, quota.policy, quota.limit_size or 0, "bytes")
    return BacklogQuotaExceededError(t.name, kind, quota.policy, quota.limit_time or 0, "seconds")


def _marks(t: Topic) -> dict[tuple[int, str], Any]:
    return {(p, name): c.mark_delete_position for p, ml in enumerate(t.mls) for name, c in ml.cursors.items()}
