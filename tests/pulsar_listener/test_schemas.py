"""Schemas over `pulsar-client`: a producer's declared schema is stored with version 0 (REST
sees it), the same schema keeps its version, a consumer with it decodes the records, the
namespace's strategy refuses an incompatible producer with IncompatibleSchema, and GET_SCHEMA
(raw frames, the listener's codec) answers a version."""

from __future__ import annotations

import json
import struct
import uuid

import httpx
import pulsar
import pytest
from pulsar.schema import AvroSchema, Integer, Record, String, StringSchema

from app.pulsar_listener.frames import command_frame
from app.pulsar_listener.proto import pulsar_api_pb2 as pb
from tests.pulsar_listener.support import Standalone
from tests.pulsar_listener.test_bad_frames import connected, read_command

pytestmark = pytest.mark.timeout(300)
RECEIVE_MS = 10_000
STRATEGY = "/admin/v2/namespaces/public/default/schemaCompatibilityStrategy"


class Order(Record):
    id = String()
    amount = Integer()


class OrderWithRequiredNote(Record):
    _avro_name = "Order"  # the same record, grown a field without a default
    id = String()
    amount = Integer()
    note = String(required=True)


def topic() -> tuple[str, str]:
    name = f"s-{uuid.uuid4().hex[:10]}"
    return f"persistent://public/default/{name}", f"public/default/{name}"


def rest_schema(standalone: Standalone, quire_name: str, path: str = "schema") -> httpx.Response:
    return httpx.get(f"{standalone.http}/admin/v2/schemas/{quire_name}/{path}", timeout=10)


def test_a_producer_schema_is_stored_once_and_a_consumer_decodes_with_it(
    client: pulsar.Client, standalone: Standalone
) -> None:
    name, quire_name = topic()
    producer = client.create_producer(name, schema=AvroSchema(Order))
    consumer = client.subscribe(
        name, "s", schema=AvroSchema(Order), initial_position=pulsar.InitialPosition.Earliest
    )
    again = client.create_producer(name, schema=AvroSchema(Order))
    producer.send(Order(id="o-1", amount=3))
    again.send(Order(id="o-2", amount=4))
    got = [consumer.receive(RECEIVE_MS).value() for _ in range(2)]
    assert [(o.id, o.amount) for o in got] == [("o-1", 3), ("o-2", 4)]
    stored = rest_schema(standalone, quire_name).json()
    assert stored["version"] == 0 and stored["type"] == "AVRO"
    assert json.loads(stored["data"])["name"] == "Order"
    versions = rest_schema(standalone, quire_name, "versions").json()["getSchemaResponses"]
    assert [v["version"] for v in versions] == [0]  # the same schema kept its version


def test_an_incompatible_producer_is_refused_with_incompatible_schema(
    client: pulsar.Client, standalone: Standalone
) -> None:
    name, quire_name = topic()
    r = httpx.put(f"{standalone.http}{STRATEGY}", json="BACKWARD", timeout=10)
    assert r.status_code == 204, r.text
    try:
        client.create_producer(name, schema=AvroSchema(Order))
        with pytest.raises(pulsar.IncompatibleSchema):
            client.create_producer(name, schema=AvroSchema(OrderWithRequiredNote))
        with pytest.raises(pulsar.IncompatibleSchema):
            client.create_producer(name, schema=StringSchema())  # another type
        assert [
            v["version"] for v in rest_schema(standalone, quire_name, "versions").json()["getSchemaResponses"]
        ] == [0]
    finally:
        httpx.put(f"{standalone.http}{STRATEGY}", json="FULL", timeout=10)


def test_get_schema_answers_the_latest_and_a_version(client: pulsar.Client, standalone: Standalone) -> None:
    name, _ = topic()
    client.create_producer(name, schema=StringSchema())
    sock = connected(standalone)
    try:
        for request_id, version in ((1, None), (2, struct.pack(">q", 0)), (3, struct.pack(">q", 9))):
            get = pb.CommandGetSchema(request_id=request_id, topic=name)
            if version is not None:
                get.schema_version = version
            sock.sendall(command_frame(pb.BaseCommand(type=pb.BaseCommand.GET_SCHEMA, getSchema=get)))
            reply = read_command(sock)
            assert reply.type == pb.BaseCommand.GET_SCHEMA_RESPONSE
            answer = reply.getSchemaResponse
            assert answer.request_id == request_id
            if request_id == 3:
                assert answer.error_code == pb.TopicNotFound
            else:
                assert not answer.HasField("error_code"), answer
                assert answer.schema.type == pb.Schema.String
                assert answer.schema_version == struct.pack(">q", 0)
    finally:
        sock.close()
