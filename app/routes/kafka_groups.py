"""Kafka consumer groups in the admin API: the groups, their committed offsets, and, when this
broker coordinates the group, its state and members; deleting a group's offsets.

The offsets come from the metadata store (every broker answers alike); the membership only from
the group's coordinator, installed by the Kafka listener (`install_group_coordinator`). A
broker without a Kafka listener still shows and deletes the offsets. A group with members on
this broker's coordinator is not deleted (409); members on another broker's are not seen here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, FastAPI, Path, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from app.kafka_listener.group_offsets import GroupCoordinator
from app.kafka_listener.groups import GroupSummary
from app.routes.common import NO_CONTENT, empty, problems
from managed_ledger.metadata.api import GroupOffset
from topics.api import AdminApi
from topics.errors import GroupNotFoundError
from topics.group_offsets import MAX_GROUP_ID_LENGTH
from topics.names import PERSISTENT_PREFIX

GroupPath = Annotated[
    str,
    Path(min_length=1, max_length=MAX_GROUP_ID_LENGTH, examples=["billing"], description="the group id"),
]
GroupStateName = Literal["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]


class KafkaGroupOffset(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    topic: str = Field(examples=["persistent://public/default/orders"], description="the Quire topic")
    partition: int = Field(examples=[0], description="the partition (0 for a topic that is not partitioned)")
    offset: int = Field(examples=[42], description="the committed offset: the next one the group consumes")
    metadata: str = Field(examples=[""], description="what the client stored with the commit")
    commit_time_ms: int = Field(
        alias="commitTimeMs", title="Commit time (ms)", examples=[1_764_000_000_000], description="epoch ms"
    )


class KafkaGroupMember(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    member_id: str = Field(alias="memberId", title="Member id", examples=["rdkafka-5d1f2c"])
    client_id: str = Field(alias="clientId", title="Client id", examples=["rdkafka"])
    assignment_bytes: int = Field(
        alias="assignmentBytes",
        title="Assignment bytes",
        examples=[48],
        description="the size of the assignment the leader gave it (its format is the client's)",
    )


class KafkaGroup(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    group: str = Field(examples=["billing"])
    offsets: list[KafkaGroupOffset]
    state: GroupStateName | None = Field(
        default=None,
        examples=["Stable"],
        description="the group's state on its coordinator; null when this broker does not hold it",
    )
    generation: int | None = Field(default=None, examples=[3], description="null as state is")
    protocol: str | None = Field(default=None, examples=["range"], description="the assignor the members use")
    leader: str | None = Field(
        default=None, examples=["rdkafka-5d1f2c"], description="the leader's member id"
    )
    members: list[KafkaGroupMember] | None = Field(default=None, description="null as state is")


def kafka_groups_router(topics: AdminApi) -> APIRouter:
    router = APIRouter(tags=["admin"])

    @router.get(
        "/admin/v2/kafka/groups",
        operation_id="listKafkaGroups",
        summary="Kafka consumer groups: those with committed offsets, and those this broker coordinates",
        responses=problems(),
    )
    async def list_groups(request: Request) -> list[str]:
        coordinator = _coordinator(request.app)
        if coordinator is not None:
            return await coordinator.list_groups()
        return await topics.list_groups()

    @router.get(
        "/admin/v2/kafka/groups/{group}",
        operation_id="getKafkaGroup",
        summary="A Kafka consumer group's committed offsets, and its members if this broker coordinates it",
        response_model=KafkaGroup,
        response_model_by_alias=True,
        responses=problems(404, 422),
    )
    async def get_group(request: Request, group: GroupPath) -> KafkaGroup:
        offsets = await topics.group_offsets(group)
        coordinator = _coordinator(request.app)
        summary = coordinator.describe(group) if coordinator is not None else None
        if not offsets and summary is None:
            raise GroupNotFoundError(group)
        return _group_body(group, offsets, summary)

    @router.delete(
        "/admin/v2/kafka/groups/{group}",
        operation_id="deleteKafkaGroup",
        summary="Delete a Kafka consumer group's committed offsets (409 while it has members here)",
        status_code=NO_CONTENT,
        response_model=None,
        responses=problems(404, 409, 422),
    )
    async def delete_group(request: Request, group: GroupPath) -> Response:
        coordinator = _coordinator(request.app)
        if coordinator is not None:
            await coordinator.delete_group(group)
        elif await topics.delete_group_offsets(group) == 0:
            raise GroupNotFoundError(group)
        return empty()

    return router


def _group_body(group: str, offsets: list[GroupOffset], summary: GroupSummary | None) -> KafkaGroup:
    body: dict[str, Any] = {}
    if summary is not None:
        body = {
            "state": summary.state.value,
            "generation": summary.generation,
            "protocol": summary.protocol,
            "leader": summary.leader,
            "members": [
                KafkaGroupMember(
                    member_id=m.member_id, client_id=m.client_id, assignment_bytes=m.assignment_bytes
                )
                for m in summary.members
            ],
        }
    return KafkaGroup(
        group=group,
        offsets=[
            KafkaGroupOffset(
                topic=PERSISTENT_PREFIX + o.topic,
                partition=o.partition,
                offset=o.offset,
                metadata=o.metadata,
                commit_time_ms=o.commit_time_ms,
            )
            for o in offsets
        ],
        **body,
    )


def _coordinator(app: FastAPI) -> GroupCoordinator | None:
    coordinator: GroupCoordinator | None = getattr(app.state, "kafka_group_coordinator", None)
    return coordinator


def install_group_coordinator(app: FastAPI, coordinator: GroupCoordinator) -> None:
    """Give the admin API the Kafka listener's group coordinator (its groups' members)."""
    app.state.kafka_group_coordinator = coordinator
