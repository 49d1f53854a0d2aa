"""Whole-topic operations under the admin prefix (app/routes/admin.py): Pulsar's terminate and
truncate, Kafka's DeleteRecords as truncateBefore (docs/rest-api.md, topics.topic_ops)."""

from fastapi import APIRouter
from starlette.responses import Response

from app import schemas
from app.codec import parse_message_id
from app.routes.common import Namespace, Tenant, Topic, empty, full_name, json_response, problems
from topics.api import AdminApi


def topic_ops_routes(router: APIRouter, topics: AdminApi, prefix: str) -> None:
    @router.post(
        prefix + "/{topic}/terminate",
        operation_id="terminateTopic",
        summary="Terminate the topic: no produce is taken again; answers the last message id",
        response_model=schemas.TerminateResult,
        responses=problems(404, 422),
    )
    async def terminate(tenant: Tenant, namespace: Namespace, topic: Topic) -> Response:
        done = await topics.terminate(full_name(tenant, namespace, topic))
        return json_response(
            {
                "messageId": None if done.message_id is None else str(done.message_id),
                "partitions": {n: str(m) for n, m in done.partitions.items() if m is not None},
            }
        )

    @router.delete(
        prefix + "/{topic}/truncate",
        operation_id="truncateTopic",
        summary="Move every subscription to the end and delete every closed ledger",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def truncate(tenant: Tenant, namespace: Namespace, topic: Topic) -> Response:
        await topics.truncate(full_name(tenant, namespace, topic))
        return empty()

    @router.post(
        prefix + "/{topic}/truncateBefore",
        operation_id="truncateTopicBefore",
        summary="Move the log start to a message id (Kafka's DeleteRecords); never backwards",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def truncate_before(
        tenant: Tenant, namespace: Namespace, topic: Topic, body: schemas.MessageIdBody
    ) -> Response:
        target = parse_message_id(body.messageId, "messageId")
        await topics.truncate_before(full_name(tenant, namespace, topic), target)
        return empty()
