"""Schemas: a producer's or consumer's declared schema (CommandProducer / CommandSubscribe
`schema`) goes to the topic's schema registry (`TopicsApi.put_schema`, the one REST's
`POST .../schema` calls), and GET_SCHEMA answers a topic's schema by version.

A producer's schema is stored (or found: the same schema keeps its version) and its version
goes back in PRODUCER_SUCCESS.schema_version as 8 bytes big-endian, Pulsar's form (the first is
eight zero bytes). A consumer's schema is stored when the topic has none yet, else only checked
(Pulsar checks a consumer's schema against the strategy without adding it). Refusals are
IncompatibleSchema, which the client does not retry. A partitioned topic's partitions share
the partitioned topic's schema. No schema, or AUTO_CONSUME: nothing is declared.
"""

from __future__ import annotations

import struct

from app.auth.policy import Need
from topics.api import TopicsApi
from topics.errors import SchemaNotFoundError

from .errors import server_error_of
from .proto import pulsar_api_pb2 as pb
from .security import Access
from .server import Connection, Handler
from .session import quire_topic, target_of

T = pb.BaseCommand
S = pb.Schema
# The protocol's schema types by Pulsar's names (the REST API's `type`).
TYPE_NAMES: dict[int, str] = {
    0: "NONE",  # Schema.Type None (a keyword in Python)
    S.String: "STRING",
    S.Json: "JSON",
    S.Protobuf: "PROTOBUF",
    S.Avro: "AVRO",
    S.Bool: "BOOLEAN",
    S.Int8: "INT8",
    S.Int16: "INT16",
    S.Int32: "INT32",
    S.Int64: "INT64",
    S.Float: "FLOAT",
    S.Double: "DOUBLE",
    S.Date: "DATE",
    S.Time: "TIME",
    S.Timestamp: "TIMESTAMP",
    S.KeyValue: "KEY_VALUE",
    S.Instant: "INSTANT",
    S.LocalDate: "LOCAL_DATE",
    S.LocalTime: "LOCAL_TIME",
    S.LocalDateTime: "LOCAL_DATE_TIME",
    S.ProtobufNative: "PROTOBUF_NATIVE",
}
TYPES_BY_NAME = {name: number for number, name in TYPE_NAMES.items()}


def version_bytes(version: int) -> bytes:
    return struct.pack(">q", version)


def declared(schema: pb.Schema) -> tuple[str, bytes, dict[str, str]] | None:
    """(type, definition, properties) of a declared schema; None for none to store."""
    name = TYPE_NAMES.get(schema.type)
    if name is None or name == "NONE":
        return None  # AUTO_CONSUME (or a type this listener does not know): nothing to store
    return name, schema.schema_data, {kv.key: kv.value for kv in schema.properties}


async def producer_schema(topics: TopicsApi, topic: str, request: pb.CommandProducer) -> bytes | None:
    """The producer's schema version (8 bytes) once stored or found; None without a schema."""
    if not request.HasField("schema"):
        return None
    found = declared(request.schema)
    if found is None:
        return None
    return version_bytes(await topics.put_schema(topic, *found))


async def consumer_schema(topics: TopicsApi, topic: str, request: pb.CommandSubscribe) -> None:
    if not request.HasField("schema"):
        return
    found = declared(request.schema)
    if found is None:
        return
    try:
        await topics.get_schema(topic)
    except SchemaNotFoundError:
        await topics.put_schema(topic, *found)
        return
    await topics.check_schema(topic, found[0], found[1])


class SchemaCommands:
    def __init__(self, topics: TopicsApi, access: Access) -> None:
        self.topics = topics
        self.access = access

    def handlers(self) -> dict[int, Handler]:
        return {T.GET_SCHEMA: self.get_schema}

    async def get_schema(self, conn: Connection, command: pb.BaseCommand, rest: memoryview) -> None:
        request = command.getSchema
        reply = pb.CommandGetSchemaResponse(request_id=request.request_id)
        try:
            topic = quire_topic(request.topic)
            await self.access.check(conn, topic, Need.LOOKUP)
            target = await target_of(self.topics, topic)
            version = None
            if request.HasField("schema_version") and len(request.schema_version) == 8:
                version = struct.unpack(">q", request.schema_version)[0]
            found = await self.topics.get_schema(target.topic, version)
        except SchemaNotFoundError as exc:
            reply.error_code, reply.error_message = pb.TopicNotFound, str(exc)  # Pulsar's answer
        except Exception as exc:
            reply.error_code, reply.error_message = server_error_of(exc), str(exc)
        else:
            reply.schema.name = request.topic
            reply.schema.schema_data = found.data
            reply.schema.type = TYPES_BY_NAME.get(found.schema_type, 0)  # type: ignore[assignment]
            reply.schema.properties.extend(pb.KeyValue(key=k, value=v) for k, v in found.properties.items())
            reply.schema_version = version_bytes(found.version)
        conn.send(T(type=T.GET_SCHEMA_RESPONSE, getSchemaResponse=reply))
