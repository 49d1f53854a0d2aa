"""read_compacted: Pulsar's branch rule over a compacted ledger written as the compactor does
(kind-1 entries of surviving messages with their original ids, state CAS'd in the store)."""

from __future__ import annotations

from dataclasses import replace

from bookie.types import LedgerSpec
from managed_ledger.entry_format import Message, encode_compacted
from managed_ledger.metadata.api import CompactionStatus, LedgerState
from managed_ledger.position import MessageId
from tests.topics.conftest import Env
from topics.api import SubscriptionOptions

T = "public/default/kv"


async def compact(env: Env, topic: str, horizon: MessageId, keep: list[MessageId]) -> None:
    """Write a compacted ledger holding `keep` (read from the topic) with `horizon`."""
    survivors = [await env.service.get_message(topic, mid) for mid in keep]
    meta = env.store.create_ledger(("b1:3181",), 1, 1, env.clock.now_ms())
    writer = await env.client.create_ledger(LedgerSpec(meta.ledger_id, meta.ensemble))
    payload = encode_compacted(survivors)
    await writer.add_entry(payload)
    last = await writer.close()
    env.store.update_ledger(
        replace(meta, state=LedgerState.CLOSED, last_entry_id=last, length_bytes=len(payload))
    )
    state = env.store.get_compaction(topic)
    env.store.put_compaction(
        replace(
            state,
            compacted_ledger_id=meta.ledger_id,
            horizon=tuple(horizon),  # type: ignore[arg-type]
            status=CompactionStatus.SUCCESS,
            compacted_entries=1,
            compacted_size_bytes=len(payload),
        )
    )


async def setup(env: Env) -> list[MessageId]:
    ids = []
    for key, value in [("k1", "a"), ("k2", "b"), ("k1", "c")]:
        (r,) = await env.service.produce(T, None, [Message(value.encode(), key)])
        assert r.message_id is not None
        ids.append(r.message_id)
    await compact(env, T, horizon=ids[2], keep=[ids[1], ids[2]])
    (r,) = await env.service.produce(T, None, [Message(b"d", "k3")])
    assert r.message_id is not None
    return [*ids, r.message_id]


async def test_reader_branches_at_the_horizon(env: Env) -> None:
    svc = env.service
    ids = await setup(env)
    page = await svc.read(T, "earliest", 10, True, 0)
    assert [m.value for m in page.messages] == [b"b", b"c", b"d"]
    assert [m.message_id for m in page.messages] == ids[1:]
    plain = await svc.read(T, "earliest", 10, False, 0)
    assert [m.value for m in plain.messages] == [b"a", b"b", b"c", b"d"]
    first = await svc.read(T, "earliest", 1, True, 0)
    assert first.next is not None
    assert [m.value for m in first.messages] == [b"b"]
    rest = await svc.read(T, ("after", first.messages[0].message_id), 10, True, 0)
    assert [m.value for m in rest.messages] == [b"c", b"d"]
    assert await svc.last_message_id(T, True) == ids[3]
    internal = await svc.internal_stats(T)
    assert internal["compactionHorizon"] == str(ids[2]) and internal["compactedLedger"]["entries"] == 1


async def test_subscription_reads_compacted_then_topic_and_acks_up_to_horizon(env: Env) -> None:
    svc = env.service
    ids = await setup(env)
    await svc.create_subscription(T, "c", SubscriptionOptions("earliest", read_compacted=True))
    got = await svc.receive(T, "c", 10, 0, None)
    assert [d.message.value for d in got] == [b"b", b"c", b"d"]
    await svc.ack(T, "c", [d.message.message_id for d in got])
    stats = await svc.stats(T)
    assert stats["subscriptions"]["c"]["msgBacklog"] == 0  # a (compacted away) counts as consumed
    await svc.seek(T, "c", "earliest")
    again = await svc.receive(T, "c", 10, 0, None)
    assert [d.message.message_id for d in again] == ids[1:]


async def test_last_message_id_of_a_view_with_nothing_after_the_horizon(env: Env) -> None:
    svc = env.service
    ids = []
    for key, value in [("k1", "a"), ("k1", "")]:
        (r,) = await svc.produce(T, None, [Message(value.encode(), key)])
        assert r.message_id is not None
        ids.append(r.message_id)
    await compact(env, T, horizon=ids[1], keep=[ids[0]])
    assert await svc.last_message_id(T, True) == ids[0]
    assert await svc.last_message_id(T, False) == ids[1]
