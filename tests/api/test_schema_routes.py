"""The schema registry's REST routes against the real app (in process, over the real topics
service): versions, the same schema keeping its version, the namespace's strategy refusing an
incompatible schema (409 incompatible-schema), deletion, and bad input as 4xx problem+json."""

from __future__ import annotations

import json

import httpx
import pytest

SCHEMAS = "/admin/v2/schemas/public/default/orders"
STRATEGY = "/admin/v2/namespaces/public/default/schemaCompatibilityStrategy"
PROBLEM = "application/problem+json"


def record(*fields: dict[str, object]) -> str:
    return json.dumps({"type": "record", "name": "Order", "fields": list(fields)})


ID = {"name": "id", "type": "string"}
AMOUNT_REQUIRED = {"name": "amount", "type": "long"}
AMOUNT_DEFAULT = {"name": "amount", "type": "long", "default": 0}


async def post(client: httpx.AsyncClient, schema: str, kind: str = "AVRO") -> httpx.Response:
    return await client.post(f"{SCHEMAS}/schema", json={"type": kind, "schema": schema, "properties": {}})


async def test_versions_from_zero_and_the_same_schema_keeps_its_version(client: httpx.AsyncClient) -> None:
    r = await client.get(f"{SCHEMAS}/schema")
    assert r.status_code == 404 and r.headers["content-type"].startswith(PROBLEM)
    assert (await post(client, record(ID))).json() == {"version": 0}
    assert (await post(client, record(ID))).json() == {"version": 0}  # the same: its version
    assert (await post(client, record(ID, AMOUNT_DEFAULT))).json() == {"version": 1}
    latest = (await client.get(f"{SCHEMAS}/schema")).json()
    assert latest["version"] == 1 and latest["type"] == "AVRO"
    assert json.loads(latest["data"]) == json.loads(record(ID, AMOUNT_DEFAULT))
    first = (await client.get(f"{SCHEMAS}/schema/0")).json()
    assert json.loads(first["data"]) == json.loads(record(ID))
    versions = (await client.get(f"{SCHEMAS}/versions")).json()["getSchemaResponses"]
    assert [v["version"] for v in versions] == [0, 1]
    r = await client.get(f"{SCHEMAS}/schema/7")
    assert r.status_code == 404 and r.headers["content-type"].startswith(PROBLEM)


@pytest.mark.parametrize(
    ("strategy", "refused", "taken"),
    [
        # BACKWARD: the new schema reads old data: a new field needs a default.
        ("BACKWARD", record(ID, AMOUNT_REQUIRED), record(ID, AMOUNT_DEFAULT)),
        # FORWARD: old readers read new data: a field may be added, not removed without default.
        ("FORWARD", record({"name": "other", "type": "string"}), record(ID, AMOUNT_REQUIRED)),
        # FULL: both ways.
        ("FULL", record(ID, AMOUNT_REQUIRED), record(ID, AMOUNT_DEFAULT)),
    ],
)
async def test_the_namespace_strategy_refuses_an_incompatible_schema(
    client: httpx.AsyncClient, strategy: str, refused: str, taken: str
) -> None:
    r = await client.put(STRATEGY, json=strategy)
    assert r.status_code == 204, r.text
    assert (await client.get(STRATEGY)).json() == strategy
    assert (await post(client, record(ID))).json() == {"version": 0}
    r = await post(client, refused)
    assert r.status_code == 409 and r.headers["content-type"].startswith(PROBLEM), r.text
    assert r.json()["type"].endswith("incompatible-schema")
    assert (await post(client, taken)).json() == {"version": 1}
    r = await post(client, record(ID), kind="JSON")  # a change of type
    assert r.status_code == 409


async def test_always_compatible_takes_anything_and_delete_starts_again(client: httpx.AsyncClient) -> None:
    assert (await client.get(STRATEGY)).json() == "FULL"  # unset: Pulsar's default
    assert (await client.put(STRATEGY, json="ALWAYS_COMPATIBLE")).status_code == 204
    assert (await post(client, record(ID))).json() == {"version": 0}
    assert (await post(client, record({"name": "x", "type": "int"}))).json() == {"version": 1}
    assert (await post(client, "", kind="STRING")).json() == {"version": 2}
    r = await client.delete(f"{SCHEMAS}/schema")
    assert r.status_code == 200 and r.json() == {"version": 3}
    assert (await client.get(f"{SCHEMAS}/schema")).status_code == 404
    assert (await client.get(f"{SCHEMAS}/versions")).json() == {"getSchemaResponses": []}
    assert (await client.delete(f"{SCHEMAS}/schema")).status_code == 404
    assert (await client.put(STRATEGY, json="FULL")).status_code == 204
    assert (await post(client, record({"name": "y", "type": "int"}))).json() == {"version": 4}


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", f"{SCHEMAS}/schema", {"type": "AVRO", "schema": "{not json"}),
        ("post", f"{SCHEMAS}/schema", {"type": "AVRO", "schema": '{"type": "nonsense"}'}),
        ("post", f"{SCHEMAS}/schema", {"type": "NOPE", "schema": ""}),
        ("post", f"{SCHEMAS}/schema", {"schema": ""}),
        ("post", f"{SCHEMAS}/schema", {"type": "AVRO", "schema": "", "properties": {"a": 1}}),
        ("post", f"{SCHEMAS}/schema", [1, 2]),
        ("get", f"{SCHEMAS}/schema/-1", None),
        ("get", f"{SCHEMAS}/schema/abc", None),
        ("put", STRATEGY, "SOMETIMES"),
        ("put", STRATEGY, 5),
        ("get", "/admin/v2/schemas/public/nope/orders/schema", None),
        ("put", "/admin/v2/namespaces/public/nope/schemaCompatibilityStrategy", "FULL"),
        ("get", "/admin/v2/schemas/public/default/bad..name!/schema", None),
    ],
)
async def test_bad_input_is_a_4xx_problem(
    client: httpx.AsyncClient, method: str, path: str, body: object
) -> None:
    kwargs = {} if body is None else {"json": body}
    r = await client.request(method.upper(), path, **kwargs)  # type: ignore[arg-type]
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    assert r.headers["content-type"].startswith(PROBLEM)
