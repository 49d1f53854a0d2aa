"""SUBSCRIBE, FLOW, ACK, REDELIVER_UNACKNOWLEDGED_MESSAGES, CLOSE_CONSUMER, UNSUBSCRIBE and
GET_LAST_MESSAGE_ID, over Quire's durable subscriptions.

A consumer is a task that, while the client has given it permits (FLOW), long-polls its
subscription through the topics service's `receive` -- the same dispatch REST consumers get,
with the subscription's type (shared, exclusive, failover, key_shared) deciding who gets what --
and pushes what it gets as MESSAGEs (`entries`), one per entry. It remembers which messages it
holds unacked; ACK acks them (individual: the ids, or of a batch the members its `ack_set` marks
acked; cumulative: up to the id), REDELIVER_UNACKNOWLEDGED_MESSAGES nacks them (all, or the
entries listed), and closing nacks what is left so that it comes again, to this consumer's
successor or another consumer.

Pulsar's subscription rules at SUBSCRIBE: one consumer on an exclusive subscription, and every
consumer of a subscription of the same type (else ConsumerBusy). A subscription the listener
creates gets the client's initial position and type and a long ack timeout (config); one that
exists keeps its own type.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from app.auth.policy import Need
from managed_ledger.position import MessageId, Position
from topics.api import Delivery, KeySharedPolicy, SubscriptionOptions, SubscriptionType, TopicsApi
from topics.errors import NotOwnerError, SubscriptionNotFoundError, TopicNotFoundError

from .entries import encode_batch, encode_single
from .proto import pulsar_api_pb2 as pb
from .readers import ReadPosition, fixed_start, seek_target, start_of, subscribe_start
from .registry import Registry
from .schemas import consumer_schema
from .security import Access
from .server import Connection, Handler
from .session import Target, quire_topic, target_of

log = logging.getLogger("quire.pulsar")
T = pb.BaseCommand
S = pb.CommandSubscribe
TYPES: dict[int, SubscriptionType] = {
    S.Exclusive: "exclusive",
    S.Shared: "shared",
    S.Failover: "failover",
    S.Key_Shared: "key_shared",
}
MAX_RECEIVE = 1_000
NO_ID = 2**64 - 1
RETRY_S = 1.0
SEEK_WAIT_S = 30.0  # a SUBSCRIBE waits at most this long for a seek on its subscription


class Consumer:
    def __init__(
        self,
        conn: Connection,
        request: pb.CommandSubscribe,
        topic: str,
        target: Target,
        topics: TopicsApi,
        registry: Registry,
        reads: ReadPosition | None = None,
    ) -> None:
        # A reader (non-durable) reads from its own position; a consumer from its subscription.
        self.reads = reads
        self.durable = reads is None
        self.conn = conn
        self.consumer_id = request.consumer_id
        self.topic = topic  # the Pulsar name (a partition's, for a partitioned topic)
        self.target = target  # what the topics service calls it
        self.subscription = request.subscription
        self.sub_type = request.subType
        self.topics = topics
        self._registry = registry
        # An exclusive subscription's one consumer keeps one Quire consumer id across reconnects
        # (the listener lets only one in); the others are told apart by connection and id.
        name = request.consumer_name or "consumer"
        exclusive = request.subType == S.Exclusive
        self.quire_id = "pulsar" if exclusive else f"pulsar-{name}-{conn.number}-{request.consumer_id}"
        if request.subType == S.Failover:
            # Quire's failover subscription makes the least id active: this one sorts as Pulsar's
            # rule (priority level, then consumer name).
            priority = max(request.priority_level, 0)
            self.quire_id = f"pulsar-{priority:010d}-{name}-{conn.number}-{request.consumer_id}"
        self.active: bool | None = None  # failover: what ACTIVE_CONSUMER_CHANGE last said
        self.partition = -1 if target.partition is None else target.partition
        self.permits = 0
        self.wake = asyncio.Event()
        self.unacked: dict[Position, set[int]] = {}
        self.task: asyncio.Task[None] | None = None
        self.closed = False

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    def flow(self, permits: int) -> None:
        self.permits += permits
        self.wake.set()

    async def _run(self) -> None:
        wait_ms = self.conn.config.receive_wait_ms
        while not self.conn.closed:
            if self.permits <= 0 or self._standby():
                self.wake.clear()
                await self.wake.wait()
                continue
            try:
                deliveries = await self.fetch(min(self.permits, MAX_RECEIVE), wait_ms)
            except (SubscriptionNotFoundError, TopicNotFoundError, NotOwnerError):
                # Gone, or owned by another broker now (this one lost its lease, or gave the
                # topic up): the client looks the topic up again and subscribes there.
                close = pb.CommandCloseConsumer(consumer_id=self.consumer_id, request_id=0)
                self.conn.send(T(type=T.CLOSE_CONSUMER, close_consumer=close))
                return
            except Exception as exc:
                log.info("Pulsar consumer %s on %s: receive failed: %s", self.quire_id, self.topic, exc)
                await asyncio.sleep(RETRY_S)
                continue
            if self.closed:
                # Closed while its receive was under way, and the receive ended all the same (a
                # long poll that a cancel does not stop): what it got goes back at once, else it
                # would wait out the ack timeout under this consumer's id.
                await self._give_back(deliveries)
                return
            if self._standby():
                # A partition's failover consumer that stopped being active while its receive
                # was under way: what it got goes to the active one.
                await self._give_back(deliveries)
                continue
            if deliveries:
                self._push(deliveries)
                await self.conn.drain()

    def _standby(self) -> bool:
        """A failover consumer of one partition that is not its active one: the listener picks
        a partition's active consumer (`Registry.announce_active`), the topics service hands a
        partition's messages to whoever asks (`TopicsApi.receive`'s partition)."""
        return self.target.partition is not None and self.sub_type == S.Failover and not self.active

    async def _give_back(self, deliveries: list[Delivery]) -> None:
        if deliveries and self.durable:
            try:
                ids = [d.message.message_id for d in deliveries]
                await self.topics.nack(self.target.topic, self.subscription, ids)
            except Exception as exc:  # the ack timeout redelivers them instead
                log.info("Pulsar consumer %s: nack after close failed: %s", self.quire_id, exc)

    async def fetch(self, max_messages: int, wait_ms: int) -> list[Delivery]:
        """The next messages for this consumer: its subscription's dispatch decides (a
        reader's: its position)."""
        if self.reads is not None:
            return await self.reads.fetch(max_messages, wait_ms)
        target = self.target
        return await self.topics.receive(
            target.topic,
            self.subscription,
            max_messages,
            wait_ms,
            self.quire_id,
            target.partition,
            whole_entries=True,
        )

    def _push(self, deliveries: list[Delivery]) -> None:
        entries: dict[Position, list[Delivery]] = {}
        for d in deliveries:
            entries.setdefault(d.message.message_id.position, []).append(d)
        for position, group in entries.items():
            group.sort(key=lambda d: d.message.message_id.batch_index)
            held = self.unacked.setdefault(position, set())
            held.update(d.message.message_id.batch_index for d in group)
            self.permits -= len(group)
            command = pb.CommandMessage(
                consumer_id=self.consumer_id,
                message_id=pb.MessageIdData(
                    ledgerId=position.ledger_id, entryId=position.entry_id, partition=self.partition
                ),
            )
            count = max(d.redelivery_count for d in group)
            if count:
                command.redelivery_count = count
            messages = [d.message for d in group]
            if len(group) == 1 and messages[0].message_id.batch_index == 0:
                metadata, payload = encode_single(messages[0])
            else:
                metadata, payload, ack_set = encode_batch(messages)
                if len(messages) != messages[-1].message_id.batch_index + 1:
                    command.ack_set.extend(ack_set)
            self.conn.send_message(T(type=T.MESSAGE, message=command), metadata, payload)

    # --- acks --------------------------------------------------------------------------------
    def acked_ids(self, data: pb.MessageIdData) -> list[MessageId]:
        """The messages an individual ack of `data` acks, forgotten as unacked."""
        position = Position(data.ledgerId, data.entryId)
        held = self.unacked.get(position, set())
        if data.ack_set:
            bits = [w & (2**64 - 1) for w in data.ack_set]
            chosen = {i for i in held if not (i // 64 < len(bits) and bits[i // 64] >> (i % 64) & 1)}
        elif data.HasField("batch_index") and data.batch_index >= 0:
            chosen = {data.batch_index}
        else:
            chosen = set(held) or {0}
        held.difference_update(chosen)
        if not held:
            self.unacked.pop(position, None)
        return [MessageId(position.ledger_id, position.entry_id, i) for i in sorted(chosen)]

    def cumulative_id(self, data: pb.MessageIdData) -> MessageId:
        position = Position(data.ledgerId, data.entryId)
        if data.HasField("batch_index") and data.batch_index >= 0:
            index = data.batch_index
        else:
            index = max(self.unacked.get(position, {0}) or {0})
        for held in [p for p in self.unacked if p <= position]:
            del self.unacked[held]
        return MessageId(position.ledger_id, position.entry_id, index)

    def take_unacked(self, positions: Iterable[Position] | None = None) -> list[MessageId]:
        """The messages held unacked (of `positions`, or all), forgotten: to be nacked."""
        chosen = list(self.unacked) if positions is None else [p for p in positions if p in self.unacked]
        out: list[MessageId] = []
        for position in chosen:
            out += [
                MessageId(position.ledger_id, position.entry_id, i)
                for i in sorted(self.unacked.pop(position))
            ]
        return out

    async def close(self, nack: bool = True) -> None:
        """Stop; what it held unacked is nacked (`nack`), or forgotten when a seek moved the
        subscription."""
        self.closed = True
        if self.task is not None:
            self.task.cancel()
        self._registry.remove_consumer(self.topic, self.subscription, self)
        ids = self.take_unacked()
        if ids and nack and self.durable:
            try:
                await self.topics.nack(self.target.topic, self.subscription, ids)
            except Exception as exc:  # the ack timeout redelivers them instead
                log.info("Pulsar consumer %s: nack on close failed: %s", self.quire_id, exc)
        if self.durable and self.sub_type in (S.Failover, S.Key_Shared):
            try:  # leave now: failover's active consumer and key_shared's keys move at once
                await self.topics.consumer_left(self.target.topic, self.subscription, self.quire_id)
            except Exception as exc:  # it leaves after the consumer idle time instead
                log.info("Pulsar consumer %s: leaving failed: %s", self.quire_id, exc)


def key_shared_policy(request: pb.CommandSubscribe) -> KeySharedPolicy:
    """The consumer's keySharedMeta (none: AUTO_SPLIT, in order)."""
    if not request.HasField("keySharedMeta"):
        return KeySharedPolicy()
    meta = request.keySharedMeta
    return KeySharedPolicy(
        sticky=meta.keySharedMode == pb.STICKY,
        ranges=tuple((r.start, r.end) for r in meta.hashRanges),
        allow_out_of_order=meta.allowOutOfOrderDelivery,
    )


def _real(data: pb.MessageIdData) -> bool:
    """Not one of the client's sentinels (earliest/latest: -1 or INT64_MAX as uint64)."""
    return data.ledgerId < 2**63 - 1 and data.entryId < 2**63 - 1


class Consumers:
    def __init__(self, topics: TopicsApi, registry: Registry, access: Access) -> None:
        self.topics = topics
        self.registry = registry
        self.access = access
        # (topic, subscription) -> set when a SEEK on it is done: a SUBSCRIBE to it waits.
        self._seeking: dict[tuple[str, str], asyncio.Event] = {}

    def handlers(self) -> dict[int, Handler]:
        return {
            T.SUBSCRIBE: self.subscribe,
            T.FLOW: self.flow,
            T.ACK: self.ack,
            T.REDELIVER_UNACKNOWLEDGED_MESSAGES: self.redeliver,
            T.CLOSE_CONSUMER: self.close_consumer,
            T.UNSUBSCRIBE: self.unsubscribe,
            T.GET_LAST_MESSAGE_ID: self.last_message_id,
            T.SEEK: self.seek,
        }

    async def subscribe(self, conn: Connection, command: pb.BaseCommand, rest: memoryview) -> None:
        request = command.subscribe
        if request.consumer_id in conn.consumers:
            conn.send_success(request.request_id)
            return
        try:
            consumer = await self._open(conn, request)
        except Exception as exc:
            conn.send_failure(request.request_id, exc)
            return
        conn.consumers[request.consumer_id] = consumer
        conn.send_success(request.request_id)
        self.registry.announce_active(consumer.topic, consumer.subscription)
        consumer.start()

    async def _open(self, conn: Connection, request: pb.CommandSubscribe) -> Consumer:
        topic = quire_topic(request.topic)
        await self.access.check(conn, topic, Need.CONSUME)
        target = await target_of(self.topics, topic)
        if not request.durable:
            start = subscribe_start(conn, request)
            start = await fixed_start(
                self.topics, target.topic, start, request.read_compacted, target.partition
            )
            reads = ReadPosition(self.topics, target.topic, start, request.read_compacted, target.partition)
            reader = Consumer(conn, request, topic, target, self.topics, self.registry, reads)
            self.registry.add_consumer(topic, request.subscription, request.subType, reader)
            return reader
        await self._seeks_done(topic, request.subscription)
        await consumer_schema(self.topics, target.topic, request)
        options = SubscriptionOptions(
            initial_position="earliest" if request.initialPosition == S.Earliest else "latest",
            type=TYPES[request.subType],
            read_compacted=request.read_compacted,
            ack_timeout_ms=conn.config.subscription_ack_timeout_ms,
        )
        consumer = Consumer(conn, request, topic, target, self.topics, self.registry)
        self.registry.add_consumer(topic, request.subscription, request.subType, consumer)
        try:
            await self.topics.create_subscription(target.topic, request.subscription, options)
            if request.subType == S.Key_Shared and target.partition is None:
                await self.topics.key_shared_consumer(
                    target.topic, request.subscription, consumer.quire_id, key_shared_policy(request)
                )
        except Exception:
            self.registry.remove_consumer(topic, request.subscription, consumer)
            raise
        return consumer

    async def _seeks_done(self, topic: str, subscription: str) -> None:
        seeking = self._seeking.get((topic, subscription))
        if seeking is not None:
            await asyncio.wait_for(seeking.wait(), SEEK_WAIT_S)

    async def seek(self, conn: Connection, command: pb.BaseCommand, rest: memoryview) -> None:
        """As the Java broker does: the subscription's consumers are closed (CLOSE_CONSUMER; what
        they held is forgotten, not nacked: the cursor moves), the cursor is moved, SUCCESS; the
        clients subscribe again and get what follows the new position. A reader's position is
        kept for its new SUBSCRIBE (`readers`)."""
        request = command.seek
        consumer = conn.consumers.get(request.consumer_id)
        if consumer is None:
            conn.send_error(request.request_id, pb.ConsumerNotFound, "no such consumer")
            return
        key = (consumer.topic, consumer.subscription)
        seeking = self._seeking[key] = asyncio.Event()
        try:
            target = seek_target(request)
            if consumer.reads is not None:
                conn.seeks[request.consumer_id] = start_of(target)
                await self._disconnect(consumer)
            else:
                for other in list(self.registry.consumers.get(key, [])):
                    await self._disconnect(other)
                await self.topics.seek(consumer.target.topic, consumer.subscription, target)
        except Exception as exc:
            conn.send_failure(request.request_id, exc)
            return
        finally:
            seeking.set()
            if self._seeking.get(key) is seeking:
                del self._seeking[key]
        conn.send_success(request.request_id)

    async def _disconnect(self, consumer: Consumer) -> None:
        """Close a consumer from the broker's side: the client looks it up and subscribes again."""
        consumer.conn.consumers.pop(consumer.consumer_id, None)
        close = pb.CommandCloseConsumer(consumer_id=consumer.consumer_id, request_id=0)
        consumer.conn.send(T(type=T.CLOSE_CONSUMER, close_consumer=close))
        await consumer.close(nack=False)

    async def flow(self, conn: Connection, command: pb.BaseCommand, rest: memoryview) -> None:
        consumer = conn.consumers.get(command.flow.consumer_id)
        if consumer is not None:
            consumer.flow(command.flow.messagePermits)

    async def ack(self, conn: Connection, command: pb.BaseCommand, rest: memoryview) -> None:
        ack = command.ack
        consumer = conn.consumers.get(ack.consumer_id)
        error: Exception | None = None
        if consumer is not None:
            ids = [data for data in ack.message_id if _real(data)]
            try:
                if not consumer.durable:  # a reader acks nothing: forget what it held
                    for data in ids:
                        consumer.acked_ids(data)
                elif ack.ack_type == pb.CommandAck.Cumulative and ids:
                    await self.topics.ack_cumulative(
                        consumer.target.topic, consumer.subscription, consumer.cumulative_id(ids[-1])
                    )
                elif ids:
                    acked = [mid for data in ids for mid in consumer.acked_ids(data)]
                    await self.topics.ack(consumer.target.topic, consumer.subscription, acked)
            except Exception as exc:
                log.info("Pulsar consumer %s: ack failed: %s", consumer.quire_id, exc)
                error = exc
        if ack.HasField("request_id"):
            response = pb.CommandAckResponse(consumer_id=ack.consumer_id, request_id=ack.request_id)
            if error is not None:
                response.error, response.message = pb.UnknownError, str(error)
            conn.send(T(type=T.ACK_RESPONSE, ackResponse=response))

    async def redeliver(self, conn: Connection, command: pb.BaseCommand, rest: memoryview) -> None:
        request = command.redeliverUnacknowledgedMessages
        consumer = conn.consumers.get(request.consumer_id)
        if consumer is None:
            return
        positions = None
        if request.message_ids:
            positions = [Position(d.ledgerId, d.entryId) for d in request.message_ids]
        ids = consumer.take_unacked(positions)
        if ids and consumer.durable:
            await self.topics.nack(consumer.target.topic, consumer.subscription, ids)
            consumer.wake.set()

    async def close_consumer(self, conn: Connection, command: pb.BaseCommand, rest: memoryview) -> None:
        request = command.close_consumer
        consumer = conn.consumers.pop(request.consumer_id, None)
        if consumer is not None:
            await consumer.close()
        conn.send_success(request.request_id)

    async def unsubscribe(self, conn: Connection, command: pb.BaseCommand, rest: memoryview) -> None:
        request = command.unsubscribe
        consumer = conn.consumers.get(request.consumer_id)
        if consumer is None:
            conn.send_error(request.request_id, pb.ConsumerNotFound, "no such consumer")
            return
        others = [
            c
            for c in self.registry.consumers.get((consumer.topic, consumer.subscription), [])
            if c is not consumer
        ]
        if others:
            conn.send_error(request.request_id, pb.UnknownError, "the subscription has other consumers")
            return
        conn.consumers.pop(request.consumer_id, None)
        await consumer.close()
        if not consumer.durable:
            conn.send_success(request.request_id)
            return
        try:
            await self.topics.delete_subscription(consumer.target.topic, consumer.subscription)
        except SubscriptionNotFoundError as exc:
            # One Quire subscription spans the partitions: the partitioned consumer's first
            # partition to unsubscribe deleted it for all of them.
            if consumer.target.partition is None:
                conn.send_failure(request.request_id, exc)
                return
        except Exception as exc:
            conn.send_failure(request.request_id, exc)
            return
        conn.send_success(request.request_id)

    async def last_message_id(self, conn: Connection, command: pb.BaseCommand, rest: memoryview) -> None:
        request = command.getLastMessageId
        consumer = conn.consumers.get(request.consumer_id)
        if consumer is None:
            conn.send_error(request.request_id, pb.ConsumerNotFound, "no such consumer")
            return
        try:
            target = consumer.target
            last = await self.topics.last_message_id(target.topic, False, target.partition)
        except Exception as exc:
            conn.send_failure(request.request_id, exc)
            return
        data = pb.MessageIdData(ledgerId=NO_ID, entryId=NO_ID, partition=consumer.partition)
        if last is not None:
            data.ledgerId, data.entryId = last.ledger_id, last.entry_id
            data.batch_index = last.batch_index if last.batch_index > 0 else -1
        response = pb.CommandGetLastMessageIdResponse(last_message_id=data, request_id=request.request_id)
        marked = consumer.reads.mark_delete() if consumer.reads is not None else None
        if marked is not None:
            ledger, entry = marked
            response.consumer_mark_delete_position.ledgerId = ledger
            response.consumer_mark_delete_position.entryId = entry % 2**64  # -1 as the client reads it
        conn.send(T(type=T.GET_LAST_MESSAGE_ID_RESPONSE, getLastMessageIdResponse=response))
