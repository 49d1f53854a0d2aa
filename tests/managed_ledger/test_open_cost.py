"""What opening a managed ledger costs in store calls and bookie round trips (issue 26): a new one
two calls (the read that finds nothing, the insert), one reopened after a clean close four (the
read, the claim, then the cursors and the dedup snapshot again: a previous owner may have
flushed them before the claim) and no recovery, one reopened after a crash still fences and
recovers its last ledger."""

from __future__ import annotations

from typing import Any

from bookie.memory import InMemoryLedgerClient
from managed_ledger.errors import ManagedLedgerFencedError
from managed_ledger.metadata.api import LedgerState
from managed_ledger.metadata.memory import InMemoryMetadataStore
from managed_ledger.position import Position
from tests.managed_ledger.ml_support import CountingStore, Env, batch, config


class CountingClient:
    """Counts the ledger client's recoveries (the fencing round on the bookies)."""

    def __init__(self, inner: InMemoryLedgerClient) -> None:
        self.inner = inner
        self.recoveries = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name != "recover":
            return attr

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.recoveries += 1
            return await attr(*args, **kwargs)

        return counted


def counting_env() -> tuple[Env, CountingStore, CountingClient]:
    store = CountingStore(InMemoryMetadataStore())
    client = CountingClient(InMemoryLedgerClient())
    env = Env(store=store, client=client)  # type: ignore[arg-type]
    return env, store, client


async def test_a_new_managed_ledger_costs_two_store_calls() -> None:
    env, store, _ = counting_env()
    factory = env.factory()
    await factory.open("warm", config())  # the first open also sweeps interrupted deletions
    store.calls.clear()
    ml = await factory.open("t", config())
    assert store.calls == {"load_managed_ledger": 1, "create_managed_ledger": 1}
    assert ml.cursors == {} and ml.ledger_list.ids == ()
    # Not claimed again, yet the record is this owner's: its first write moves it on.
    await ml.append(b"x")
    meta = env.store.get_managed_ledger("t")
    assert meta is not None and len(meta.ledger_ids) == 1


async def test_a_cleanly_closed_managed_ledger_reopens_without_recovery() -> None:
    env, store, client = counting_env()
    first = env.factory()
    ml = await first.open("t", config(dedup=True))
    for i in range(3):
        await ml.append(batch(i, "p", i), producer_name="p", highest_sequence_id=i)
    cursor = await ml.open_cursor("sub", "earliest")
    cursor.ack_cumulative(Position(ml.ledger_list.ids[0], 0))
    await first.close()
    (ledger_id,) = env.store.get_managed_ledger("t").ledger_ids  # type: ignore[union-attr]
    assert env.store.get_ledger(ledger_id).state == LedgerState.CLOSED

    second = env.factory()
    await second.open("warm", config())
    store.calls.clear()
    client.recoveries = 0
    again = await second.open("t", config(dedup=True))
    # The read, the claim, then cursors and snapshot as they are after the claim.
    assert store.calls == {
        "load_managed_ledger": 1,
        "update_managed_ledger": 1,
        "list_cursors": 1,
        "get_dedup_snapshot": 1,
    }
    assert client.recoveries == 0
    assert again.cursors["sub"].mark_delete_position == Position(ledger_id, 0)
    assert again.ledger_list.total_entries() == 3
    assert again.dedup_highest("p") == 2  # from the snapshot


async def test_after_a_crash_the_last_ledger_is_still_fenced_and_recovered() -> None:
    env, _, client = counting_env()
    old = await env.factory().open("t", config())
    await old.append(b"a")
    # The old owner's process is gone without closing (its ledger stays OPEN); a new one opens.
    (ledger_id,) = env.store.get_managed_ledger("t").ledger_ids  # type: ignore[union-attr]
    assert env.store.get_ledger(ledger_id).state == LedgerState.OPEN
    client.recoveries = 0
    new = await env.factory().open("t", config())
    assert client.recoveries == 1
    assert env.store.get_ledger(ledger_id).state == LedgerState.CLOSED
    assert new.ledger_list.total_entries() == 1
    try:
        await old.append(b"late")
    except ManagedLedgerFencedError:
        pass
    else:
        raise AssertionError("the old owner wrote after the new one opened")
    assert env.store.get_ledger(ledger_id).last_entry_id == 0
