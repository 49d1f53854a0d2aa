"""The ownership contract of every MetadataStore (in-memory, SQLite, PostgreSQL): broker
sessions, topic claims that only one claimer wins, and ownerships that die with their session."""

from __future__ import annotations

import threading

from managed_ledger.metadata.api import BrokerRecord, MetadataStore, TopicOwner
from tests.managed_ledger.test_metadata_contract import Opener, opener, store

__all__ = ["opener", "store"]  # the fixtures, imported so pytest finds them here

NOW = 1_000_000


def _broker(broker_id: str, session: str, expires_ms: int = NOW + 5_000) -> BrokerRecord:
    return BrokerRecord(broker_id, session, f"http://{broker_id}", started_ms=NOW, expires_ms=expires_ms)


def test_registered_brokers_are_listed_while_their_lease_runs(store: MetadataStore) -> None:
    store.register_broker(_broker("a:1", "s1"))
    store.register_broker(_broker("b:1", "s2", expires_ms=NOW - 1))
    assert [b.broker_id for b in store.list_brokers(NOW)] == ["a:1"]
    assert [b.broker_id for b in store.list_brokers(NOW - 2)] == ["a:1", "b:1"]


def test_renewing_an_old_session_fails(store: MetadataStore) -> None:
    store.register_broker(_broker("a:1", "s1"), lease_ms=60_000)
    store.register_broker(_broker("a:1", "s2"), lease_ms=60_000)
    assert not store.renew_broker("a:1", "s1", 60_000)
    assert not store.renew_broker("gone:1", "s1", 60_000)
    assert store.renew_broker("a:1", "s2", 60_000)


def test_a_claim_wins_once_and_others_see_the_winner(store: MetadataStore) -> None:
    store.register_broker(_broker("a:1", "sa"))
    store.register_broker(_broker("b:1", "sb"))
    won = store.claim_topic(TopicOwner("t/n/x", "a:1", "sa", NOW), NOW)
    assert (won.broker_id, won.version) == ("a:1", 1)
    lost = store.claim_topic(TopicOwner("t/n/x", "b:1", "sb", NOW), NOW)
    assert lost == won
    assert store.get_topic_owner("t/n/x", NOW) == won
    assert [b.owned_topics for b in store.list_brokers(NOW)] == [1, 0]


def test_an_ownership_dies_with_its_session(store: MetadataStore) -> None:
    store.register_broker(_broker("a:1", "sa"))
    store.register_broker(_broker("b:1", "sb"))
    store.claim_topic(TopicOwner("t/n/x", "a:1", "sa", NOW), NOW)
    store.register_broker(_broker("a:1", "sa2"))  # a restarted: a new session
    assert store.get_topic_owner("t/n/x", NOW) is None
    taken = store.claim_topic(TopicOwner("t/n/x", "b:1", "sb", NOW), NOW)
    assert (taken.broker_id, taken.version) == ("b:1", 2)


def test_an_ownership_lapses_with_its_lease(store: MetadataStore) -> None:
    store.register_broker(_broker("a:1", "sa", expires_ms=NOW + 100))
    store.register_broker(_broker("b:1", "sb", expires_ms=NOW + 10_000))
    store.claim_topic(TopicOwner("t/n/x", "a:1", "sa", NOW), NOW)
    assert store.get_topic_owner("t/n/x", NOW + 99) is not None
    assert store.get_topic_owner("t/n/x", NOW + 100) is None
    assert store.claim_topic(TopicOwner("t/n/x", "b:1", "sb", NOW), NOW + 100).broker_id == "b:1"
    # The old owner's renewal afterwards is refused: its lease ended, so it must start anew.
    assert not store.renew_broker("a:1", "sa", 10_000)
    assert store.get_topic_owner("t/n/x", NOW + 200).broker_id == "b:1"  # type: ignore[union-attr]


def test_release_only_by_the_owner_and_remove_broker_releases_all(store: MetadataStore) -> None:
    store.register_broker(_broker("a:1", "sa"))
    store.claim_topic(TopicOwner("t/n/x", "a:1", "sa", NOW), NOW)
    store.claim_topic(TopicOwner("t/n/y", "a:1", "sa", NOW), NOW)
    assert not store.release_topic("t/n/x", "a:1", "other-session")
    assert store.release_topic("t/n/x", "a:1", "sa")
    assert not store.release_topic("t/n/x", "a:1", "sa")
    assert store.get_topic_owner("t/n/x", NOW) is None
    store.remove_broker("a:1", "sa")
    assert store.get_topic_owner("t/n/y", NOW) is None
    assert store.list_brokers(NOW) == []


