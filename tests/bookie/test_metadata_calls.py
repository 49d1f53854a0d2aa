"""The metadata store's one async seam (`bookie.metadata_calls`): its lanes are separate pools,
a timeout gives the retriable unavailable error, foreign errors are translated and the store's
own pass through, and every call is timed into its lane's histogram. (The broker's lease on the
heartbeat lane: tests/topics/test_ownership_lease.py; the figures' export:
tests/test_process_metrics.py.)"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from bookie.ledger_metadata import BadVersionError, MetadataUnavailableError
from bookie.metadata_calls import DEFAULT, HEARTBEAT, MetadataCalls, default_lanes, metadata_calls
from managed_ledger.metadata.sql import SqlMetadataStore
from managed_ledger.metadata.sql_errors import unavailable

WAIT_S = 5.0


@pytest.fixture
def calls() -> Iterator[MetadataCalls]:
    seam = MetadataCalls({DEFAULT: 1, HEARTBEAT: 1})
    yield seam
    seam.shutdown()


def _thread_name() -> str:
    return threading.current_thread().name


async def test_a_blocked_default_lane_does_not_delay_the_heartbeat_lane(calls: MetadataCalls) -> None:
    release = threading.Event()
    blocked = asyncio.create_task(calls.call(release.wait, WAIT_S))
    try:
        await asyncio.sleep(0.05)  # the default lane's one thread is now held
        # Shared threads would hold this call until the release (WAIT_S): it must come first.
        name = await asyncio.wait_for(calls.call(_thread_name, lane=HEARTBEAT), WAIT_S / 2)
        assert not blocked.done()
        assert name.startswith("quire-lease")
        queued = asyncio.create_task(calls.call(_thread_name))
        await asyncio.sleep(0.1)
        assert not queued.done(), "a second default call waits behind the held one"
    finally:
        release.set()
    assert await blocked is True
    assert (await queued).startswith("quire-metadata")


async def test_a_call_past_its_timeout_is_the_retriable_unavailable_error(calls: MetadataCalls) -> None:
    release = threading.Event()
    try:
        with pytest.raises(MetadataUnavailableError, match=r"took over 0\.05 s") as raised:
            await calls.call(release.wait, WAIT_S, timeout_s=0.05)
        assert raised.value.retriable
        assert calls.figures()[DEFAULT].timeouts == 1
    finally:
        release.set()
    with pytest.raises(TimeoutError, match="the call's own"):  # not the seam's limit: untouched
        await calls.call(_raise, TimeoutError("the call's own"), timeout_s=5.0)
    assert calls.figures()[DEFAULT].timeouts == 1
    # The seam-wide default applies when the call gives none; a call that ends in time is
    # untouched (on the second thread: the timed-out call holds the first until it ends).
    seam = MetadataCalls({DEFAULT: 2}, timeout_s=0.05)
    try:
        with pytest.raises(MetadataUnavailableError):
            await seam.call(time.sleep, 0.5)
        assert await seam.call(sum, [1, 2]) == 3
    finally:
        seam.shutdown()


def _operational() -> OperationalError:
    return OperationalError("SELECT 1", {}, ConnectionRefusedError("connection refused"))


def _raise(exc: Exception) -> None:
    raise exc


async def test_a_raw_sqlalchemy_connection_error_becomes_metadata_unavailable(calls: MetadataCalls) -> None:
    with pytest.raises(OperationalError):  # no translator yet: the raw error comes through
        await calls.call(_raise, _operational())
    calls.translate_with(unavailable)
    calls.translate_with(unavailable)  # once only
    with pytest.raises(MetadataUnavailableError, match="connection refused") as raised:
        await calls.call(_raise, _operational())
    assert isinstance(raised.value.__cause__, OperationalError)
    integrity = IntegrityError("INSERT", {}, ValueError("duplicate key"))
    with pytest.raises(IntegrityError):  # not a connection error: not the seam's to translate
        await calls.call(_raise, integrity)
    with pytest.raises(BadVersionError):  # the store's own errors pass through untouched
        await calls.call(_raise, BadVersionError("moved on"))


def test_building_a_sql_store_teaches_the_process_seam_its_errors(tmp_path: Path) -> None:
    store = SqlMetadataStore(f"sqlite:///{tmp_path / 'metadata.db'}")
    store.close()
    assert unavailable in metadata_calls._translators


async def test_every_call_is_timed_into_its_lanes_histogram(calls: MetadataCalls) -> None:
    await calls.call(time.sleep, 0.05)
    with pytest.raises(ZeroDivisionError):
        await calls.call(divmod, 1, 0)  # a failed call is timed too
    figures = calls.figures()
    assert figures[DEFAULT].seconds.count == 2
    assert 0.05 <= figures[DEFAULT].seconds.sum < 2.0
    assert figures[HEARTBEAT].seconds.count == 0
    await calls.call(time.sleep, 0.01, lane=HEARTBEAT)
    assert calls.figures()[HEARTBEAT].seconds.count == 1


def test_the_process_seam_has_heartbeat_threads_of_its_own_and_refuses_lanes_without_default() -> None:
    assert default_lanes()[HEARTBEAT] >= 2  # in-process test brokers: one held renewal blocks no other
    with pytest.raises(ValueError):
        MetadataCalls({HEARTBEAT: 1})
    with pytest.raises(ValueError):
        MetadataCalls({DEFAULT: 0})
