"""Session and discovery commands: CONNECT, PING/PONG, LOOKUP, PARTITIONED_METADATA.

CONNECT answers CONNECTED with protocol version min(client's, 20) -- 20 is what pulsar-client
3.13 (C++ 4.2) sends and the newest this listener's commands follow -- and the largest message
taken. PARTITIONED_METADATA answers the topic's partitions (0: not partitioned); a partition,
`<topic>-partition-<n>`, is then addressed by that name (`Target`). LOOKUP answers the
topic's owner (assigned now if none), authoritative: Connect when it is this broker, else
Redirect to the owner's Pulsar address from the broker registry (`BrokerRecord.pulsar_url`, as
the Kafka listener's Metadata uses `kafka_url`); an owner without a Pulsar listener is
ServiceNotReady.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from app.auth.policy import Need
from topics import names
from topics.api import TopicsApi
from topics.errors import TopicExistsError, TopicNotFoundError

from .errors import PulsarError, server_error_of
from .proto import pulsar_api_pb2 as pb
from .security import Access
from .server import Connection, Handler, PulsarCloseConnection

T = pb.BaseCommand
PROTOCOL_VERSION = 20
SERVER_VERSION = "Quire"
NON_PERSISTENT = "non-persistent://"


def quire_topic(name: str) -> str:
    """A Pulsar topic name as Quire's `tenant/namespace/topic` (InvalidNameError when it is not
    one); Quire's topics are all persistent."""
    if name.startswith(NON_PERSISTENT):
        raise PulsarError(f"{name}: Quire has persistent topics only", pb.NotAllowedError)
    return names.validate_topic(name)


class Session:
    def __init__(self, topics: TopicsApi, access: Access) -> None:
        self.topics = topics
        self.access = access

    def handlers(self) -> dict[int, Handler]:
        return {
            T.CONNECT: self.connect,
            T.PING: self.ping,
            T.PONG: self.pong,
            T.LOOKUP: self.lookup,
            T.PARTITIONED_METADATA: self.partitioned_metadata,
            T.GET_TOPICS_OF_NAMESPACE: self.topics_of_namespace,
        }

    async def connect(self, conn: Connection, command: pb.BaseCommand, rest: memoryview) -> None:
        if conn.connected:
            raise PulsarCloseConnection  # a second CONNECT: the client is confused
        connect = command.connect
        try:
            self.access.authenticate(conn, connect)
        except PulsarError as exc:
            conn.send_error(0, exc.server_error, str(exc))
            await conn.drain()
            raise PulsarCloseConnection from exc
        conn.connected = True
        conn.client_version = connect.client_version
        conn.protocol_version = min(connect.protocol_version, PROTOCOL_VERSION)
        connected = pb.CommandConnected(
            server_version=SERVER_VERSION,
            protocol_version=conn.protocol_version,
            max_message_size=conn.config.max_message_bytes,
        )
        conn.send(T(type=T.CONNECTED, connected=connected))

    async def ping(self, conn: Connection, command: pb.BaseCommand, rest: memoryview) -> None:
        conn.send(T(type=T.PONG, pong=pb.CommandPong()))

    async def pong(self, conn: Connection, command: pb.BaseCommand, rest: memoryview) -> None:
        return None

    async def lookup(self, conn: Connection, command: pb.BaseCommand, rest: memoryview) -> None:
        request = command.lookupTopic
        reply = pb.CommandLookupTopicResponse(request_id=request.request_id)
        try:
            topic = quire_topic(request.topic)
            await self.access.check(conn, topic, Need.LOOKUP)
            owner = await self.topics.lookup(topic)
        except Exception as exc:
            reply.response = reply.Failed
            reply.error = server_error_of(exc)
            reply.message = str(exc)
        else:
            url = conn.config.service_url if owner is None else owner.pulsar_url
            if not url:
                reply.response = reply.Failed
                reply.error = pb.ServiceNotReady
                reply.message = f"the owner of {topic} has no Pulsar listener"
            else:
                # The owner, authoritative: Connect when it is this broker, else Redirect (the
                # client asks the owner again, which answers Connect).
                here = url == conn.config.service_url
                reply.response = reply.Connect if here else reply.Redirect
                reply.brokerServiceUrl = url
                reply.authoritative = True
        conn.send(T(type=T.LOOKUP_RESPONSE, lookupTopicResponse=reply))

    async def topics_of_namespace(self, conn: Connection, command: pb.BaseCommand, rest: memoryview) -> None:
        """The namespace's topics (`persistent://...`), for the client's multi-topic and regex
        consumers: the client applies its pattern itself (and asks again every minute)."""
        request = command.getTopicsOfNamespace
        try:
            found = await _topics_of_namespace(self, conn, request)
        except Exception as exc:
            conn.send_failure(request.request_id, exc)
            return
        reply = pb.CommandGetTopicsOfNamespaceResponse(request_id=request.request_id, topics=found)
        conn.send(T(type=T.GET_TOPICS_OF_NAMESPACE_RESPONSE, getTopicsOfNamespaceResponse=reply))

    async def partitioned_metadata(self, conn: Connection, command: pb.BaseCommand, rest: memoryview) -> None:
        request = command.partitionMetadata
        reply = pb.CommandPartitionedTopicMetadataResponse(request_id=request.request_id)
        try:
            topic = quire_topic(request.topic)
            await self.access.check(conn, topic, Need.LOOKUP)
            reply.partitions = await self._partitions_or_create(conn, topic)
            reply.response = reply.Success  # set explicitly: the client tests has_response()
        except Exception as exc:
            reply.response = reply.Failed
            reply.error = server_error_of(exc)
            reply.message = str(exc)
        conn.send(T(type=T.PARTITIONED_METADATA_RESPONSE, partitionMetadataResponse=reply))

    async def _partitions_or_create(self, conn: Connection, topic: str) -> int:
        """The topic's partitions; TopicNotFound when its namespace does not exist. A topic that
        does not exist is created partitioned when the broker says so (`auto_topic_partitions`:
        Pulsar's allowAutoTopicCreationType=partitioned), else it answers 0 and the producer or
        consumer creates a plain topic (Pulsar's default, non-partitioned)."""
        try:
            return await self.topics.get_partitions(topic)
        except TopicNotFoundError:
            pass
        count = await partitions_of(self.topics, topic)
        auto = conn.config.auto_topic_partitions
        if not auto or names.partition_index(topic) is not None:
            return count
        with contextlib.suppress(TopicExistsError):
            await self.topics.create_topic(topic, auto)
        return await self.topics.get_partitions(topic)


