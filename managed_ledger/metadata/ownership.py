"""The metadata stores' broker methods (`managed_ledger.metadata.api.OwnershipStore`): broker
sessions and topic ownership, for the SQL store and the in-memory one, mixed into each class.

An ownership row names a broker and one of its sessions; it is valid while that broker's row
still carries that session and its lease (`expires_ms`) has not passed. A broker that loses its
session (its lease lapsed, or it restarted) registers a new one, which voids every ownership of
the old one at once, with no row to clean up first: that is how Pulsar's ownership works on
ZooKeeper's ephemeral nodes, here on a row and a lease.

A claim names a broker session that must be live at that moment (NotFoundError otherwise), so
a topic is never handed to a broker that has just left. Claims are compare-and-set: an insert
decided by the primary key, or an update of a row whose owner is no longer valid, decided by its
version. Leases compare wall-clock milliseconds of different processes, so their clocks must
agree to well within a lease.

A lapsed session may still be renewed (a broker that was slow to renew while nobody wanted its
topics keeps them), until a claim acts on its lapse: the claim ends the session for good in the
same transaction (`ENDED_MS`), and no renewal revives it after that, as ZooKeeper never revives
an expired session. So a renewal that lands late, after another broker took one of its topics,
is refused, and its broker drops everything it had: two brokers never both hold a topic.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any, cast

from sqlalchemy import Connection, Table, and_, delete, func, insert, select, update

from managed_ledger.metadata.api import (
    AlreadyExistsError,
    BrokerRecord,
    MetadataError,
    NotFoundError,
    TopicOwner,
)
from managed_ledger.metadata.engine import Transactional
from managed_ledger.metadata.models import BrokerRow, TopicOwnerRow

BROKERS = cast(Table, BrokerRow.__table__)
OWNERS = cast(Table, TopicOwnerRow.__table__)
CLAIM_ATTEMPTS = 5
# The lease end of a session that ended for good: a claim found it lapsed and took a topic from it.
ENDED_MS = 0


def _broker_from_row(row: Any, owned: int = 0) -> BrokerRecord:
    return BrokerRecord(
        broker_id=row["broker_id"],
        session=row["session"],
        http_url=row["http_url"],
        kafka_url=row["kafka_url"],
        started_ms=int(row["started_ms"]),
        expires_ms=int(row["expires_ms"]),
        owned_topics=owned,
    )


def _owner_from_row(row: Any) -> TopicOwner:
    return TopicOwner(
        topic=row["topic"],
        broker_id=row["broker_id"],
        session=row["session"],
        acquired_ms=int(row["acquired_ms"]),
        version=int(row["version"]),
    )


def _checked(broker: BrokerRecord) -> BrokerRecord:
    if not broker.broker_id or not broker.session or not broker.http_url:
        raise ValueError("a broker needs an id, a session and an HTTP URL")
    return broker


class SqlOwnershipMethods:
    """Mixed into SqlMetadataStore: uses its `_read` / `_write` transactions."""

    def register_broker(self: Transactional, broker: BrokerRecord) -> None:
        b = _checked(broker)
        values = {
            "session": b.session,
            "http_url": b.http_url,
            "kafka_url": b.kafka_url,
            "started_ms": b.started_ms,
            "expires_ms": b.expires_ms,
        }
        with self._write() as conn:
            where = BROKERS.c.broker_id == b.broker_id
            if conn.execute(update(BROKERS).where(where).values(**values)).rowcount == 0:
                conn.execute(insert(BROKERS).values(broker_id=b.broker_id, **values))

    def renew_broker(self: Transactional, broker_id: str, session: str, expires_ms: int) -> bool:
        where = and_(
            BROKERS.c.broker_id == broker_id, BROKERS.c.session == session, BROKERS.c.expires_ms > ENDED_MS
        )
        with self._write() as conn:
            return bool(conn.execute(update(BROKERS).where(where).values(expires_ms=expires_ms)).rowcount)

    def remove_broker(self: Transactional, broker_id: str, session: str) -> None:
        with self._write() as conn:
            conn.execute(delete(OWNERS).where(OWNERS.c.broker_id == broker_id, OWNERS.c.session == session))
            conn.execute(
                delete(BROKERS).where(BROKERS.c.broker_id == broker_id, BROKERS.c.session == session)
            )

    def list_brokers(self: Transactional, now_ms: int) -> list[BrokerRecord]:
        owned = (
            select(func.count())
            .where(OWNERS.c.broker_id == BROKERS.c.broker_id, OWNERS.c.session == BROKERS.c.session)
            .scalar_subquery()
        )
        stmt = select(BROKERS, owned.label("owned")).where(BROKERS.c.expires_ms > now_ms)
        with self._read() as conn:
            result = conn.execute(stmt.order_by(BROKERS.c.broker_id)).mappings().all()
        return [_broker_from_row(r, int(r["owned"])) for r in result]

    def get_topic_owner(self: Transactional, topic: str, now_ms: int) -> TopicOwner | None:
        with self._read() as conn:
            return _valid_owner(conn, topic, now_ms)

    def claim_topic(self: Transactional, owner: TopicOwner, now_ms: int) -> TopicOwner:
        for _ in range(CLAIM_ATTEMPTS):
            try:
                with self._write(AlreadyExistsError(f"topic {owner.topic} claimed concurrently")) as conn:
                    won = _claim(conn, owner, now_ms)
            except AlreadyExistsError:
                continue  # another claimer inserted first: read what it wrote
            if won is not None:
                return won
        raise MetadataError(f"claiming topic {owner.topic}: too many concurrent claims")

    def release_topic(self: Transactional, topic: str, broker_id: str, session: str) -> bool:
        where = and_(OWNERS.c.topic == topic, OWNERS.c.broker_id == broker_id, OWNERS.c.session == session)
        with self._write() as conn:
            return bool(conn.execute(delete(OWNERS).where(where)).rowcount)


def _live(conn: Connection, broker_id: str, session: str, now_ms: int) -> bool:
    """Whether `session` is broker `broker_id`'s current one and its lease runs at now_ms."""
    found = conn.execute(
        select(BROKERS.c.broker_id).where(
            BROKERS.c.broker_id == broker_id, BROKERS.c.session == session, BROKERS.c.expires_ms > now_ms
        )
    ).first()
    return found is not None


