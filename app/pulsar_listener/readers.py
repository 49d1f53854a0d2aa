"""Readers: Pulsar's non-durable subscriptions (`durable=false` in SUBSCRIBE), over Quire's
non-durable reads (`TopicsApi.read`, what the REST reader routes call).

A reader keeps its position itself, in the listener: it starts where SUBSCRIBE says
(`start_message_id`, else the initial position) and moves past each page it pushes. Nothing of
it is stored and it acks nothing (acks from the client are taken and dropped); it ends with
its connection. As the Java broker does, a start message id is delivered from its entry on --
the whole entry -- and the client drops what is before the id (or the id itself, unless the
reader is `start_message_id_inclusive`). `latest` is fixed at SUBSCRIBE to just after the last
message then, so that what is published while the reader waits is not skipped.

SEEK on a reader moves its position the same way; the listener then closes the reader
(CLOSE_CONSUMER) and the client subscribes again under the same consumer id, which starts at
the position the seek chose (`Connection.seeks`) whatever the client's SUBSCRIBE says: after a
seek by time the client knows no message id to give.
"""

from __future__ import annotations

import contextlib
from typing import Literal

from managed_ledger.position import MessageId
from topics import names
from topics.api import Delivery, SeekTarget, StartPosition, TopicsApi
from topics.errors import TopicExistsError, TopicNotFoundError

from .errors import PulsarError
from .proto import pulsar_api_pb2 as pb
from .server import Connection

# The client's sentinels, as the uint64 fields carry them: earliest is -1, latest INT64_MAX.
_EARLIEST_AT = 2**63


def seek_target(request: pb.CommandSeek) -> SeekTarget:
    """What a SEEK asks for: a message id (its entry; the client drops what is before it), a
    publish time, or the client's earliest and latest sentinels."""
    if request.HasField("message_id"):
        return position_of(request.message_id)
    if request.HasField("message_publish_time"):
        return int(request.message_publish_time)
    raise PulsarError("SEEK names neither a message id nor a publish time", pb.NotAllowedError)


def position_of(data: pb.MessageIdData) -> Literal["earliest", "latest"] | MessageId:
    if data.ledgerId >= _EARLIEST_AT or data.entryId >= _EARLIEST_AT:
        return "earliest"
    if data.ledgerId >= 2**63 - 1 or data.entryId >= 2**63 - 1:
        return "latest"
    return MessageId(data.ledgerId, data.entryId, 0)


def start_of(target: SeekTarget) -> StartPosition:
    """A seek target as a reader's start."""
    if isinstance(target, int):
        return ("time", target)
    return target


async def fixed_start(
    topics: TopicsApi, topic: str, start: StartPosition, read_compacted: bool, partition: int | None = None
) -> StartPosition:
    """`start` with `latest` resolved now (just after the last message; earliest when there is
    none), creating the topic when it does not exist, as a Pulsar broker does for a reader.
    `partition`: of that partition of the partitioned `topic`."""
    try:
        last = await topics.last_message_id(topic, read_compacted, partition)
    except TopicNotFoundError:
        with contextlib.suppress(TopicExistsError):
            await topics.create_topic(topic)
        last = await topics.last_message_id(topic, read_compacted)
    if start != "latest":
        return start
    return "earliest" if last is None else ("after", last)


def subscribe_start(conn: Connection, request: pb.CommandSubscribe) -> StartPosition:
    """Where a reader starts: a seek's position when the client resubscribes after one, else
    its start message id, else its initial position."""
    pending = conn.seeks.pop(request.consumer_id, None)
    if pending is not None:
        return pending  # type: ignore[no-any-return]
    if request.HasField("start_message_id"):
        return position_of(request.start_message_id)
    return "earliest" if request.initialPosition == pb.CommandSubscribe.Earliest else "latest"


class ReadPosition:
    """A reader's place in its topic, moved past each page read: what a `consumers.Consumer`
    reads from instead of a subscription when it is a reader."""

    def __init__(
        self,
        topics: TopicsApi,
        topic: str,
        start: StartPosition,
        read_compacted: bool,
        partition: int | None = None,
    ) -> None:
        self.topics = topics
        self.topic = topic
        self.start = start
        self.read_compacted = read_compacted
        self.partition = partition  # one partition of the partitioned `topic`

    async def fetch(self, max_messages: int, wait_ms: int) -> list[Delivery]:
        page = await self.topics.read(
            self.topic, self.start, max_messages, self.read_compacted, wait_ms, self.partition
        )
        if page.next is not None:
            self.start = names.parse_start(page.next)
        return [Delivery(m) for m in page.messages]

    def mark_delete(self) -> tuple[int, int] | None:
        """(ledger, entry) just before the next message, as the client compares it with the last
        message id in `has_message_available`; None when it is not known as an id."""
        start = self.start
        if isinstance(start, MessageId):
            return start.ledger_id, start.entry_id - 1
        if isinstance(start, tuple) and start[0] == "after" and isinstance(start[1], MessageId):
            return start[1].ledger_id, start[1].entry_id
        return None
