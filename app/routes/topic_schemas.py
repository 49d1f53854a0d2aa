"""Topics' schemas in Pulsar's admin grammar (the schema registry the Pulsar door fills):
`GET|POST|DELETE /admin/v2/schemas/{tenant}/{namespace}/{topic}/schema`, `GET .../schema/{version}`,
`GET .../versions` (every live version), and the namespace's
`GET|PUT /admin/v2/namespaces/{tenant}/{namespace}/schemaCompatibilityStrategy` (a JSON string).

A schema's definition travels as text (`data` / `schema`: the Avro or JSON definition, empty
for STRING and the other primitive types), as Pulsar's admin API carries it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Body, Path
from pydantic import BaseModel, Field
from starlette.responses import Response

from app.routes.common import Namespace, Tenant, Topic, empty, full_name, problems
from managed_ledger.metadata.api import SchemaVersion
from topics.api import TopicsApi
from topics.schema_compat import STRATEGIES
from topics.schemas import SCHEMA_TYPES

SCHEMA = "/admin/v2/schemas/{tenant}/{namespace}/{topic}"
STRATEGY = "/admin/v2/namespaces/{tenant}/{namespace}/schemaCompatibilityStrategy"
SchemaTypeName = Literal[SCHEMA_TYPES]  # type: ignore[valid-type]
StrategyName = Literal[STRATEGIES]  # type: ignore[valid-type]
Version = Annotated[int, Path(ge=0, le=2**62, examples=[0], description="the schema version")]


class GetSchemaResponse(BaseModel):
    version: int = Field(examples=[0], description="the version (the first is 0)")
    type: str = Field(examples=["AVRO"], description="Pulsar's schema type")
    timestamp: int = Field(examples=[1_764_000_000_000], description="when it was stored (epoch ms)")
    data: str = Field(
        examples=['{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}'],
        description="the definition (empty for STRING and the other primitive types)",
    )
    properties: dict[str, str] = Field(
        default_factory=dict, title="SchemaProperties", description="the schema's properties"
    )


class GetAllVersionsResponse(BaseModel):
    getSchemaResponses: list[GetSchemaResponse] = Field(description="every live version, oldest first")


class PostSchemaPayload(BaseModel):
    type: SchemaTypeName = Field(examples=["AVRO"], description="Pulsar's schema type")
    schema_: str = Field(
        default="",
        alias="schema",
        max_length=1024 * 1024,
        examples=['{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}'],
        description="the definition (an Avro record for AVRO and JSON)",
    )
    properties: dict[str, str] = Field(
        default_factory=dict, title="PostSchemaProperties", description="the schema's properties"
    )


class SchemaVersionResponse(BaseModel):
    version: int = Field(examples=[1], description="the schema's version (a delete: its mark's)")


def _body(v: SchemaVersion) -> GetSchemaResponse:
    return GetSchemaResponse(
        version=v.version,
        type=v.schema_type,
        timestamp=v.created_ms,
        data=v.data.decode("utf-8", errors="replace"),
        properties=dict(v.properties),
    )


def schema_router(topics: TopicsApi) -> APIRouter:
    router = APIRouter(tags=["schemas"])

    @router.get(
        f"{SCHEMA}/schema",
        operation_id="getSchema",
        summary="The topic's latest schema",
        response_model=GetSchemaResponse,
        responses=problems(404, 422),
    )
    async def get_schema(tenant: Tenant, namespace: Namespace, topic: Topic) -> GetSchemaResponse:
        return _body(await topics.get_schema(full_name(tenant, namespace, topic)))

    @router.get(
        f"{SCHEMA}/schema/{{version}}",
        operation_id="getSchemaVersion",
        summary="One version of the topic's schema",
        response_model=GetSchemaResponse,
        responses=problems(404, 422),
    )
    async def get_schema_version(
        tenant: Tenant, namespace: Namespace, topic: Topic, version: Version
    ) -> GetSchemaResponse:
        return _body(await topics.get_schema(full_name(tenant, namespace, topic), version))

    @router.get(
        f"{SCHEMA}/versions",
        operation_id="getAllSchemas",
        summary="Every live version of the topic's schema, oldest first",
        response_model=GetAllVersionsResponse,
        responses=problems(404, 422),
    )
    async def get_all(tenant: Tenant, namespace: Namespace, topic: Topic) -> GetAllVersionsResponse:
        found = await topics.schema_versions(full_name(tenant, namespace, topic))
        return GetAllVersionsResponse(getSchemaResponses=[_body(v) for v in found])

    @router.post(
        f"{SCHEMA}/schema",
        operation_id="postSchema",
        summary="Store a schema for the topic (its version; a new one only if the namespace's "
        "schemaCompatibilityStrategy lets it in, else 409 incompatible-schema)",
        response_model=SchemaVersionResponse,
        responses=problems(404, 409, 422),
    )
    async def post_schema(
        tenant: Tenant, namespace: Namespace, topic: Topic, payload: PostSchemaPayload
    ) -> SchemaVersionResponse:
        version = await topics.put_schema(
            full_name(tenant, namespace, topic), payload.type, payload.schema_.encode(), payload.properties
        )
        return SchemaVersionResponse(version=version)

    @router.delete(
        f"{SCHEMA}/schema",
        operation_id="deleteSchema",
        summary="Delete the topic's schema (a deletion mark is stored as the next version)",
        response_model=SchemaVersionResponse,
        responses=problems(404, 422),
    )
    async def delete_schema(tenant: Tenant, namespace: Namespace, topic: Topic) -> SchemaVersionResponse:
        return SchemaVersionResponse(version=await topics.delete_schema(full_name(tenant, namespace, topic)))

    _strategy_routes(router, topics)
    return router


def _strategy_routes(router: APIRouter, topics: TopicsApi) -> None:
    @router.get(
        STRATEGY,
        operation_id="getSchemaCompatibilityStrategy",
        summary="The namespace's schema compatibility strategy (FULL when unset)",
        response_model=StrategyName,
        responses=problems(404, 422),
    )
    async def get_strategy(tenant: Tenant, namespace: Namespace) -> str:
        return await topics.get_schema_compatibility(f"{tenant}/{namespace}")

    @router.put(
        STRATEGY,
        operation_id="setSchemaCompatibilityStrategy",
        summary="Set the namespace's schema compatibility strategy",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def set_strategy(
        tenant: Tenant, namespace: Namespace, strategy: Annotated[StrategyName, Body(examples=["FORWARD"])]
    ) -> Response:
        await topics.set_schema_compatibility(f"{tenant}/{namespace}", strategy)
        return empty()
