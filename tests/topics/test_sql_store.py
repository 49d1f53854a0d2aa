"""The topics service over the SQL metadata store (SQLite file and PostgreSQL): subscriptions,
policies and compaction triggers survive a broker restart."""

from __future__ import annotations

from managed_ledger.entry_format import Message
from tests.topics.conftest import Env
from topics.api import SubscriptionOptions

T = "public/default/sql"


async def test_produce_consume_restart(sql_env: Env) -> None:
    svc = sql_env.service
    assert await svc.list_namespaces("public") == ["public/default"]
    await svc.create_tenant("acme")
    await svc.create_namespace("acme/ns")
    await svc.create_topic(T, 2)
    await svc.set_policy(T, "deduplicationEnabled", True)
    await svc.create_subscription(T, "s", SubscriptionOptions("earliest", "exclusive", ack_timeout_ms=100))
    results = await svc.produce(T, "p", [Message(f"{i}".encode(), f"k{i}", sequence_id=i) for i in range(6)])
    assert not any(r.duplicate for r in results)
    got = await svc.receive(T, "s", 3, 0, "c1")
    await svc.ack(T, "s", [d.message.message_id for d in got])
    await svc.trigger_compaction(T)

    svc = await sql_env.restart()
    assert await svc.list_namespaces("acme") == ["acme/ns"]
    assert await svc.get_partitions(T) == 2
    assert (await svc.get_policies(T)).deduplication_enabled
    retry = await svc.produce(T, "p", [Message(b"5", "k5", sequence_id=5)])
    assert retry[0].duplicate  # dedup state survived the restart
    rest = await svc.receive(T, "s", 10, 0, "c2")
    seen = {d.message.value for d in got} | {d.message.value for d in rest}
    assert seen == {f"{i}".encode() for i in range(6)}
    assert (await svc.compaction_status(T))["status"] == "RUNNING"  # requested, kept across the restart
    assert all(s["requested"] for s in (await svc.compaction_status(T))["partitions"].values())
