"""Operations: liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from app import schemas
from app.metrics import CONTENT_TYPE_LATEST, Metrics
from app.routes.common import json_response
from topics.api import TopicsApi


def ops_router(topics: TopicsApi, metrics: Metrics) -> APIRouter:
    router = APIRouter(tags=["ops"])

    @router.get("/healthz", operation_id="healthz", summary="The process is up")
    async def healthz() -> schemas.Health:
        return schemas.Health(status="ok")

    @router.get(
        "/readyz",
        operation_id="readyz",
        summary="The metadata store and the bookies are reachable (503 when not)",
        response_model=schemas.Readiness,
        responses={503: {"description": "Not ready", "model": schemas.Readiness}},
    )
    async def readyz() -> Response:
        try:
            checks = await topics.ready()
        except Exception:  # a failing check means: not ready, never a 500
            checks = {"metadata": False, "bookies": False}
        ready = all(checks.values())
        return json_response({"ready": ready, "checks": checks}, 200 if ready else 503)

    @router.get(
        "/metrics",
        operation_id="metrics",
        summary="Prometheus metrics (text exposition format)",
        response_class=Response,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
    )
    async def metrics_endpoint() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    return router
