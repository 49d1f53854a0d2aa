"""Cluster views: the bookies registered in the metadata store, with their state, and a
Prometheus gauge of how many are in each state.

The registry is handed over after the app is built (`install_registry`): the broker process
installs the real one; an app built without one (unit tests with a fake topic service) answers
503 here, since it cannot know which bookies exist.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Literal

from fastapi import APIRouter, FastAPI, Request
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from pydantic import BaseModel, ConfigDict, Field

from app.errors import ApiError
from app.routes.common import problems
from bookie.registry import BookieRegistry, BookieState, BookieStatus

BookieStateName = Literal["writable", "read_only", "down", "decommissioning"]


class BookieInfo(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    bookie_id: str = Field(
        alias="bookieId", title="Bookie id", examples=["127.0.0.1:3181"], description="host:port"
    )
    state: BookieStateName = Field(
        examples=["writable"], description="down: its heartbeat expired; read_only: its disk is nearly full"
    )
    ledgers: int = Field(examples=[12], description="ledgers on its disk, as of its last heartbeat")
    free_bytes: int = Field(
        alias="freeBytes", title="Free bytes", examples=[52_428_800], description="free bytes on its disk"
    )


class BookieList(BaseModel):
    bookies: list[BookieInfo]


def cluster_router() -> APIRouter:
    router = APIRouter(tags=["admin"])

    @router.get(
        "/admin/v2/bookies/all",
        operation_id="listBookies",
        summary="Every registered bookie and its state",
        response_model=BookieList,
        responses=problems(),
    )
    def list_bookies(request: Request) -> BookieList:
        # A plain `def`: the registry reads the metadata store synchronously, so FastAPI runs
        # this in its thread pool rather than on the event loop.
        registry = _registry(request.app)
        return BookieList(
            bookies=[
                BookieInfo(
                    bookie_id=b.bookie_id, state=b.state.value, ledgers=b.ledgers, free_bytes=b.free_bytes
                )
                for b in registry.all_bookies()
            ]
        )

    return router


def _info(status: BookieStatus) -> BookieInfo:
    return BookieInfo(
        bookie_id=status.bookie_id,
        state=status.state.value,
        ledgers=status.ledgers,
        free_bytes=status.free_bytes,
    )


def _registry(app: FastAPI) -> BookieRegistry:
    registry: BookieRegistry | None = getattr(app.state, "bookie_registry", None)
    if registry is None:
        raise ApiError(503, "this broker has no bookie registry", title="Bookie registry unavailable")
    return registry


class BookieStateCollector(Collector):
    """`quire_bookies{state=...}`: registered bookies per state, read at each scrape."""

    def __init__(self, registry: BookieRegistry) -> None:
        self.registry = registry

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily("quire_bookies", "Registered bookies by state", labels=["state"])

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("quire_bookies", "Registered bookies by state", labels=["state"])
        try:
            counts = Counter(b.state for b in self.registry.all_bookies())
        except Exception:  # the store is unreachable: no sample beats a wrong one
            return
        for state in BookieState:
            family.add_metric([state.value], counts.get(state, 0))
        yield family


def install_registry(app: FastAPI, registry: BookieRegistry) -> None:
    """Give the app its bookie registry: the route reads it, the gauge is scraped from it."""
    app.state.bookie_registry = registry
    metrics = getattr(app.state, "metrics", None)
    if metrics is not None:
        metrics.registry.register(BookieStateCollector(registry))
