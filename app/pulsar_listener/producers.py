"""PRODUCER, SEND and CLOSE_PRODUCER.

Each producer has its own queue of SENDs and one task that publishes them in order through
`publish` (the topic call every door uses) and answers each with a SEND_RECEIPT once it is
stored -- receipts in send order, as the client requires. The receipt's id is the entry's
`ledgerId:entryId`; a batch's messages are batch indexes 0..n-1 of that entry. A duplicate
(Quire's deduplication, when on for the topic) is answered with ledgerId = entryId = -1, as
Pulsar does. A message whose checksum does not match gets SEND_ERROR ChecksumError and nothing
is stored; what the topic refuses gets SEND_ERROR with its code.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from typing import cast

from app.auth.policy import Need
from topics.api import ProduceResult, TopicsApi

from .entries import to_messages
from .errors import PulsarError, PulsarFrameError, server_error_of
from .frames import open_payload
from .proto import pulsar_api_pb2 as pb
from .publish import Publish
from .registry import Registry
from .schemas import producer_schema
from .security import Access
from .server import Connection, Handler, PulsarCloseConnection
from .session import Target, quire_topic, target_of

log = logging.getLogger("quire.pulsar")
T = pb.BaseCommand
NO_ID = 2**64 - 1  # -1 as the client reads these uint64 fields
MAX_QUEUED_SENDS = 10_000
CLOSE_FLUSH_S = 10.0


class Producer:
    def __init__(
        self,
        conn: Connection,
        producer_id: int,
        topic: str,
        target: Target,
        name: str,
        publish: Publish,
        registry: Registry,
    ) -> None:
        self.conn = conn
        self.producer_id = producer_id
        self.topic = topic  # the Pulsar name (a partition's, for a partitioned topic)
        self.target = target
        self.name = name
        self._publish = publish
        self._registry = registry
        self.connected_ms = int(time.time() * 1000)
        self.queue: asyncio.Queue[tuple[int, int, memoryview]] = asyncio.Queue(MAX_QUEUED_SENDS)
        self.task = asyncio.get_running_loop().create_task(self._pump())

    async def _pump(self) -> None:
        while True:
            sequence_id, highest, rest = await self.queue.get()
            try:
                await self._store(sequence_id, highest, rest)
            except PulsarFrameError as exc:
                log.info("Pulsar connection %s: producer %s: %s; closing", self.conn.peer, self.name, exc)
                self.conn.writer.transport.abort()
                return
            finally:
                self.queue.task_done()

    async def _store(self, sequence_id: int, highest: int, rest: memoryview) -> None:
        try:
            payload = open_payload(rest)
            messages = to_messages(payload.metadata, payload.body)
            results = await self._publish(self.target.topic, self.name, messages, self.target.partition)
        except PulsarFrameError:
            raise
        except Exception as exc:
            if not isinstance(exc, PulsarError):
                log.info(
                    "Pulsar producer %s on %s: SEND %d refused: %s", self.name, self.topic, sequence_id, exc
                )
            error = pb.CommandSendError(
                producer_id=self.producer_id,
                sequence_id=sequence_id,
                error=server_error_of(exc),
                message=str(exc),
            )
            self.conn.send(T(type=T.SEND_ERROR, send_error=error))
            return
        receipt = pb.CommandSendReceipt(
            producer_id=self.producer_id, sequence_id=sequence_id, message_id=_entry_id(results)
        )
        if highest:
            receipt.highest_sequence_id = highest
        self.conn.send(T(type=T.SEND_RECEIPT, send_receipt=receipt))

    async def close(self, flush: bool = False) -> None:
        if flush:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.queue.join(), CLOSE_FLUSH_S)
        self.task.cancel()
        self._registry.remove_producer(self.topic, self.name, self)


def _entry_id(results: list[ProduceResult]) -> pb.MessageIdData:
    for result in results:
        if result.message_id is not None:
            return pb.MessageIdData(ledgerId=result.message_id.ledger_id, entryId=result.message_id.entry_id)
    return pb.MessageIdData(ledgerId=NO_ID, entryId=NO_ID)  # a duplicate: nothing stored


class Producers:
    def __init__(self, topics: TopicsApi, publish: Publish, registry: Registry, access: Access) -> None:
        self.topics = topics
        self.publish = publish
        self.registry = registry
        self.access = access
        self._names = itertools.count()

    def handlers(self) -> dict[int, Handler]:
        return {T.PRODUCER: self.producer, T.SEND: self.send, T.CLOSE_PRODUCER: self.close_producer}

    async def producer(self, conn: Connection, command: pb.BaseCommand, rest: memoryview) -> None:
        request = command.producer
        try:
            producer = await self._open(conn, request)
        except Exception as exc:
            conn.send_failure(request.request_id, exc)
            return
        try:
            target = producer.target
            last = await self.publish.last_sequence_id(target.topic, producer.name, target.partition)
            schema_version = await producer_schema(self.topics, target.topic, request)
        except Exception as exc:
            conn.producers.pop(request.producer_id, None)
            await producer.close()
            conn.send_failure(request.request_id, exc)
            return
        # With dedup on, the client numbers its next message last + 1 (Pulsar's rule).
        success = pb.CommandProducerSuccess(
            request_id=request.request_id,
            producer_name=producer.name,
            last_sequence_id=-1 if last is None else last,
        )
        if schema_version is not None:
            success.schema_version = schema_version
        conn.send(T(type=T.PRODUCER_SUCCESS, producer_success=success))

    async def _open(self, conn: Connection, request: pb.CommandProducer) -> Producer:
        topic = quire_topic(request.topic)
        await self.access.check(conn, topic, Need.PRODUCE)
        target = await target_of(self.topics, topic)
        present = conn.producers.get(request.producer_id)
        if present is not None:
            if present.topic != topic:
                raise PulsarError(f"producer id {request.producer_id} is in use", pb.NotAllowedError)
            return cast(Producer, present)  # the same PRODUCER again: the same answer
        name = request.producer_name or f"{conn.config.broker_name}-{conn.number}-{next(self._names)}"
        producer = Producer(conn, request.producer_id, topic, target, name, self.publish, self.registry)
        try:
            self.registry.add_producer(topic, name, request.producer_access_mode, producer)
        except Exception:
            producer.task.cancel()
            raise
        conn.producers[request.producer_id] = producer
        return producer

    async def send(self, conn: Connection, command: pb.BaseCommand, rest: memoryview) -> None:
        send = command.send
        producer = conn.producers.get(send.producer_id)
        if producer is None:
            log.info(
                "Pulsar connection %s: SEND for unknown producer %d; closing", conn.peer, send.producer_id
            )
            raise PulsarCloseConnection
        if send.is_chunk:
            error = pb.CommandSendError(
                producer_id=send.producer_id,
                sequence_id=send.sequence_id,
                error=pb.NotAllowedError,
                message="chunked messages are not supported yet",
            )
            conn.send(T(type=T.SEND_ERROR, send_error=error))
            return
        await producer.queue.put((send.sequence_id, send.highest_sequence_id, rest))

    async def close_producer(self, conn: Connection, command: pb.BaseCommand, rest: memoryview) -> None:
        request = command.close_producer
        producer = conn.producers.pop(request.producer_id, None)
        if producer is not None:
            await producer.close(flush=True)
        conn.send_success(request.request_id)
