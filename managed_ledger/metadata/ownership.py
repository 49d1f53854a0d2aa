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
version.

One clock stamps and judges every lease: the store's (`store_clock`). A broker asks for a lease
of so many milliseconds and the store writes its own now plus that; a renewal succeeds only
while the stored lease still runs by the store's clock, in the same statement, so a renewal that
arrives late never revives a session another broker may already have taken topics from (as
ZooKeeper never revives an expired session). Readers that pass no `now_ms` are judged by the
store's clock too; an explicit `now_ms` is for tests and tools.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any, cast

from sqlalchemy import ColumnElement, Connection, Table, and_, delete, func, insert, select, update

from common.clock import wall_clock_ms
from managed_ledger.metadata.api import (
    AlreadyExistsError,
    BrokerRecord,
    MetadataError,
    NotFoundError,
    TopicOwner,
)
from managed_ledger.metadata.engine import Transactional
from managed_ledger.metadata.models import BrokerRow, TopicOwnerRow
from managed_ledger.metadata.store_clock import judged_at, sql_now_ms

BROKERS = cast(Table, BrokerRow.__table__)
OWNERS = cast(Table, TopicOwnerRow.__table__)
CLAIM_ATTEMPTS = 5


def _broker_from_row(row: Any, owned: int = 0) -> BrokerRecord:
    return BrokerRecord(
        broker_id=row["broker_id"],
        session=row["session"],
        http_url=row["http_url"],
        kafka_url=row["kafka_url"],
        pulsar_url=row["pulsar_url"],
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

    def store_now_ms(self: Transactional) -> int:
        with self._read() as conn:
            now = sql_now_ms(conn)
            return now if isinstance(now, int) else int(conn.execute(select(now)).scalar_one())

    def register_broker(
        self: Transactional, broker: BrokerRecord, lease_ms: int | None = None
    ) -> BrokerRecord:
        b = _checked(broker)
        with self._write() as conn:
            if lease_ms is not None:  # stamped with the store's clock, read back below
                now: ColumnElement[int] | int = sql_now_ms(conn)
                times = {"started_ms": now, "expires_ms": now + lease_ms}
            else:
                times = {"started_ms": b.started_ms, "expires_ms": b.expires_ms}
            urls = {"http_url": b.http_url, "kafka_url": b.kafka_url, "pulsar_url": b.pulsar_url}
            values = {"session": b.session, **urls, **times}
            where = BROKERS.c.broker_id == b.broker_id
            if conn.execute(update(BROKERS).where(where).values(**values)).rowcount == 0:
                conn.execute(insert(BROKERS).values(broker_id=b.broker_id, **values))
            return _broker_from_row(conn.execute(select(BROKERS).where(where)).mappings().one())

    def renew_broker(self: Transactional, broker_id: str, session: str, lease_ms: int) -> bool:
        with self._write() as conn:
            now = sql_now_ms(conn)
            where = and_(
                BROKERS.c.broker_id == broker_id, BROKERS.c.session == session, BROKERS.c.expires_ms > now
            )
            return bool(conn.execute(update(BROKERS).where(where).values(expires_ms=now + lease_ms)).rowcount)

    def remove_broker(self: Transactional, broker_id: str, session: str) -> None:
        with self._write() as conn:
            conn.execute(delete(OWNERS).where(OWNERS.c.broker_id == broker_id, OWNERS.c.session == session))
            conn.execute(
                delete(BROKERS).where(BROKERS.c.broker_id == broker_id, BROKERS.c.session == session)
            )

    def list_brokers(self: Transactional, now_ms: int | None = None) -> list[BrokerRecord]:
        owned = (
            select(func.count())
            .where(OWNERS.c.broker_id == BROKERS.c.broker_id, OWNERS.c.session == BROKERS.c.session)
            .scalar_subquery()
        )
        with self._read() as conn:
            stmt = select(BROKERS, owned.label("owned")).where(BROKERS.c.expires_ms > judged_at(conn, now_ms))
            result = conn.execute(stmt.order_by(BROKERS.c.broker_id)).mappings().all()
        return [_broker_from_row(r, int(r["owned"])) for r in result]

    def get_topic_owner(self: Transactional, topic: str, now_ms: int | None = None) -> TopicOwner | None:
        with self._read() as conn:
            return _valid_owner(conn, topic, judged_at(conn, now_ms))

    def claim_topic(self: Transactional, owner: TopicOwner, now_ms: int | None = None) -> TopicOwner:
        for _ in range(CLAIM_ATTEMPTS):
            try:
                with self._write(AlreadyExistsError(f"topic {owner.topic} claimed concurrently")) as conn:
                    won = _claim(conn, owner, judged_at(conn, now_ms))
            except AlreadyExistsError:
                continue  # another claimer inserted first: read what it wrote
            if won is not None:
                return won
        raise MetadataError(f"claiming topic {owner.topic}: too many concurrent claims")

    def release_topic(self: Transactional, topic: str, broker_id: str, session: str) -> bool:
        where = and_(OWNERS.c.topic == topic, OWNERS.c.broker_id == broker_id, OWNERS.c.session == session)
        with self._write() as conn:
            return bool(conn.execute(delete(OWNERS).where(where)).rowcount)


Now = ColumnElement[int] | int  # the store's clock inside the statement, or a caller's value


def _live(conn: Connection, broker_id: str, session: str, now_ms: Now) -> bool:
    """Whether `session` is broker `broker_id`'s current one and its lease runs at now_ms."""
    found = conn.execute(
        select(BROKERS.c.broker_id).where(
            BROKERS.c.broker_id == broker_id, BROKERS.c.session == session, BROKERS.c.expires_ms > now_ms
        )
    ).first()
    return found is not None


def _valid_owner(conn: Connection, topic: str, now_ms: Now) -> TopicOwner | None:
    row = conn.execute(select(OWNERS).where(OWNERS.c.topic == topic)).mappings().first()
    if row is None or not _live(conn, row["broker_id"], row["session"], now_ms):
        return None
    return _owner_from_row(row)


def _claim(conn: Connection, owner: TopicOwner, now_ms: Now) -> TopicOwner | None:
    """One attempt: the owner after it, or None when a concurrent claim moved the row on."""
    row = conn.execute(select(OWNERS).where(OWNERS.c.topic == owner.topic)).mappings().first()
    if row is not None and _live(conn, row["broker_id"], row["session"], now_ms):
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

    def store_now_ms(self) -> int:
        return wall_clock_ms()  # this store lives in its users' process: their clock is its own

    def register_broker(self, broker: BrokerRecord, lease_ms: int | None = None) -> BrokerRecord:
        with self._ownership_lock:
            record = replace(_checked(broker), owned_topics=0)
            if lease_ms is not None:
                now = self.store_now_ms()
                record = replace(record, started_ms=now, expires_ms=now + lease_ms)
            self._brokers[broker.broker_id] = record
            return record

    def renew_broker(self, broker_id: str, session: str, lease_ms: int) -> bool:
        with self._ownership_lock:
            stored = self._brokers.get(broker_id)
            now = self.store_now_ms()
            if stored is None or stored.session != session or stored.expires_ms <= now:
                return False
            self._brokers[broker_id] = replace(stored, expires_ms=now + lease_ms)
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

    def list_brokers(self, now_ms: int | None = None) -> list[BrokerRecord]:
        now_ms = self.store_now_ms() if now_ms is None else now_ms
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

    def get_topic_owner(self, topic: str, now_ms: int | None = None) -> TopicOwner | None:
        now_ms = self.store_now_ms() if now_ms is None else now_ms
        with self._ownership_lock:
            return self._valid(self._owners.get(topic), now_ms)

    def claim_topic(self, owner: TopicOwner, now_ms: int | None = None) -> TopicOwner:
        with self._ownership_lock:
            now_ms = self.store_now_ms() if now_ms is None else now_ms
            stored = self._owners.get(owner.topic)
            current = self._valid(stored, now_ms)
            if current is not None:
                return current
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
