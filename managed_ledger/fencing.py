"""Ownership of one managed ledger: the metadata calls that can reveal another owner.

A managed ledger has one owner at a time. The owner learns it lost the managed ledger when a
compare-and-set on its metadata loses (another owner updated the record) or when the bookies
fence its ledger; from then on it refuses every write. `Fence` holds that flag and runs the
managed ledger's metadata calls, turning a lost compare-and-set into `ManagedLedgerFencedError`
and any other store failure into `ManagedLedgerMetadataError`.

With several brokers, the broker also hands in its ownership `lease` (true while the broker may
still serve its topics): once it is false the managed ledger is fenced before its next write or
metadata call, so a broker that was paused past its lease writes nothing (not even a cursor)
once it resumes, even before it notices that it lost its topics.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from bookie.metadata_calls import call_store
from managed_ledger.errors import ManagedLedgerFencedError, ManagedLedgerMetadataError
from managed_ledger.metadata.api import AlreadyExistsError, BadVersionError, MetadataError, NotFoundError

log = logging.getLogger(__name__)
T = TypeVar("T")


class Fence:
    def __init__(self, name: str, lease: Callable[[], bool] | None = None) -> None:
        self._name = name
        self._fenced = False
        self._lease = lease

    @property
    def fenced(self) -> bool:
        if not self._fenced and self._lease is not None and not self._lease():
            log.warning("managed ledger %s fenced: this broker's ownership lease lapsed", self._name)
            self._fenced = True
        return self._fenced

    def fence(self) -> None:
        if not self._fenced:
            log.warning("managed ledger %s fenced: another owner took over", self._name)
        self._fenced = True

    def check(self) -> None:
        if self.fenced:
            raise ManagedLedgerFencedError(f"{self._name} is fenced")

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """A synchronous metadata store call, run off the event loop."""
        self.check()
        return await self.guard(call_store(fn, *args))

    async def guard(self, call: Awaitable[T]) -> T:
        """Await a metadata call; a lost compare-and-set fences this owner."""
        try:
            return await call
        except BadVersionError as exc:
            self.fence()
            raise ManagedLedgerFencedError(f"{self._name}: another owner updated its metadata") from exc
        except (NotFoundError, AlreadyExistsError):
            raise
        except MetadataError as exc:
            raise ManagedLedgerMetadataError(f"{self._name}: metadata store: {exc}") from exc