def test_racing_claimers_on_separate_instances_agree_on_one_owner(opener: Opener) -> None:
    first = opener()
    brokers = [f"b{i}:1" for i in range(4)]
    for b in brokers:
        first.register_broker(_broker(b, "s-" + b))
    topics = [f"t/n/x{i}" for i in range(20)]
    results: dict[str, list[str]] = {t: [] for t in topics}
    lock = threading.Lock()
    barrier = threading.Barrier(len(brokers))
    errors: list[BaseException] = []

    def claim_all(broker: str) -> None:
        s = opener()
        try:
            barrier.wait(timeout=10)
            for t in topics:
                won = s.claim_topic(TopicOwner(t, broker, "s-" + broker, NOW), NOW)
                with lock:
                    results[t].append(won.broker_id)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=claim_all, args=(b,)) for b in brokers]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not errors, errors
    for t in topics:
        assert len(results[t]) == len(brokers)
        assert len(set(results[t])) == 1, (t, results[t])
        stored = first.get_topic_owner(t, NOW)
        assert stored is not None and stored.broker_id == results[t][0]


def test_a_claim_for_a_session_that_is_not_live_is_refused(store: MetadataStore) -> None:
    import pytest

    from managed_ledger.metadata.api import NotFoundError

    store.register_broker(_broker("a:1", "sa"))
    store.register_broker(_broker("b:1", "sb", expires_ms=NOW - 1))
    with pytest.raises(NotFoundError):
        store.claim_topic(TopicOwner("t/n/x", "b:1", "sb", NOW), NOW)  # lease over
    with pytest.raises(NotFoundError):
        store.claim_topic(TopicOwner("t/n/x", "a:1", "old-session", NOW), NOW)
    store.remove_broker("a:1", "sa")
    with pytest.raises(NotFoundError):
        store.claim_topic(TopicOwner("t/n/x", "a:1", "sa", NOW), NOW)  # left
    assert store.get_topic_owner("t/n/x", NOW) is None


# --- one clock: the store's (reliability review 2026-11-28, findings 5 and 11) ---------------------


def test_a_lease_is_stamped_with_the_stores_clock(store: MetadataStore) -> None:
    before = store.store_now_ms()
    stored = store.register_broker(_broker("a:1", "sa", expires_ms=1), lease_ms=5_000)
    after = store.store_now_ms()
    assert before <= stored.started_ms <= after  # the caller's times are not what counts
    assert stored.expires_ms == stored.started_ms + 5_000
    assert [b.broker_id for b in store.list_brokers()] == ["a:1"]  # judged by the store's now
    assert store.renew_broker("a:1", "sa", 60_000)
    [renewed] = store.list_brokers()
    assert after + 60_000 <= renewed.expires_ms <= store.store_now_ms() + 60_000


def test_a_lapsed_session_is_never_renewed(store: MetadataStore) -> None:
    now = store.store_now_ms()
    store.register_broker(
        BrokerRecord("a:1", "s-a", "http://a:1", started_ms=now - 2_000, expires_ms=now - 1_000)
    )
    store.register_broker(_broker("b:1", "s-b"), lease_ms=60_000)
    assert store.claim_topic(TopicOwner("t/n/x", "b:1", "s-b", now)).broker_id == "b:1"
    # A's renewal was sent before its lease ended but lands after: the store refuses it.
    assert not store.renew_broker("a:1", "s-a", 60_000)
    assert [b.broker_id for b in store.list_brokers()] == ["b:1"]
    assert store.get_topic_owner("t/n/x").broker_id == "b:1"  # type: ignore[union-attr]


def test_claims_and_owners_are_judged_by_the_stores_clock(store: MetadataStore) -> None:
    now = store.store_now_ms()
    store.register_broker(BrokerRecord("a:1", "s-a", "http://a:1", started_ms=now, expires_ms=now + 60_000))
    store.register_broker(_broker("b:1", "s-b"), lease_ms=60_000)
    store.claim_topic(TopicOwner("t/n/x", "a:1", "s-a", now))
    # A claimant whose own clock runs a lease ahead does not decide: the store's clock does.
    assert store.claim_topic(TopicOwner("t/n/x", "b:1", "s-b", now)).broker_id == "a:1"
    assert store.get_topic_owner("t/n/x").broker_id == "a:1"  # type: ignore[union-attr]
