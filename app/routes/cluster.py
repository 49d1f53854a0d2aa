"""Cluster views: the bookies registered in the metadata store, with their state; the
ledgers auto-recovery still has to re-replicate; decommissioning a bookie; and Prometheus
gauges of bookies per state and of under-replicated ledgers.

The registry and the store are handed over after the app is built (`install_registry`): the
broker process installs the real ones; an app built without them (unit tests with a fake topic
service) answers 503 here, since it cannot know which bookies exist.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Annotated, Literal, Protocol

from fastapi import APIRouter, FastAPI, Path, Request
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from app.errors import ApiError
from app.routes.common import NO_CONTENT, empty, problems
from bookie.ledger_metadata import BadVersionError, NotFoundError
from bookie.ledgers import COUNTERS as ledger_counters
from bookie.recovery_store import RecoveryStore
from bookie.registry import OPERATOR_STATES, BookieDirectory, BookieRegistry, BookieState, BookieStatus

BookieStateName = Literal["writable", "read_only", "down", "decommissioning", "decommissioned"]
BookieId = Annotated[
    str, Path(alias="bookieId", examples=["127.0.0.1:3181"], description="the bookie id: its host:port")
]


class ClusterStore(RecoveryStore, BookieDirectory, Protocol):
    """What these routes read and write in the metadata store."""


class BookieInfo(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    bookie_id: str = Field(
        alias="bookieId", title="Bookie id", examples=["127.0.0.1:3181"], description="host:port"
    )
    state: BookieStateName = Field(
        examples=["writable"],
        description="down: its heartbeat expired; read_only: its disk is nearly full; decommissioning: "
        "its ledgers are being copied elsewhere; decommissioned: drained, it may be stopped",
    )
    ledgers: int = Field(examples=[12], description="ledgers on its disk, as of its last heartbeat")
    free_bytes: int = Field(
        alias="freeBytes", title="Free bytes", examples=[52_428_800], description="free bytes on its disk"
    )


class BookieList(BaseModel):
    bookies: list[BookieInfo]


class UnderReplicatedInfo(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    ledger_id: int = Field(alias="ledgerId", title="Ledger id", examples=[42])
    missing_replicas: list[str] = Field(
        alias="missingReplicas",
        title="Missing replicas",
        examples=[["127.0.0.1:3182"]],
        description="bookies (lost or being decommissioned) whose copies of the ledger are being replaced",
    )


class UnderReplicatedList(BaseModel):
    ledgers: list[UnderReplicatedInfo]


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

    @router.get(
        "/admin/v2/bookies/underreplicated",
        operation_id="listUnderReplicatedLedgers",
        summary="Ledgers that lack copies auto-recovery has not replaced yet",
        response_model=UnderReplicatedList,
        responses=problems(),
    )
    def list_underreplicated(request: Request) -> UnderReplicatedList:
        rows = _store(request.app).list_underreplicated()
        return UnderReplicatedList(
            ledgers=[
                UnderReplicatedInfo(ledger_id=r.ledger_id, missing_replicas=list(r.named())) for r in rows
            ]
        )

    _add_decommission_routes(router)
    return router


def _add_decommission_routes(router: APIRouter) -> None:
    """Taking a bookie out (its copies moved elsewhere first), and changing one's mind."""

    @router.post(
        "/admin/v2/bookies/{bookieId}/decommission",
        operation_id="decommissionBookie",
        summary="Move every ledger copy off a bookie, then mark it decommissioned",
        status_code=NO_CONTENT,
        response_class=Response,
        responses=problems(404, 409, 422),
    )
    def decommission(request: Request, bookie_id: BookieId) -> Response:
        store = _store(request.app)
        for state in _stored_states(store, bookie_id):
            if state in OPERATOR_STATES:  # asking again changes nothing
                break
            _refuse_short_of_writable(request.app, bookie_id)
            if _set_state(store, bookie_id, BookieState.DECOMMISSIONING, expect=state):
                break
        return empty()

    @router.delete(
        "/admin/v2/bookies/{bookieId}/decommission",
        operation_id="cancelBookieDecommission",
        summary="Cancel a bookie's decommission: it takes new ledgers again",
        description="A decommissioning (or drained) bookie goes back to writable; copies already "
        "made elsewhere stay. A bookie that is not being decommissioned is left as it is.",
        status_code=NO_CONTENT,
        response_class=Response,
        responses=problems(404, 409, 422),
    )
    def cancel_decommission(request: Request, bookie_id: BookieId) -> Response:
        store = _store(request.app)
        for state in _stored_states(store, bookie_id):
            if state not in OPERATOR_STATES:
                break
            # Writable until its next heartbeat says otherwise (read-only on a full disk).
            if _set_state(store, bookie_id, BookieState.WRITABLE, expect=state):
                break
        return empty()


