"""Per-topic and per-subscription Prometheus series of the broker, under Pulsar's names with a
`quire_` prefix (pulsar_rate_in -> quire_rate_in, pulsar_subscription_back_log ->
quire_subscription_back_log, ...), read from the topics service at each scrape.

Label cardinality is bounded: the `max_topics` topics with the largest backlog (then storage)
get series of their own, labelled `namespace` and `topic`; the others are summed into one series
labelled `namespace="_others", topic="_others"`. Within a topic, the `max_subscriptions` largest
subscriptions by backlog get their own `subscription` label and the rest are summed under
`subscription="_others"`. `quire_metrics_folded_topics` says how many topics were summed. A
partitioned topic is one topic here (its partitions summed). The figures are those of
`GET .../stats`: counters since the topic was opened on this broker, rates over the last stats
interval.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from topics.api import ClusterApi, SubscriptionSample, TopicSample

OTHERS = "_others"
TOPIC_LABELS = ["namespace", "topic"]
SUB_LABELS = ["namespace", "topic", "subscription"]

# name -> (help, counter?) ; the value is picked in _topic_values / _sub_values
TOPIC_SERIES: dict[str, tuple[str, bool]] = {
    "quire_rate_in": ("Messages per second stored, over the last stats interval", False),
    "quire_rate_out": ("Messages per second delivered to subscriptions and readers", False),
    "quire_throughput_in": ("Bytes per second stored", False),
    "quire_throughput_out": ("Bytes per second delivered", False),
    "quire_in_messages": ("Messages stored since the topic was opened on this broker", True),
    "quire_in_bytes": ("Bytes stored since the topic was opened on this broker", True),
    "quire_out_messages": ("Messages delivered since the topic was opened on this broker", True),
    "quire_out_bytes": ("Bytes delivered since the topic was opened on this broker", True),
    "quire_storage_size": ("Bytes stored in the topic's ledgers", False),
    "quire_storage_backlog_size": ("Bytes stored after the slowest subscription's position", False),
    "quire_msg_backlog": ("Messages in the largest subscription backlog", False),
    "quire_producers_count": ("Producers heard within the idle time", False),
    "quire_subscriptions_count": ("Subscriptions", False),
}
SUB_SERIES: dict[str, tuple[str, bool]] = {
    "quire_subscription_back_log": ("Messages not acked, delivered or not", False),
    "quire_subscription_unacked_messages": ("Messages delivered and not acked", False),
    "quire_subscription_msg_rate_out": ("Messages per second delivered", False),
    "quire_subscription_msg_throughput_out": ("Bytes per second delivered", False),
    "quire_subscription_msg_rate_redeliver": ("Messages per second delivered again", False),
    "quire_subscription_consumers_count": ("Consumers heard within the idle time", False),
    "quire_subscription_out_messages": ("Messages delivered", True),
    "quire_subscription_redelivered_messages": ("Messages delivered again (nack, ack timeout)", True),
    "quire_subscription_expired_messages": ("Messages acked by expiry, TTL or age eviction", True),
    "quire_subscription_dead_lettered_messages": ("Messages written to the dead-letter topic", True),
}


@dataclass(slots=True)
class _Sum:
    """Figures of one series: a topic's, a subscription's, or a sum of folded ones."""

    values: dict[str, float] = field(default_factory=dict)

    def add(self, values: dict[str, float]) -> None:
        for k, v in values.items():
            self.values[k] = self.values.get(k, 0.0) + v


def _topic_values(t: TopicSample) -> dict[str, float]:
    return {
        "quire_rate_in": t.inbound[2],
        "quire_rate_out": t.outbound[2],
        "quire_throughput_in": t.inbound[3],
        "quire_throughput_out": t.outbound[3],
        "quire_in_messages": t.inbound[0],
        "quire_in_bytes": t.inbound[1],
        "quire_out_messages": t.outbound[0],
        "quire_out_bytes": t.outbound[1],
        "quire_storage_size": t.storage_bytes,
        "quire_storage_backlog_size": t.backlog_bytes,
        "quire_msg_backlog": t.backlog,
        "quire_producers_count": t.producers,
        "quire_subscriptions_count": len(t.subscriptions),
    }


def _sub_values(s: SubscriptionSample) -> dict[str, float]:
    return {
        "quire_subscription_back_log": s.backlog,
        "quire_subscription_unacked_messages": s.unacked,
        "quire_subscription_msg_rate_out": s.out[2],
        "quire_subscription_msg_throughput_out": s.out[3],
        "quire_subscription_msg_rate_redeliver": s.redelivered[1],
        "quire_subscription_consumers_count": s.consumers,
        "quire_subscription_out_messages": s.out[0],
        "quire_subscription_redelivered_messages": s.redelivered[0],
        "quire_subscription_expired_messages": s.expired,
        "quire_subscription_dead_lettered_messages": s.dead_lettered,
    }


def fold(
    samples: Sequence[TopicSample], max_topics: int, max_subscriptions: int
) -> tuple[list[tuple[tuple[str, str], _Sum, dict[str, _Sum], dict[str, int]]], int]:
    """The series to expose: (namespace, topic) -> topic figures, subscription figures and quota
    events, with the topics and subscriptions past the caps summed under `_others`; and how many
    topics were folded."""
    ranked = sorted(samples, key=lambda t: (-t.backlog, -t.storage_bytes, t.topic))
    kept, folded = ranked[:max_topics], ranked[max_topics:]
    out = []
    for t in kept:
        out.append(((t.namespace, t.topic), *_one(t, max_subscriptions)))
    if folded:
        total, subs, events = _Sum(), {OTHERS: _Sum()}, dict.fromkeys(("held", "refused", "evicted"), 0)
        for t in folded:
            figures, _, quota = _one(t, 0)
            total.add(figures.values)
            for s in t.subscriptions:
                subs[OTHERS].add(_sub_values(s))
            for k, v in quota.items():
                events[k] = events.get(k, 0) + v
        out.append(((OTHERS, OTHERS), total, subs if any(t.subscriptions for t in folded) else {}, events))
    return out, len(folded)


def _one(t: TopicSample, max_subscriptions: int) -> tuple[_Sum, dict[str, _Sum], dict[str, int]]:
    ranked = sorted(t.subscriptions, key=lambda s: (-s.backlog, s.name))
    subs: dict[str, _Sum] = {}
    for s in ranked[:max_subscriptions]:
        subs[s.name] = _Sum(_sub_values(s))
    if len(ranked) > max_subscriptions:
        rest = subs[OTHERS] = _Sum()
        for s in ranked[max_subscriptions:]:
            rest.add(_sub_values(s))
    return _Sum(_topic_values(t)), subs, dict(t.quota_events)


def _family(
    name: str, help_text: str, counter: bool, labels: list[str]
) -> GaugeMetricFamily | CounterMetricFamily:
    if counter:
        return CounterMetricFamily(name, help_text, labels=labels)
    return GaugeMetricFamily(name, help_text, labels=labels)


class TopicCollector(Collector):
    """The topic and subscription series, read from `ClusterApi.metrics_snapshot` at scrape."""

    def __init__(self, topics: ClusterApi, max_topics: int, max_subscriptions: int) -> None:
        self._topics = topics
        self._max_topics = max_topics
        self._max_subscriptions = max_subscriptions

    def describe(self) -> Iterator[Metric]:
        return self._families([], 0)

    def collect(self) -> Iterator[Metric]:
        series, folded = fold(self._topics.metrics_snapshot(), self._max_topics, self._max_subscriptions)
        return self._families(series, folded)

    @staticmethod
    def _families(
        series: Iterable[tuple[tuple[str, str], _Sum, dict[str, _Sum], dict[str, int]]], folded: int
    ) -> Iterator[Metric]:
        series = list(series)
        topic_families = {n: _family(n, h, c, TOPIC_LABELS) for n, (h, c) in TOPIC_SERIES.items()}
        sub_families = {n: _family(n, h, c, SUB_LABELS) for n, (h, c) in SUB_SERIES.items()}
        quota = CounterMetricFamily(
            "quire_backlog_quota_events",
            "Backlog quota events: produces held, produces refused, cursors moved by eviction",
            labels=[*TOPIC_LABELS, "event"],
        )
        for (namespace, topic), figures, subs, events in series:
            for name, family in topic_families.items():
                family.add_metric([namespace, topic], figures.values.get(name, 0.0))
            for sub, sub_figures in subs.items():
                for name, family in sub_families.items():
                    family.add_metric([namespace, topic, sub], sub_figures.values.get(name, 0.0))
            for event, count in sorted(events.items()):
                quota.add_metric([namespace, topic, event], count)
        yield from topic_families.values()
        yield from sub_families.values()
        yield quota
        yield GaugeMetricFamily(
            "quire_metrics_folded_topics",
            'Topics past QUIRE_METRICS_MAX_TOPICS, summed under topic="_others"',
            value=folded,
        )
