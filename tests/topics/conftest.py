"""The topics service over the real managed ledger, with the in-memory ledger client and
metadata store (fast), a manual clock for ack timeouts, and no background timers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from bookie.memory import InMemoryLedgerClient
from managed_ledger.clock import ManualClock
from managed_ledger.factory import ManagedLedgerFactory
from managed_ledger.metadata.api import MetadataStore
from managed_ledger.metadata.memory import InMemoryMetadataStore
from topics.config import TopicsConfig
from topics.service import TopicService


@dataclass
class Env:
    service: TopicService
    store: MetadataStore
    client: InMemoryLedgerClient
    factory: ManagedLedgerFactory
    clock: ManualClock

    async def restart(self, config: TopicsConfig | None = None) -> TopicService:
        """A new broker over the same metadata and bookies (the old one is closed)."""
        await self.service.close()
        await self.factory.close()
        self.factory = ManagedLedgerFactory(
            self.client, self.store, ["b1:3181"], clock=self.clock, timers=False
        )
        self.service = TopicService(
            self.store, self.factory, self.client, config or self.service._config, clock=self.clock
        )
        return self.service


async def make_env(store: MetadataStore, config: TopicsConfig | None = None) -> Env:
    client = InMemoryLedgerClient()
    clock = ManualClock()
    factory = ManagedLedgerFactory(client, store, ["b1:3181"], clock=clock, timers=False)
    service = TopicService(store, factory, client, config or TopicsConfig(), clock=clock)
    return Env(service, store, client, factory, clock)


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    e = await make_env(InMemoryMetadataStore())
    yield e
    await e.service.close()
    await e.factory.close()


@pytest.fixture
def svc(env: Env) -> TopicService:
    return env.service


@pytest.fixture
async def sql_env(metadata_url: str) -> AsyncIterator[Env]:
    """The same over the SQL metadata store (SQLite, or PostgreSQL where `metadata_url` says)."""
    from managed_ledger.metadata.sql import SqlMetadataStore

    store = SqlMetadataStore(metadata_url)
    env = await make_env(store)
    yield env
    await env.service.close()
    await env.factory.close()
    store.close()
