"""compactionPolicy through the generated client on a live stack on PostgreSQL: a `quire bookie`,
a `quire broker` and a `quire compactor` (local Spark) as processes. The maxLagMs trigger
requests the runs (nobody calls PUT .../compaction until the end); the compactor reads
deleteRetentionMs from the metadata store, so a tombstone shows in the compacted view while it
is young and a later run drops it. The in-process checks are tests/api/test_compaction_policy_routes.py,
the rules themselves tests/topics/test_compaction_policy.py and tests/compactor/test_runner.py."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from quire_client import Client
from quire_client.api.admin import get_compaction_policy, get_compaction_status, set_compaction_policy
from quire_client.api.admin import trigger_compaction as put_compaction
from quire_client.api.data import produce, read_messages
from quire_client.models import (
    CompactionPolicy,
    CompactionPolicyUpdate,
    CompactionStatus,
    KeylessPolicy,
    MessageOut,
    ProduceMessage,
    ProduceRequest,
    ReadPage,
)

from tests.api.conftest import Stack, start_stack
from tests.conftest import drop_postgres_schema, fresh_postgres_schema_url
from tests.support import QuireProcess, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow]
NS = ("public", "default")
RUN_BOUND_S = 180.0  # a run on a loaded 2-core machine (the first job of a cold Spark session)
MAX_LAG_MS = 500
HOUR_MS = 3_600_000  # the tombstone's retention while the test looks at it: no race with the run
SHORT_MS = 1_000  # ... then, lowered: the next run finds it older than that


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, postgres_url: str) -> Iterator[tuple[Stack, QuireProcess]]:
    root: Path = tmp_path_factory.mktemp("compaction-policy")
    url, schema = fresh_postgres_schema_url(postgres_url)
    stack = start_stack(
        root / "stack",
        url,
        QUIRE_COMPACTION_CHECK_INTERVAL_MS="200",
        QUIRE_COMPACTION_POLL_INTERVAL_MS="200",
        QUIRE_SPARK_MASTER="local[2]",
    )
    compactor = None
    try:
        compactor = QuireProcess(["compactor"], stack.env(), root / "compactor.log").start()
        yield stack, compactor
    finally:
        if compactor is not None:
            compactor.stop(timeout_s=30)
        stack.stop()
        drop_postgres_schema(postgres_url, schema)


def send(api: Client, topic: str, key: str, value: str) -> str:
    body = ProduceRequest(messages=[ProduceMessage(key=key, value=value)])
    r = produce.sync_detailed(*NS, topic, client=api, body=body)
    assert r.status_code == 200 and r.parsed is not None and hasattr(r.parsed, "results"), r.content
    return str(r.parsed.results[0].message_id)


def view(api: Client, topic: str) -> list[MessageOut]:
    """The compacted view plus the topic after the horizon (read_compacted), from the start."""
    r = read_messages.sync_detailed(
        *NS, topic, client=api, start="earliest", max_messages=100, read_compacted=True
    )
    assert r.status_code == 200 and isinstance(r.parsed, ReadPage), r.content
    return list(r.parsed.messages)


def run_through(api: Client, topic: str, compactor: QuireProcess, horizon: str, after_ms: int = 0) -> Any:
    """Wait (bounded) for a successful run that compacted through `horizon` and ended after
    `after_ms`; its status."""
    seen: list[CompactionStatus] = []

    def done() -> bool:
        assert compactor.alive(), compactor.log()[-3000:]
        r = get_compaction_status.sync_detailed(*NS, topic, client=api)
        assert r.status_code == 200 and isinstance(r.parsed, CompactionStatus), r.content
        seen.append(r.parsed)
        s = r.parsed
        return str(s.status) == "SUCCESS" and s["horizon"] == horizon and int(s["endedMs"] or 0) > after_ms

    wait_until(done, RUN_BOUND_S, f"a compaction of {topic} through {horizon}", interval_s=0.2)
    return seen[-1]


def test_max_lag_triggers_runs_and_a_tombstone_stays_for_its_retention(
    live: tuple[Stack, QuireProcess],
) -> None:
    stack, compactor = live
    topic = f"cpol-{uuid.uuid4().hex[:8]}"
    with Client(base_url=stack.base_url, timeout=httpx.Timeout(30.0)) as api:
        first = send(api, topic, "a", "1")
        body = CompactionPolicyUpdate(max_lag_ms=MAX_LAG_MS, delete_retention_ms=HOUR_MS)
        assert set_compaction_policy.sync_detailed(*NS, topic, client=api, body=body).status_code == 204
        got = get_compaction_policy.sync_detailed(*NS, topic, client=api)
        assert got.parsed == CompactionPolicy(
            keyless_policy=KeylessPolicy.DROP,
            delete_retention_ms=HOUR_MS,
            max_lag_ms=MAX_LAG_MS,
            min_cleanable_dirty_ratio=0.0,
        )
        second = send(api, topic, "b", "1")
        # the time trigger requests the run: nobody asked for it
        run_through(api, topic, compactor, second)
        assert [(m.key, m.value) for m in view(api, topic)] == [("a", "1"), ("b", "1")]
        assert first != second

        tombstone = send(api, topic, "a", "")
        ran = run_through(api, topic, compactor, tombstone)
        # the delete is in the compacted view, for a consumer rebuilding its state from it
        assert [(m.key, m.value, m.message_id) for m in view(api, topic)] == [
            ("b", "1", second),
            ("a", "", tombstone),
        ]

        # once it is older than deleteRetentionMs (lowered now: the compactor reads the policy
        # at each run), the next run drops it; here a run with nothing new, which is written
        # again because tombstones are kept a while
        published = next(m.publish_time for m in view(api, topic) if m.message_id == tombstone)
        body = CompactionPolicyUpdate(delete_retention_ms=SHORT_MS)
        assert set_compaction_policy.sync_detailed(*NS, topic, client=api, body=body).status_code == 204
        wait_until(lambda: time.time() * 1000 > published + SHORT_MS, 30, "the tombstone to age")
        assert put_compaction.sync_detailed(*NS, topic, client=api).status_code == 204
        run_through(api, topic, compactor, tombstone, after_ms=int(ran["endedMs"]))
        assert [(m.key, m.value) for m in view(api, topic)] == [("b", "1")]
