"""One campaign from start to table: database, cluster, load under faults, recovery, read-back,
checks.

1. A private PostgreSQL (or the shared one, see `postgres.py`) and the cluster, under a new
   temporary directory.
2. Topics and subscriptions; then the load and the fault schedule for `seconds`.
3. Time's up: no new fault and no new batch. The fault in progress is seen through, the batches
   in hand are retried until answered, the cluster must be healthy again.
4. Every topic is read from `earliest`; the consumers drain their subscriptions; each keyed topic
   is compacted a last time and its compacted view read.
5. The checker and the table. Every process is stopped by process group, the tmpfs unmounted
   and the directory removed, on success and on error alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.chaos.checker import Verdict, check
from bench.chaos.client import CarefulClient
from bench.chaos.cluster import Cluster, ClusterConfig
from bench.chaos.faults import FaultConfig, Faults
from bench.chaos.finale import Finale, lease_losses, topic_fences
from bench.chaos.history import History, dump
from bench.chaos.kafka_load import KafkaLoad, KafkaLoadConfig
from bench.chaos.known import known_topics
from bench.chaos.load import Load, LoadConfig
from bench.chaos.netns import unavailable as netns_unavailable
from bench.chaos.postgres import PrivatePostgres, SharedPostgres
from bench.chaos.report import Summary, figures, table


@dataclass(frozen=True)
class CampaignConfig:
    seconds: float = 180.0
    seed: int | None = None
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    load: LoadConfig = field(default_factory=LoadConfig)
    kafka: KafkaLoadConfig = field(default_factory=KafkaLoadConfig)
    faults: FaultConfig = field(default_factory=FaultConfig)
    # An ack counts as durable this long after it (with its whole batch) was answered, if no
    # fault happened meanwhile: a cursor flush interval plus this margin for a busy machine.
    ack_settle_margin_s: float = 2.0
    finish_timeout_s: float = 120.0
    compaction_timeout_s: float = 300.0  # a restarted compactor's Spark session may take minutes
    keep: bool = False
    logs_on_failure: Path | None = None


@dataclass
class Outcome:
    verdict: Verdict
    table: str
    figures: dict[str, Any]


async def open_database(root: Path) -> PrivatePostgres | SharedPostgres:
    private = PrivatePostgres(root)
    try:
        private.init()
        await private.start()
        return private
    except (RuntimeError, TimeoutError, OSError) as exc:
        private.close()
        reason = f"no private PostgreSQL ({exc}); the shared server cannot be stopped"
        print(f"chaos: {reason}", flush=True)
        shared = SharedPostgres(reason)
        await shared.start()
        return shared


async def run_campaign(config: CampaignConfig) -> Outcome:
    seed = config.seed if config.seed is not None else random.SystemRandom().randrange(10**9)
    print(f"chaos: seed {seed} (again with CHAOS_SEED={seed}), {config.seconds:g} s of load", flush=True)
    if config.cluster.links == "netns" and (reason := netns_unavailable()) is not None:
        raise RuntimeError(f"links in network namespaces: {reason}")
    root = Path(tempfile.mkdtemp(prefix="quire-chaos-"))
    history = History()
    database: PrivatePostgres | SharedPostgres | None = None
    cluster: Cluster | None = None
    client: CarefulClient | None = None
    load: Load | None = None
    kafka: KafkaLoad | None = None
    outcome: Outcome | None = None
    try:
        database = await open_database(root)
        cluster = Cluster(root, database.url, config.cluster)
        started = time.monotonic()
        await cluster.start()
        print(f"chaos: cluster up in {time.monotonic() - started:.1f} s under {root}", flush=True)
        client = CarefulClient(cluster.urls, random.Random(f"{seed}:client"))
        load = Load(client, history, seed, config.load)
        await load.setup()
        kafka = KafkaLoad(cluster.kafka_bootstrap, history, seed, config.kafka, root / "kafka-clients.log")
        await asyncio.to_thread(kafka.setup)
        faults = Faults(cluster, database, history, seed, config.faults)
        for line in history.skipped:
            print(f"chaos: skipped: {line}", flush=True)
        await _run_load(config, load, kafka, faults, history)
        outcome = await _finish(config, seed, cluster, database, load, kafka, client, history)
        return outcome
    finally:
        if load is not None:
            await load.stop()
        if kafka is not None:
            await asyncio.to_thread(kafka.stop)
        if client is not None:
            await client.close()
        if cluster is not None:
            await cluster.close()
        if database is not None:
            database.close()
        found = outcome is None or any(outcome.verdict.counts.values())
        _keep(config, root, history, failed=found)


def _keep(config: CampaignConfig, root: Path, history: History, failed: bool) -> None:
    """Remove the directory; keep it whole with `keep`, or its logs and the history in
    `logs_on_failure` when the campaign found a violation (known bugs' too) or could not finish."""
    if config.keep:
        dump(history, root / "history.jsonl")
        print(f"chaos: kept {root} (history in history.jsonl)", flush=True)
        return
    if failed and config.logs_on_failure is not None:
        config.logs_on_failure.mkdir(parents=True, exist_ok=True)
        for log in root.glob("*.log"):
            shutil.copy(log, config.logs_on_failure / log.name)
        dump(history, config.logs_on_failure / "history.jsonl")
        print(f"chaos: logs and history kept in {config.logs_on_failure}", flush=True)
    shutil.rmtree(root, ignore_errors=True)


async def _run_load(
    config: CampaignConfig, load: Load, kafka: KafkaLoad, faults: Faults, history: History
) -> None:
    stop = asyncio.Event()
    history.load_started = time.time()
    load.start()
    kafka.start()
    fault_task = asyncio.create_task(faults.run(stop))
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(fault_task), config.seconds)
    stop.set()
    load.stop_producing.set()
    kafka.stop_producing.set()
    history.load_ended = time.time()
    print("chaos: time is up; seeing the last fault through and the last batches answered", flush=True)
    await fault_task


