"""compactionPolicy on the topics service: set in part on a topic and a namespace, the legacy
key-less policy folded in; the broker's triggers (threshold, maxLagMs, minCleanableDirtyRatio)
each firing on its own and none when all are 0; and retention holding what compaction has not
read (Pulsar's `__compaction` cursor). Real compaction runs use the reference engine over the
same in-memory store and ledgers."""

from __future__ import annotations

from typing import Any

import pytest

from compactor.config import CompactorConfig
from compactor.reference import ReferenceEngine
from compactor.runner import CompactionRunner
from managed_ledger.api import ManagedLedger
from managed_ledger.entry_format import Message
from managed_ledger.metadata.api import CompactionStatus
from tests.topics.conftest import Env
from topics.api import CompactionPolicy, SubscriptionOptions
from topics.errors import InvalidPolicyError
from topics.service import TopicService

T = "public/default/cpol"
NS = "public/default"
CPOL = "compactionPolicy"


def runner(env: Env) -> CompactionRunner:
    config = CompactorConfig(bookies=("b1:3181",))
    return CompactionRunner(env.store, env.client, config, ReferenceEngine(env.client), env.clock)


def ml_of(svc: TopicService) -> ManagedLedger:
    return svc._topics[T].mls[0]


async def send(svc: TopicService, *keys: str, size: int = 100) -> None:
    await svc.produce(T, None, [Message(b"v" * size, key=k) for k in keys])


async def test_set_in_part_falls_back_field_by_field(svc: TopicService, env: Env) -> None:
    await svc.create_topic(T)
    assert (await svc.get_policies(T)).compaction == CompactionPolicy()
    await svc.set_namespace_policy(NS, CPOL, {"maxLagMs": 5_000, "keylessPolicy": "keep"})
    await svc.set_policy(T, CPOL, {"deleteRetentionMs": 1_000})
    await svc.set_policy(T, CPOL, {"minCleanableDirtyRatio": 0.5})
    assert (await svc.get_policies(T)).compaction == CompactionPolicy("keep", 1_000, 5_000, 0.5)
    assert env.store.get_policies(T)[CPOL] == {"deleteRetentionMs": 1_000, "minCleanableDirtyRatio": 0.5}
    for bad in ({"maxLagMs": -1}, {"minCleanableDirtyRatio": 2}, {"nope": 1}, {"keylessPolicy": 1}):
        with pytest.raises(InvalidPolicyError):
            await svc.set_policy(T, CPOL, bad)
        with pytest.raises(InvalidPolicyError):
            await svc.set_namespace_policy(NS, CPOL, bad)
    assert (await svc.get_policies(T)).compaction == CompactionPolicy("keep", 1_000, 5_000, 0.5)
    await svc.delete_policy(T, CPOL)
    assert (await svc.get_policies(T)).compaction == CompactionPolicy("keep", 0, 5_000, 0.0)
    await svc.delete_namespace_policy(NS, CPOL)
    assert (await svc.get_policies(T)).compaction == CompactionPolicy()


async def test_a_stored_legacy_keyless_policy_is_read_then_folded_in(svc: TopicService, env: Env) -> None:
    await svc.create_topic(T)
    env.store.update_policies(T, {"keylessCompactionPolicy": "keep"})  # as an older broker stored it
    assert (await svc.get_policies(T)).compaction.keyless_policy == "keep"
    await svc.set_policy(T, CPOL, {"maxLagMs": 10})
    assert env.store.get_policies(T) == {CPOL: {"maxLagMs": 10, "keylessPolicy": "keep"}}
    env.store.update_policies(NS, {"keylessCompactionPolicy": "keep"})
    await svc.delete_namespace_policy(NS, CPOL)
    assert "keylessCompactionPolicy" not in env.store.get_policies(NS)


# --- triggers --------------------------------------------------------------------------------------


async def test_no_trigger_fires_when_all_are_zero(svc: TopicService, env: Env) -> None:
    await send(svc, "a", "b", size=10_000)
    env.clock.advance(10**9)
    await svc.set_policy(T, CPOL, {"deleteRetentionMs": 5, "keylessPolicy": "keep"})  # no trigger
    assert await svc.check_compaction_thresholds() == []
    assert env.store.get_compaction(T).status == CompactionStatus.NOT_RUN


async def test_threshold_alone(svc: TopicService, env: Env) -> None:
    await svc.create_topic(T)
    await svc.set_policy(T, "compactionThreshold", 150)
    await send(svc, "a")
    assert await svc.check_compaction_thresholds() == []
    await send(svc, "b")
    assert await svc.check_compaction_thresholds() == [T]


