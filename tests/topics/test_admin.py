"""Admin plane: tenants, namespaces, topics, delete/unload, stats, policies, compaction."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from bookie.recovery_store import UnderReplicatedLedger
from managed_ledger.api import ManagedLedgerConfig
from managed_ledger.entry_format import Message
from managed_ledger.errors import ManagedLedgerClosedError
from managed_ledger.metadata.api import CompactionStatus, LedgerState
from tests.topics.conftest import Env
from topics import compaction_lease
from topics.api import SubscriptionOptions
from topics.config import TopicsConfig
from topics.errors import (
    CompactionConflictError,
    InvalidArgumentError,
    InvalidNameError,
    InvalidPolicyError,
    NamespaceExistsError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    SubscriptionNotFoundError,
    TenantExistsError,
    TenantNotEmptyError,
    TenantNotFoundError,
    TopicBusyError,
    TopicExistsError,
    TopicNotFoundError,
)
from topics.service import TopicService

T = "public/default/admin"


async def test_tenants_and_namespaces(svc: TopicService) -> None:
    assert await svc.list_tenants() == ["public"]
    assert await svc.list_namespaces("public") == ["public/default"]
    await svc.create_tenant("acme")
    with pytest.raises(TenantExistsError):
        await svc.create_tenant("acme")
    with pytest.raises(InvalidNameError):
        await svc.create_tenant("ac me")
    with pytest.raises(TenantNotFoundError):
        await svc.create_namespace("ghost/ns")
    await svc.create_namespace("acme/prod")
    with pytest.raises(NamespaceExistsError):
        await svc.create_namespace("acme/prod")
    await svc.produce("acme/prod/t", None, [Message(b"x")])
    assert await svc.list_topics("acme/prod") == ["persistent://acme/prod/t"]
    with pytest.raises(TenantNotEmptyError):
        await svc.delete_tenant("acme")
    with pytest.raises(NamespaceNotEmptyError):
        await svc.delete_namespace("acme/prod")
    await svc.delete_topic("acme/prod/t")
    await svc.delete_namespace("acme/prod")
    await svc.delete_tenant("acme")
    assert await svc.list_tenants() == ["public"]
    with pytest.raises(NamespaceNotFoundError):
        await svc.list_topics("public/nope")
    with pytest.raises(TenantNotFoundError):
        await svc.list_namespaces("nope")


async def test_create_get_partitions_and_delete(svc: TopicService, env: Env) -> None:
    await svc.create_topic(T)
    with pytest.raises(TopicExistsError):
        await svc.create_topic(T)
    with pytest.raises(InvalidArgumentError):
        await svc.create_topic("public/default/many", 10**6)
    assert await svc.get_partitions(T) == 0
    with pytest.raises(TopicNotFoundError):
        await svc.get_partitions("public/default/none")
    await svc.produce(T, None, [Message(b"a")])
    await svc.create_subscription(T, "s", SubscriptionOptions())
    with pytest.raises(TopicBusyError):
        await svc.delete_topic(T)
    ledgers_before = set(env.client.ledgers)
    assert ledgers_before
    await svc.delete_topic(T, force=True)
    assert not set(env.client.ledgers) & ledgers_before  # the bookies' ledgers are gone too
    with pytest.raises(TopicNotFoundError):
        await svc.stats(T)
    await svc.produce(T, None, [Message(b"fresh")])  # auto-created anew, empty of the old
    page = await svc.read(T, "earliest", 10, False, 0)
    assert [m.value for m in page.messages] == [b"fresh"]
    with pytest.raises(SubscriptionNotFoundError):
        await svc.receive(T, "s", 1, 0, None)


async def test_unload_rolls_the_ledger(svc: TopicService) -> None:
    (first,) = await svc.produce(T, None, [Message(b"a")])
    await svc.unload(T)
    (second,) = await svc.produce(T, None, [Message(b"b")])
    assert first.message_id is not None and second.message_id is not None
    assert second.message_id.ledger_id > first.message_id.ledger_id
    internal = await svc.internal_stats(T)
    assert [lg["ledgerId"] for lg in internal["ledgers"]] == [
        first.message_id.ledger_id,
        second.message_id.ledger_id,
    ]


async def test_stats_shape(svc: TopicService) -> None:
    await svc.create_subscription(T, "s", SubscriptionOptions(initial_position="earliest"))
    await svc.produce(T, None, [Message(b"12345"), Message(b"678", "k")])
    await svc.receive(T, "s", 1, 0, None)
    stats = await svc.stats(T)
    assert stats["msgInCounter"] == 2 and stats["bytesInCounter"] == 9
    assert stats["storageSize"] > 0 and stats["backlogSize"] == stats["storageSize"]
    sub = stats["subscriptions"]["s"]
    # The backlog counts messages, delivered-but-unacked ones included (Pulsar's rule).
    assert (sub["type"], sub["msgBacklog"], sub["unackedMessages"]) == ("shared", 2, 1)
    assert stats["compaction"] == {
        "lastCompactionRemovedEventCount": 0,
        "lastCompactionSucceedTimestamp": 0,
        "lastCompactionFailedTimestamp": 0,
        "lastCompactionDurationTimeInMills": 0,
    }
    internal = await svc.internal_stats(T)
    assert internal["compactedLedger"] == {"ledgerId": -1, "entries": -1, "size": -1}
    assert internal["compactionHorizon"] is None
    assert internal["entriesAddedCounter"] == 1 and "s" in internal["cursors"]


async def test_internal_stats_ledgers_show_their_ensembles_and_replication(
    svc: TopicService, env: Env
) -> None:
    (sent,) = await svc.produce(T, None, [Message(b"a")])
    assert sent.message_id is not None
    ledger_id = sent.message_id.ledger_id
    (ledger,) = (await svc.internal_stats(T))["ledgers"]
    ensemble = list(env.store.get_ledger(ledger_id).ensemble)
    assert ledger["underReplicated"] is False and ledger["ensembles"] == {"0": ensemble}
    meta = env.store.get_ledger(ledger_id)  # what a reader needs to reach the entries (quire_spark)
    assert (ledger["writeQuorum"], ledger["ackQuorum"]) == (meta.write_quorum, meta.ack_quorum)
    env.store.put_underreplicated(UnderReplicatedLedger(ledger_id, (ensemble[0],)))
    (ledger,) = (await svc.internal_stats(T))["ledgers"]
    assert ledger["underReplicated"] is True


async def test_policies_resolve_topic_over_namespace_over_settings(svc: TopicService, env: Env) -> None:
    await svc.create_topic(T)
    base = await svc.get_policies(T)
    assert base.retention_time_minutes == 0 and base.compaction_threshold_bytes == 0
    await svc.set_namespace_policy("public/default", "retention", {"retentionTimeInMinutes": 60})
    await svc.set_policy(T, "retention", {"retentionSizeInMB": 5})
    await svc.set_policy(T, "rolloverPolicy", {"maxEntriesPerLedger": 2, "minRolloverTimeMs": 0})
    effective = await svc.get_policies(T)
    assert (effective.retention_time_minutes, effective.retention_size_mb) == (60, 5)
    assert effective.max_entries_per_ledger == 2
    for _ in range(3):
        await svc.produce(T, None, [Message(b"x")])
    assert len((await svc.internal_stats(T))["ledgers"]) == 2  # the open ledger took the new limit
    await svc.delete_policy(T, "retention")
    effective = await svc.get_policies(T)
    assert (effective.retention_time_minutes, effective.retention_size_mb) == (60, 0)
    for name, bad in [
        ("retention", {"retentionTimeInMinutes": -2}),
        ("retention", {"nope": 1}),
        ("compactionThreshold", True),
        ("compactionThreshold", -1),
        ("deduplicationEnabled", "yes"),
        ("rolloverPolicy", {"minRolloverTimeMs": 10, "maxRolloverTimeMs": 5}),
    ]:
        with pytest.raises(InvalidPolicyError):
            await svc.set_policy(T, name, bad)  # type: ignore[arg-type]


async def test_trigger_compaction_and_conflict(svc: TopicService, env: Env) -> None:
    await svc.create_topic(T)
    assert (await svc.compaction_status(T))["status"] == "NOT_RUN"
    await svc.trigger_compaction(T)
    assert (await svc.compaction_status(T))["status"] == "RUNNING"  # from the moment it is accepted
    with pytest.raises(CompactionConflictError):
        await svc.trigger_compaction(T)  # already requested
    state = env.store.get_compaction(T)
    assert state.requested and state.lease_holder == ""
    lease_ms = TopicsConfig().compaction_lease_ms
    assert state.lease_expires_ms == env.clock.now_ms() + lease_ms
    # a compactor takes it: still a conflict while its lease holds
    env.store.put_compaction(compaction_lease.taken(state, "c-1", env.clock.now_ms(), lease_ms))
    with pytest.raises(CompactionConflictError):
        await svc.trigger_compaction(T)
    assert (await svc.compaction_status(T))["status"] == "RUNNING"


async def test_a_requested_run_covers_every_acknowledged_message(svc: TopicService, env: Env) -> None:
    """A run reads an open ledger only up to its bookies' LAC, one entry behind the last
    acknowledged (compactor/plan.py): the owner closes the ledger being written before it
    requests the run, so the ledger's end, in its metadata, is the last acknowledged entry."""
    await svc.create_topic(T)
    await svc.produce(T, None, [Message(b"a", "k")])
    (last,) = await svc.produce(T, None, [Message(b"b", "k")])
    assert last.message_id is not None
    await svc.trigger_compaction(T)
    written = env.store.get_ledger(last.message_id.ledger_id)
    assert (written.state, written.last_entry_id) == (LedgerState.CLOSED, last.message_id.entry_id)