def _end_lapsed(conn: Connection, broker_id: str, session: str, now_ms: int) -> bool:
    """End a lapsed session for good (ZooKeeper's expired session): no renewal revives it after
    this, so its broker cannot come back to a topic another broker took. False when the session
    runs after all (a renewal committed since it was read)."""
    where = and_(
        BROKERS.c.broker_id == broker_id, BROKERS.c.session == session, BROKERS.c.expires_ms <= now_ms
    )
    conn.execute(update(BROKERS).where(where).values(expires_ms=ENDED_MS))
    return not _live(conn, broker_id, session, now_ms)


def _valid_owner(conn: Connection, topic: str, now_ms: int) -> TopicOwner | None:
    row = conn.execute(select(OWNERS).where(OWNERS.c.topic == topic)).mappings().first()
    if row is None or not _live(conn, row["broker_id"], row["session"], now_ms):
        return None
    return _owner_from_row(row)


def _claim(conn: Connection, owner: TopicOwner, now_ms: int) -> TopicOwner | None:
    """One attempt: the owner after it, or None when a concurrent claim moved the row on."""
    row = conn.execute(select(OWNERS).where(OWNERS.c.topic == owner.topic)).mappings().first()
    if row is not None and _live(conn, row["broker_id"], row["session"], now_ms):
        return _owner_from_row(row)
    if row is not None and not _end_lapsed(conn, row["broker_id"], row["session"], now_ms):
        # Its renewal landed meanwhile: the session runs again, and so does its ownership.
        return _owner_from_row(row)
    if not _live(conn, owner.broker_id, owner.session, now_ms):
        raise NotFoundError(f"broker {owner.broker_id} has no live session {owner.session}")
    values = {"broker_id": owner.broker_id, "session": owner.session, "acquired_ms": owner.acquired_ms}
    if row is None:
        conn.execute(insert(OWNERS).values(topic=owner.topic, **values, version=1))
        return replace(owner, version=1)
    version = int(row["version"])
    stmt = update(OWNERS).where(OWNERS.c.topic == owner.topic, OWNERS.c.version == version)
    if conn.execute(stmt.values(**values, version=version + 1)).rowcount != 1:
        return None
    return replace(owner, version=version + 1)