async def _finish(
    config: CampaignConfig,
    seed: int,
    cluster: Cluster,
    database: Any,
    load: Load,
    kafka: KafkaLoad,
    client: CarefulClient,
    history: History,
) -> Outcome:
    phase = _Phases()
    unanswered = await load.producers_done(config.finish_timeout_s)
    if unanswered:
        history.note(f"{unanswered} producers never got an answer for their last batch")
    flushing = await asyncio.to_thread(kafka.producers_done, config.finish_timeout_s)
    if flushing:
        history.note(f"{flushing} Kafka producers still had messages without a delivery report")
    reason = await cluster.wait_healthy(config.finish_timeout_s)
    if reason:
        history.note(f"the cluster was not healthy at the end: {reason}")
    phase.done("last batches answered, cluster healthy")
    finale = Finale(load, config.finish_timeout_s, config.compaction_timeout_s)
    logs = await finale.read_logs()
    kafka_log = await asyncio.to_thread(kafka.read_back, config.finish_timeout_s)
    phase.done("topics read back")
    undrained = await finale.drain(logs)
    kafka_undrained = await asyncio.to_thread(kafka.drain, kafka_log, config.finish_timeout_s)
    kafka_log.committed = await asyncio.to_thread(kafka.committed)
    phase.done("subscriptions and the Kafka group drained")
    views = await finale.compacted_views()
    phase.done("final compactions run and read")
    await load.stop()
    faults = [*history.faults, *lease_losses(cluster, cluster.config.setting("QUIRE_BROKER_LEASE_MS"))]
    settle = cluster.config.cursor_flush_ms / 1000 + config.ack_settle_margin_s
    known = known_topics(history, cluster.root)
    moves = topic_fences(cluster, load.topics)
    verdict = check(history, logs, views, load.delivered, faults, settle, known, moves, kafka_log)
    if undrained:
        history.note(f"draining stopped after {config.finish_timeout_s:g} s with {undrained} undelivered")
    if kafka_undrained:
        history.note(
            f"the Kafka group stopped after {config.finish_timeout_s:g} s with {kafka_undrained} unread"
        )
    if kafka.errors:
        history.note("Kafka client errors: " + ", ".join(f"{k} {n}" for k, n in kafka.errors.most_common()))
    for line in client.unexpected[:20]:
        history.note(line)
    if len(client.unexpected) > 20:
        history.note(f"... and {len(client.unexpected) - 20} more unexpected answers")
    summary = Summary(
        seed=seed,
        seconds=config.seconds,
        cluster=(
            f"{config.cluster.bookies} bookies (E/Qw/Qa {'/'.join(map(str, config.cluster.ensemble))}), "
            f"{config.cluster.brokers} brokers, a compactor, an autorecovery process, {database.description}"
        ),
        settle_s=settle,
        logs=logs,
        lease_losses=len(faults) - len(history.faults),
        unexpected=len(client.unexpected),
        kafka=kafka_log,
    )
    text = table(history, verdict, summary)
    print(text, flush=True)
    return Outcome(verdict, text, figures(history, verdict, summary))


class _Phases:
    def __init__(self) -> None:
        self.since = time.monotonic()

    def done(self, what: str) -> None:
        now = time.monotonic()
        print(f"chaos: {what} in {now - self.since:.1f} s", flush=True)
        self.since = now


def env_seed() -> int | None:
    raw = os.environ.get("CHAOS_SEED", "")
    with contextlib.suppress(ValueError):
        return int(raw)
    return None
