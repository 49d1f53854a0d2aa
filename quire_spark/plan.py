"""What a read covers, decided on the driver: topic-partitions, their offsets and ledger ranges.

The driver asks the broker for each managed ledger's ledgers (internalStats: ids, entry counts,
ensemble histories and quorums, the last confirmed entry, the compaction horizon) and cuts the
messages between a start and an end offset into `LedgerRange`s, at most `max_entries` entries
each: one Spark partition per range, which the executor reads straight from the bookies.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from quire_spark.errors import QuireDataLossError, QuireOptionError
from quire_spark.offsets import EARLIEST, Id, after_entry, parse_any, parse_offsets_json, parse_position
from quire_spark.options import ReadOptions
from quire_spark.service import Service

log = logging.getLogger(__name__)
Segment = tuple[int, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class TopicPartition:
    topic: str  # as named by the user (the partitioned topic's name for a partition)
    partition: int  # -1: not partitioned
    ml_name: str  # the managed ledger: the topic, or `topic-partition-i`


@dataclass(frozen=True, slots=True)
class Ledger:
    ledger_id: int
    entries: int
    ensembles: tuple[Segment, ...]
    write_quorum: int
    ack_quorum: int
    entry_bytes: int  # average, for the read chunk size


@dataclass(frozen=True, slots=True)
class LedgerState:
    """One managed ledger as internalStats describes it."""

    ledgers: tuple[Ledger, ...]
    last_confirmed: tuple[int, int]  # L:E, E = -1 when the current ledger has no entry
    horizon: Id | None

    def latest(self) -> Id:
        """The end just after the last confirmed entry; when that is its ledger's last entry and
        a later ledger exists, the start of that ledger (so a ledger read to its end and later
        removed by retention is no loss)."""
        lid, eid = self.last_confirmed
        later = [x.ledger_id for x in self.ledgers if x.ledger_id > lid]
        if later:
            return Id(min(later), 0, 0)
        return after_entry(lid, eid)


@dataclass(frozen=True, slots=True)
class LedgerRange:
    """Entries first..last of one ledger; messages below `start` or at/after `end` are dropped."""

    tp: TopicPartition
    ledger: Ledger
    first_entry: int
    last_entry: int
    start: Id
    end: Id


def resolve(service: Service, options: ReadOptions) -> list[TopicPartition]:
    """The topic-partitions the options name, now (a pattern's new topics appear on later calls)."""
    names = list(options.topics)
    if options.pattern is not None:
        regex = options.topic_regex
        names = []
        for full in service.namespace_topics(options.namespace):
            short = full.split("/", 2)[2]
            base = short.rsplit("-partition-", 1)[0] if "-partition-" in short else short
            if regex.fullmatch(base):
                names.append(f"{options.namespace}/{base}")
        names = sorted(set(names))
    out: list[TopicPartition] = []
    for name in names:
        n = service.partitions(name)
        if n is None:
            if options.pattern is None:
                raise QuireOptionError(f"topic {name!r} does not exist")
            continue
        if n == 0:
            out.append(TopicPartition(name, -1, name))
        else:
            out.extend(TopicPartition(name, i, f"{name}-partition-{i}") for i in range(n))
    return out


def _ledger(info: dict[str, Any]) -> Ledger:
    segments = tuple(
        sorted((int(first), tuple(bookies)) for first, bookies in (info.get("ensembles") or {}).items())
    )
    entries = int(info["entries"])
    return Ledger(
        int(info["ledgerId"]),
        entries,
        segments,
        int(info.get("writeQuorum") or len(segments[0][1]) if segments else 1),
        int(info.get("ackQuorum") or 1),
        max(1, int(info["size"]) // entries) if entries > 0 else 1024,
    )


def states(service: Service, tps: list[TopicPartition]) -> dict[str, LedgerState]:
    """Each topic-partition's ledgers (one internalStats call per topic)."""
    out: dict[str, LedgerState] = {}
    for topic in sorted({tp.topic for tp in tps}):
        for ml_name, stats in service.internal_stats(topic).items():
            horizon = stats.get("compactionHorizon")
            out[ml_name] = LedgerState(
                tuple(_ledger(x) for x in stats["ledgers"] if x.get("ensembles")),
                parse_position(stats["lastConfirmedEntry"]),
                parse_any(horizon if horizon.count(":") == 2 else horizon + ":0") if horizon else None,
            )
    return out


def offsets(
    service: Service, spec: str, tps: list[TopicPartition], st: dict[str, LedgerState], what: str
) -> dict[str, Id]:
    """`earliest`, `latest` or JSON of ids per topic-partition (a partition it does not name
    gets `default`: earliest for a start, latest for an end)."""
    if spec in ("earliest", "latest"):
        return {tp.ml_name: EARLIEST if spec == "earliest" else st[tp.ml_name].latest() for tp in tps}
    given = parse_offsets_json(spec, what)
    known = {tp.ml_name for tp in tps}
    unknown = sorted(set(given) - known)
    if unknown:
        raise QuireOptionError(f"{what}: {unknown} are not among the topic-partitions read: {sorted(known)}")
    default = "earliest" if what == "startingOffsets" else "latest"
    out: dict[str, Id] = {}
    for tp in tps:
        value = given.get(tp.ml_name, default)
        if value == "earliest":
            out[tp.ml_name] = EARLIEST
        elif value == "latest":
            out[tp.ml_name] = st[tp.ml_name].latest()
        else:
            out[tp.ml_name] = parse_any(value)
    return out


def at_time(tps: list[TopicPartition], st: dict[str, LedgerState], ms: int, secret: str) -> dict[str, Id]:
    from quire_spark.seek import first_at

    return {tp.ml_name: first_at(tp, st[tp.ml_name], ms, secret) for tp in tps}


def lost(tp: TopicPartition, state: LedgerState, start: Id, fail: bool) -> Id:
    """The start, moved past what retention removed: QuireDataLossError naming the range, or
    (failOnDataLoss=false) a logged skip."""
    if start == EARLIEST or not state.ledgers:
        return start
    ids = [x.ledger_id for x in state.ledgers]
    if start.ledger_id in ids or start.ledger_id > ids[-1] or start.ledger_id > state.last_confirmed[0]:
        return start
    first = min(i for i in ids if i > start.ledger_id) if any(i > start.ledger_id for i in ids) else None
    if first is None:
        return start
    text = f"{tp.ml_name}: messages from {start} up to {first}:0:0 are gone (retention or truncation)"
    if fail:
        raise QuireDataLossError(text + "; failOnDataLoss=false skips them")
    log.warning("%s; skipped (failOnDataLoss=false)", text)
    return Id(first, 0, 0)


def ranges(
    tp: TopicPartition, state: LedgerState, start: Id, end: Id, max_entries: int
) -> Iterator[LedgerRange]:
    """The ledger ranges holding the messages in [start, end)."""
    lac_ledger, lac_entry = state.last_confirmed
    for ledger in state.ledgers:
        last = ledger.entries - 1
        if ledger.ledger_id == lac_ledger:
            last = min(last, lac_entry) if ledger.entries > 0 else lac_entry
        elif ledger.ledger_id > lac_ledger:
            continue
        first = 0
        if ledger.ledger_id < start.ledger_id or ledger.ledger_id > end.ledger_id:
            continue
        if ledger.ledger_id == start.ledger_id:
            first = start.entry_id
        if ledger.ledger_id == end.ledger_id:
            last = min(last, end.entry_id if end.batch_index > 0 else end.entry_id - 1)
        for lo in range(first, last + 1, max_entries):
            yield LedgerRange(tp, ledger, lo, min(last, lo + max_entries - 1), start, end)