async def test_a_request_no_compactor_takes_expires(svc: TopicService, env: Env) -> None:
    await svc.create_topic(T)
    await svc.trigger_compaction(T)
    env.clock.advance(TopicsConfig().compaction_lease_ms - 1)
    assert (await svc.compaction_status(T))["status"] == "RUNNING"
    env.clock.advance(1)
    status = await svc.compaction_status(T)
    assert (status["status"], status["requested"]) == ("ERROR", False)
    assert status["lastError"].startswith(compaction_lease.NO_TAKER)
    assert env.store.get_compaction(T).status == CompactionStatus.ERROR  # recorded, not only shown
    await svc.trigger_compaction(T)  # a new request is accepted
    assert (await svc.compaction_status(T))["status"] == "RUNNING"


async def test_a_run_whose_lease_lapses_is_error_for_the_next_trigger(svc: TopicService, env: Env) -> None:
    await svc.create_topic(T)
    await svc.trigger_compaction(T)
    lease_ms = TopicsConfig().compaction_lease_ms
    state = env.store.get_compaction(T)
    running = env.store.put_compaction(
        replace(compaction_lease.taken(state, "c-1", env.clock.now_ms(), lease_ms), run_ledger_id=7)
    )
    env.clock.advance(lease_ms)
    await svc.trigger_compaction(T)  # the dead run is ERROR first, then a new run is requested
    again = env.store.get_compaction(T)
    assert (again.status, again.requested, again.lease_holder) == (CompactionStatus.RUNNING, True, "")
    assert again.run_ledger_id == 7  # the dead run's ledger, for the compactor to delete
    assert again.last_failed_ms == env.clock.now_ms() and again.version == running.version + 2
    env.clock.advance(lease_ms)
    assert env.store.get_compaction(T).status == CompactionStatus.RUNNING  # nobody looked yet
    assert await svc.check_compaction_thresholds() == []  # threshold 0: not requested again
    assert env.store.get_compaction(T).status == CompactionStatus.RUNNING