def _stored_states(store: ClusterStore, bookie_id: str, tries: int = 5) -> Iterator[BookieState]:
    """The bookie's stored state, read again for each retry of a compare-and-set that lost a race
    with the auditor (which marks a drained bookie decommissioned); 409 when it keeps moving."""
    for _ in range(tries):
        known = {r.bookie_id: r.state for r in store.list_bookies()}
        if bookie_id not in known:
            raise ApiError(404, f"bookie {bookie_id} is not registered", title="Unknown bookie")
        yield known[bookie_id]
    detail = f"bookie {bookie_id} changed state while this request ran: try again"
    raise ApiError(409, detail, title="Conflict")


def _set_state(store: ClusterStore, bookie_id: str, state: BookieState, *, expect: BookieState) -> bool:
    """Compare-and-set from `expect`; False when the state moved meanwhile (read it again)."""
    try:
        store.set_bookie_state(bookie_id, state, expect=expect)
    except BadVersionError:
        return False
    except NotFoundError as exc:
        raise ApiError(404, f"bookie {bookie_id} is not registered", title="Unknown bookie") from exc
    return True


def _refuse_short_of_writable(app: FastAPI, bookie_id: str) -> None:
    """409 when taking `bookie_id` out would leave fewer live writable bookies than a ledger's
    ensemble: every new ledger, so every produce, would fail until another bookie joins, and the
    decommission itself could never finish (its copies need somewhere to go)."""
    needed: int = getattr(app.state, "ensemble_size", 1)
    others = [
        b.bookie_id
        for b in _registry(app).all_bookies()
        if b.state == BookieState.WRITABLE and b.bookie_id != bookie_id
    ]
    if len(others) < needed:
        raise ApiError(
            409,
            f"decommissioning {bookie_id} would leave {len(others)} writable bookie(s) "
            f"({', '.join(others) or 'none'}) and ledgers need {needed} (QUIRE_ENSEMBLE_SIZE): "
            "start another bookie first",
            title="Not enough bookies",
        )


def _info(status: BookieStatus) -> BookieInfo:
    return BookieInfo(
        bookie_id=status.bookie_id,
        state=status.state.value,
        ledgers=status.ledgers,
        free_bytes=status.free_bytes,
    )


def _store(app: FastAPI) -> ClusterStore:
    store: ClusterStore | None = getattr(app.state, "cluster_store", None)
    if store is None:
        raise ApiError(503, "this broker has no bookie registry", title="Bookie registry unavailable")
    return store


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


class UnderReplicatedCollector(Collector):
    """`quire_underreplicated_ledgers`: ledgers auto-recovery still has to re-replicate."""

    def __init__(self, store: RecoveryStore) -> None:
        self.store = store

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily("quire_underreplicated_ledgers", "Ledgers lacking copies on live bookies")

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield self._family()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = self._family()
        try:
            family.add_metric([], len(self.store.list_underreplicated()))
        except Exception:  # the store is unreachable: no sample beats a wrong one
            return
        yield family


class EnsembleChangeCollector(Collector):
    """`quire_ensemble_changes_total`: bookies this broker's writers replaced mid-ledger."""

    def _family(self) -> CounterMetricFamily:
        return CounterMetricFamily("quire_ensemble_changes", "Failed bookies replaced by a ledger writer")

    def describe(self) -> Iterator[CounterMetricFamily]:
        yield self._family()

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = self._family()
        family.add_metric([], ledger_counters.ensemble_changes)
        yield family


def install_registry(
    app: FastAPI, registry: BookieRegistry, store: ClusterStore | None = None, ensemble_size: int = 1
) -> None:
    """Give the app its bookie registry and the store behind it (the routes read them, the gauges
    are scraped from them), and the ensemble size its ledgers need."""
    app.state.bookie_registry = registry
    app.state.cluster_store = store
    app.state.ensemble_size = ensemble_size
    metrics = getattr(app.state, "metrics", None)
    if metrics is not None:
        metrics.registry.register(BookieStateCollector(registry))
        metrics.registry.register(EnsembleChangeCollector())
        if store is not None:
            metrics.registry.register(UnderReplicatedCollector(store))
