"""A subscription's backlog from the admin side, in Pulsar's terms: peek, examinemessage, skip,
clear-backlog (skip_all), expire by age, and the message TTL that expires by policy. The TTL
loop runs in `topics.maintenance`."""

from __future__ import annotations

from typing import Literal

from managed_ledger.entry_format import StoredMessage
from topics.errors import InvalidArgumentError, MessageNotFoundError
from topics.meters import count_expired
from topics.readers import decode_entry
from topics.registry import TopicRegistry
from topics.subscriptions import Subscription
from topics.topic import Topic


async def unacked_messages(sub: Subscription, partition: int, limit: int) -> list[StoredMessage]:
    """The first `limit` messages of `partition` not acked by `sub`, delivered or not (Pulsar's
    peek). The caller holds the subscription's lock."""
    ml, cursor = sub.mls[partition], sub.cursors[partition]
    out: list[StoredMessage] = []
    start = ml.next_position(cursor.mark_delete_position)
    while len(out) < limit:
        entries = await ml.read_entries(start, 64)
        if not entries:
            break
        for pos, payload in entries:
            if cursor.is_acked(pos):
                continue
            acked = sub.batch_acks(pos)
            for m in decode_entry(sub.topic, pos.ledger_id, pos.entry_id, payload):
                if acked is None or m.message_id.batch_index not in acked:
                    out.append(m)
        start = ml.next_position(entries[-1][0])
    return out[:limit]


class BacklogAdmin:
    """A subscription's backlog from the admin side (see the module's docstring)."""

    def __init__(self, registry: TopicRegistry) -> None:
        self._r = registry

    async def peek(self, topic: str, subscription: str, n: int) -> StoredMessage:
        self._check_position(n)
        t = await self._r.topic(topic)
        sub = await self._r.subscription(t, subscription)
        left = n
        async with sub.lock:
            for partition in range(len(t.mls)):  # partition by partition, in order
                found = await unacked_messages(sub, partition, left)
                if len(found) >= left:
                    return found[left - 1]
                left -= len(found)
        raise MessageNotFoundError(t.name, f"position {n} past the backlog of {subscription}")

    async def examine_message(
        self, topic: str, initial_position: Literal["earliest", "latest"], n: int
    ) -> StoredMessage:
        self._check_position(n)
        t = await self._r.topic(topic)
        if t.partitions:  # as Pulsar: its partitions are the topics to examine
            raise InvalidArgumentError(f"examining messages of partitioned topic {t.name} is not allowed")
        ml = t.mls[0]
        position = ml.position_at(n - 1 if initial_position == "earliest" else -n)
        if position is None:
            raise MessageNotFoundError(t.name, f"no entry {n} from the {initial_position}")
        payload = await ml.read_entry(position)
        return decode_entry(t.name, position.ledger_id, position.entry_id, payload)[0]

    async def skip(self, topic: str, subscription: str, n: int) -> None:
        self._check_position(n)
        t = await self._r.topic(topic)
        sub = await self._r.subscription(t, subscription)
        async with sub.lock:
            for partition in range(len(t.mls)):
                found = await unacked_messages(sub, partition, n)
                await sub.ack([m.message_id for m in found])
        t.notifier.notify()
        t.quota.changed()

    async def skip_all(self, topic: str, subscription: str) -> None:
        t = await self._r.topic(topic)
        sub = await self._r.subscription(t, subscription)
        async with sub.lock:
            for partition in range(len(t.mls)):
                sub.ack_all(partition)
        t.quota.changed()

    @staticmethod
    def _check_position(n: int) -> None:
        if n < 1:
            raise InvalidArgumentError(f"a message position counts from 1, got {n}")

    async def expire_messages(self, topic: str, subscription: str | None, seconds: int) -> None:
        if seconds < 0:
            raise InvalidArgumentError(f"expiry time must be >= 0 seconds, got {seconds}")
        t = await self._r.topic(topic)
        names_ = [subscription] if subscription is not None else sorted(t.mls[0].cursors)
        cutoff = self._r.clock.now_ms() - seconds * 1000
        # The first entry young enough to stay, per partition (None: every entry is older).
        keep = [await ml.find_position_by_publish_time(cutoff) for ml in t.mls]
        for name in names_:
            sub = await self._r.subscription(t, name)
            async with sub.lock:
                before = [c.backlog for c in sub.cursors]
                for partition, first_kept in enumerate(keep):
                    if first_kept is None:
                        sub.ack_all(partition)
                    else:
                        sub.ack_before(partition, first_kept)
                per_entry = [t.meters.messages_per_entry(p) for p in range(len(t.mls))]
                count_expired(t.meters.subscription(name), per_entry, before, sub.cursors)
        t.quota.changed()

    async def expire_by_ttl(self) -> list[str]:
        """Apply the message TTL (0 = off) on all subscriptions of the topics marked since the
        last check (`topics.activity`); returns the topics it was applied to. A topic with a TTL
        and a backlog is looked at again; one with no backlog waits for a produce or a seek."""
        applied = []
        activity = self._r.activity
        for name in activity.take("ttl"):
            t = self._r.topics.get(name)
            if t is None:
                continue
            ttl = t.policies.message_ttl_seconds
            if ttl > 0 and _has_backlog(t):
                await self.expire_messages(t.name, None, ttl)
                applied.append(t.name)
                if _has_backlog(t):
                    activity.keep("ttl", name)
        return applied


def _has_backlog(t: Topic) -> bool:
    return any(c.backlog for ml in t.mls for c in ml.cursors.values())