@dataclass(frozen=True, slots=True)
class Target:
    """What a Pulsar topic name is in Quire: `topic` (Quire's name) and, for a partition's name
    `<base>-partition-<n>` of a partitioned topic, the base's name and n."""

    topic: str
    partition: int | None = None


async def target_of(topics: TopicsApi, topic: str) -> Target:
    """A partition of a partitioned topic by its name; anything else is the topic itself (a name
    ending in -partition-<n> that is no partition is a topic of its own, or refused as one)."""
    parsed = names.partition_index(topic)
    if parsed is not None:
        base, index = parsed
        try:
            count = await topics.get_partitions(base)
        except TopicNotFoundError:
            count = 0
        if index < count:
            return Target(base, index)
    await partitions_of(topics, topic)  # TopicNotFound when its namespace does not exist
    return Target(topic)


async def partitions_of(topics: TopicsApi, topic: str) -> int:
    """The topic's partitions; 0 for a topic not partitioned or not created yet (a producer or
    consumer creates it), TopicNotFound when its namespace does not exist."""
    try:
        return await topics.get_partitions(topic)
    except TopicNotFoundError:
        tenant, namespace, _ = topic.split("/", 2)
        known = await topics.list_namespaces(tenant)
        if namespace not in known and f"{tenant}/{namespace}" not in known:
            raise PulsarError(f"namespace {tenant}/{namespace} does not exist", pb.TopicNotFound) from None
        return 0


async def _topics_of_namespace(
    session: Session, conn: Connection, request: pb.CommandGetTopicsOfNamespace
) -> list[str]:
    namespace = request.namespace
    if namespace.count("/") != 1:
        raise PulsarError(f"namespace {namespace!r} is not tenant/namespace", pb.MetadataError)
    await session.access.check(conn, f"{namespace}/", Need.LOOKUP)
    if request.mode == request.NON_PERSISTENT:
        return []  # Quire's topics are all persistent
    return await session.topics.list_topics(namespace)