class InMemoryOwnershipMethods:
    """Mixed into InMemoryMetadataStore: its own lock and dictionaries."""

    def __init__(self) -> None:
        self._ownership_lock = threading.Lock()
        self._brokers: dict[str, BrokerRecord] = {}
        self._owners: dict[str, TopicOwner] = {}

    def register_broker(self, broker: BrokerRecord) -> None:
        with self._ownership_lock:
            self._brokers[broker.broker_id] = replace(_checked(broker), owned_topics=0)

    def renew_broker(self, broker_id: str, session: str, expires_ms: int) -> bool:
        with self._ownership_lock:
            stored = self._brokers.get(broker_id)
            if stored is None or stored.session != session or stored.expires_ms <= ENDED_MS:
                return False
            self._brokers[broker_id] = replace(stored, expires_ms=expires_ms)
            return True

    def remove_broker(self, broker_id: str, session: str) -> None:
        with self._ownership_lock:
            for topic in [
                t for t, o in self._owners.items() if (o.broker_id, o.session) == (broker_id, session)
            ]:
                del self._owners[topic]
            stored = self._brokers.get(broker_id)
            if stored is not None and stored.session == session:
                del self._brokers[broker_id]

    def list_brokers(self, now_ms: int) -> list[BrokerRecord]:
        with self._ownership_lock:
            out = []
            for broker_id in sorted(self._brokers):
                b = self._brokers[broker_id]
                if b.expires_ms > now_ms:
                    owned = sum(
                        1 for o in self._owners.values() if (o.broker_id, o.session) == (broker_id, b.session)
                    )
                    out.append(replace(b, owned_topics=owned))
            return out

    def _valid(self, owner: TopicOwner | None, now_ms: int) -> TopicOwner | None:
        if owner is None:
            return None
        b = self._brokers.get(owner.broker_id)
        return owner if b is not None and b.session == owner.session and b.expires_ms > now_ms else None

    def get_topic_owner(self, topic: str, now_ms: int) -> TopicOwner | None:
        with self._ownership_lock:
            return self._valid(self._owners.get(topic), now_ms)

    def claim_topic(self, owner: TopicOwner, now_ms: int) -> TopicOwner:
        with self._ownership_lock:
            stored = self._owners.get(owner.topic)
            current = self._valid(stored, now_ms)
            if current is not None:
                return current
            if stored is not None:  # its session lapsed: ended for good (see `_end_lapsed`)
                lapsed = self._brokers.get(stored.broker_id)
                if lapsed is not None and lapsed.session == stored.session:
                    self._brokers[stored.broker_id] = replace(lapsed, expires_ms=ENDED_MS)
            claimant = self._brokers.get(owner.broker_id)
            if claimant is None or claimant.session != owner.session or claimant.expires_ms <= now_ms:
                raise NotFoundError(f"broker {owner.broker_id} has no live session {owner.session}")
            new = replace(owner, version=1 if stored is None else stored.version + 1)
            self._owners[owner.topic] = new
            return new

    def release_topic(self, topic: str, broker_id: str, session: str) -> bool:
        with self._ownership_lock:
            stored = self._owners.get(topic)
            if stored is None or (stored.broker_id, stored.session) != (broker_id, session):
                return False
            del self._owners[topic]
            return True