async def test_max_lag_alone_reads_the_first_entry_once(svc: TopicService, env: Env) -> None:
    await svc.create_topic(T)
    await svc.set_policy(T, CPOL, {"maxLagMs": 1_000})
    assert await svc.check_compaction_thresholds() == []  # nothing stored: no lag
    await send(svc, "a")
    ml = ml_of(svc)
    reads = count_reads(ml)
    env.clock.advance(1_000)
    await send(svc, "b")  # a young message does not hide the old one
    assert await svc.check_compaction_thresholds() == []  # exactly maxLagMs old: not over it
    env.clock.advance(1)
    assert await svc.check_compaction_thresholds() == [T]
    assert reads == [ml.first_position]  # one read of the first entry after the horizon, cached
    state = await runner(env).run(T)
    assert state.status == CompactionStatus.SUCCESS
    await send(svc, "c")  # after the new horizon: its own lag counts from now
    env.clock.advance(1_000)
    assert await svc.check_compaction_thresholds() == []
    env.clock.advance(1)
    assert await svc.check_compaction_thresholds() == [T]
    assert len(reads) == 2


def count_reads(ml: Any) -> list[Any]:
    """Record the positions `ml.read_entry` is asked for (and still read them)."""
    reads: list[Any] = []
    real = ml.read_entry

    async def read_entry(position: Any) -> bytes:
        reads.append(position)
        payload: bytes = await real(position)
        return payload

    ml.read_entry = read_entry
    return reads


async def test_dirty_ratio_alone(svc: TopicService, env: Env) -> None:
    await svc.create_topic(T)
    await svc.set_policy(T, CPOL, {"minCleanableDirtyRatio": 0.5})
    assert await svc.check_compaction_thresholds() == []  # nothing stored
    await send(svc, "a", "b", "c", "d")
    assert await svc.check_compaction_thresholds() == [T]  # nothing compacted yet: all of it is dirty
    compacted = await runner(env).run(T)
    assert compacted.status == CompactionStatus.SUCCESS and compacted.compacted_size_bytes > 0
    assert await svc.check_compaction_thresholds() == []  # nothing after the horizon
    # one entry as big as the compacted view or smaller is at most half of the two
    await send(svc, "a", size=compacted.compacted_size_bytes // 2)
    assert await svc.check_compaction_thresholds() == []
    await send(svc, "b", size=compacted.compacted_size_bytes)
    assert await svc.check_compaction_thresholds() == [T]


# --- retention holds what compaction has not read ---------------------------------------------------


async def consumed_topic(svc: TopicService, entries: int, policy: tuple[Any, Any] | None) -> ManagedLedger:
    """A topic with `policy` of one entry per ledger, every entry acked by its only
    subscription: retention 0 may delete every closed ledger."""
    await svc.create_topic(T)
    if policy is not None:
        await svc.set_policy(T, *policy)
    await svc.set_policy(T, "rolloverPolicy", {"maxEntriesPerLedger": 1, "minRolloverTimeMs": 0})
    await svc.create_subscription(T, "s", SubscriptionOptions(initial_position="earliest"))
    for i in range(entries):
        await send(svc, f"k{i}")
    got = await svc.receive(T, "s", 100, 0, None)
    await svc.ack_cumulative(T, "s", got[-1].message.message_id)
    return ml_of(svc)


async def test_retention_keeps_what_compaction_has_not_read(svc: TopicService, env: Env) -> None:
    ml = await consumed_topic(svc, 3, ("compactionThreshold", 10**9))  # on, but never reached
    ledgers = [info.ledger_id for info in ml.ledger_list]
    assert len(ledgers) == 3
    await ml.trim()
    assert [info.ledger_id for info in ml.ledger_list] == ledgers  # no run yet: all kept
    state = await runner(env).run(T)
    assert state.horizon is not None and state.horizon[0] == ledgers[-1]
    await ml.trim()
    assert [info.ledger_id for info in ml.ledger_list] == ledgers  # the broker has not looked yet
    await svc.check_compaction_thresholds()  # it learns the horizon
    await ml.trim()
    assert [info.ledger_id for info in ml.ledger_list] == ledgers[-1:]  # compacted: retention rules


async def test_ledgers_after_the_horizon_survive_retention(svc: TopicService, env: Env) -> None:
    ml = await consumed_topic(svc, 2, (CPOL, {"maxLagMs": 10**9}))  # any trigger turns the hold on
    await runner(env).run(T)  # the horizon is the second entry
    await send(svc, "k9")
    got = await svc.receive(T, "s", 100, 0, None)
    await svc.ack_cumulative(T, "s", got[-1].message.message_id)
    await svc.produce(T, None, [Message(b"next")])  # closes the third ledger
    ledgers = [info.ledger_id for info in ml.ledger_list]
    await svc.check_compaction_thresholds()
    await ml.trim()
    assert [info.ledger_id for info in ml.ledger_list] == ledgers[2:]  # the third is not compacted
    await svc.delete_policy(T, CPOL)  # compaction off: retention alone decides
    await ml.trim()
    assert [info.ledger_id for info in ml.ledger_list] == ledgers[3:]


async def test_without_compaction_retention_alone_decides(svc: TopicService, env: Env) -> None:
    ml = await consumed_topic(svc, 3, None)
    await ml.trim()
    assert len(ml.ledger_list) == 1  # only the current ledger is left
    assert not ml.config.retain_uncompacted