async def test_auto_compaction_threshold(svc: TopicService, env: Env) -> None:
    await svc.produce(T, None, [Message(b"x" * 100)])
    assert await svc.check_compaction_thresholds() == []  # threshold 0: off
    await svc.set_policy(T, "compactionThreshold", 50)
    assert await svc.check_compaction_thresholds() == [T]
    state = env.store.get_compaction(T)
    assert state.requested and state.status == CompactionStatus.RUNNING
    assert await svc.check_compaction_thresholds() == []  # already requested
    # the run's compactor dies: the check sees the lapsed lease and requests a new run
    lease_ms = TopicsConfig().compaction_lease_ms
    env.store.put_compaction(compaction_lease.taken(state, "c-1", env.clock.now_ms(), lease_ms))
    assert await svc.check_compaction_thresholds() == []
    env.clock.advance(lease_ms)
    assert await svc.check_compaction_thresholds() == [T]
    again = env.store.get_compaction(T)
    assert again.requested and again.last_error == "" and again.last_failed_ms == env.clock.now_ms()


async def test_waiters_learn_of_deletes(svc: TopicService) -> None:
    await svc.create_subscription(T, "s", SubscriptionOptions())
    waiting = asyncio.create_task(svc.receive(T, "s", 1, 10_000, None))
    reading = asyncio.create_task(svc.read(T, "latest", 1, False, 10_000))
    await asyncio.sleep(0.01)
    await svc.delete_subscription(T, "s")
    with pytest.raises(SubscriptionNotFoundError):
        await asyncio.wait_for(waiting, 5)
    await svc.delete_topic(T)
    with pytest.raises(TopicNotFoundError):
        await asyncio.wait_for(reading, 5)


async def test_close_dependencies(env: Env) -> None:
    svc = TopicService(env.store, env.factory, env.client, TopicsConfig(), close_dependencies=True)
    await svc.start()
    await svc.produce(T, None, [Message(b"a")])
    assert await svc.ready() == {"metadata": True, "bookies": True}
    await svc.close()
    with pytest.raises(ManagedLedgerClosedError):
        await env.factory.open("x/y/z", ManagedLedgerConfig())
